"""Turning a group into advice: its ring hops, where it sits (sockets, NUMA node, numactl), how CUDA
numbers it, and what TensorFlow's MirroredStrategy needs (devices, cross-device ops); and checking
the ask before any search.

CUDA numbering comes from ``gputopo.numbering`` (the one owner of ``CUDA_DEVICE_ORDER`` /
``CUDA_VISIBLE_DEVICES`` rules).
"""

from __future__ import annotations

import itertools
from typing import Any

from gputopo.analysis.place.locality import same_socket
from gputopo.analysis.recommend.problem import CENTI, Problem, numa_domain_of
from gputopo.analysis.recommend.result import GroupAdvice, GroupKey, RingHop
from gputopo.errors import InputError
from gputopo.model import Link, Topology
from gputopo.notation import format_cpu_list, format_gbps, pair_list
from gputopo.numbering import cuda_numbers


def check_ask(topology: Topology, gpus: int, jobs: int, require: list[int], exclude: list[int], known: set[int]) -> None:
    """``InputError`` for an ask that cannot be met, before any search."""
    total = len(known)
    if total == 0:
        raise InputError("the topology lists no GPUs")
    if gpus < 1:
        raise InputError(f"--gpus must be at least 1 (got {gpus})")
    if jobs < 1:
        raise InputError(f"--jobs must be at least 1 (got {jobs})")
    for g in require + exclude:
        if g not in known:
            raise InputError(f"GPU {g} does not exist; this topology has GPUs {format_cpu_list(sorted(known))}")
    both = sorted(set(require) & set(exclude))
    if both:
        raise InputError(f"GPU {', '.join(map(str, both))} is both required and excluded")
    if gpus > total:
        raise InputError(f"asked for {gpus} GPUs but the topology has only {total}")
    if total > 1 and not topology.links:  # an nccl-tests output: a collective's figures, no pair of GPUs
        source = f"{topology.source} ({topology.source_detail})" if topology.source_detail else topology.source
        raise InputError(f"{source} lists {total} GPUs but says nothing of how any two are linked, so groups cannot "
                         "be ranked: add `nvidia-smi topo -m` of the same host (--from topo.txt --from this file)")
    available = total - len(exclude)
    if gpus * jobs > available:
        what = f"{jobs} jobs x {gpus} GPUs = {gpus * jobs}" if jobs > 1 else f"{gpus} GPUs"
        after = " after --exclude" if exclude else ""
        raise InputError(f"asked for {what} but only {available} GPUs are available{after}")
    if len(require) > gpus * jobs:
        room = f"a group has only {gpus}" if jobs == 1 else f"{jobs} jobs of {gpus} use only {gpus * jobs}"
        raise InputError(f"{len(require)} GPUs are required but {room}")


def advise_group(problem: Problem, members: tuple[int, ...], key: GroupKey) -> GroupAdvice:
    """Everything needed to train on the group at ``members`` (positions) with ranking ``key``."""
    group = GroupAdvice(gpus=[problem.index[i] for i in members], key=key)
    _describe_ring(problem, members, group)
    _describe_locality(problem, group)
    _describe_cuda_numbering(problem, group)
    _choose_cross_device_ops(problem, group)
    _p2p_caveat(problem, group)
    return group


def _p2p_caveat(problem: Problem, group: GroupAdvice) -> None:
    """The pairs of ``group`` whose P2P is broken today and what to do meanwhile (``caveat``): doctor's
    pair health (ACS redirect, the IOMMU translating) where no measurement says otherwise, or a
    measurement slower with P2P than staged; or a byte check that found peer copies wrong."""
    from gputopo.analysis.recommend.caveat import all_staged, p2p_caveat

    wrong = next((note for note in (problem.topology.reading_notes if problem.topology is not None else [])
                  if note.code == "nvbandwidth-wrong-data" and note.facts.get("peer")), None)
    if wrong is not None and group.same_host and len(group.gpus) > 1:
        # The byte check names no pair: every pair of the group is suspect, NVLink ones too.
        group.p2p_broken_pairs = list(itertools.combinations(sorted(group.gpus), 2))
        group.p2p_disable_advised = True
        group.p2p_caveat = (
            f"nvbandwidth's byte check found a GPU-to-GPU copy on this box delivering wrong data "
            f"({', '.join(wrong.facts.get('tests') or ['a device-to-device test'])}; it does not say which pair): "
            "do not trust training across these GPUs until it passes (`gputopo doctor`: the IOMMU, ACS, the driver "
            "and Fabric Manager); meanwhile NCCL_P2P_DISABLE=1 (in the environment above) keeps NCCL off peer copies")
        group.cross_device_ops_reason += "; with NCCL_P2P_DISABLE=1 until peer copies pass, NCCL's rings copy through host memory"
        all_staged(problem, group)
        return
    p2p_caveat(problem, group)


def _describe_ring(problem: Problem, members: tuple[int, ...], group: GroupAdvice) -> None:
    """The best ring's order, hops, slowest hop and all-reduce speeds; the group's total bandwidth."""
    from gputopo.analysis.expect.nccl_transport import nccl_level

    level = nccl_level(problem.topology)
    bottleneck_centi, order = problem.ring(tuple(members))
    ring = [problem.index[i] for i in order]
    k = len(ring)
    group.ring = ring
    if k >= 2:
        pairs = list(zip(ring, ring[1:] + ring[:1])) if k > 2 else [(ring[0], ring[1])]
        for a, b in pairs:
            link = problem.links[(a, b)]
            gbps = problem.own_figure(a, b)[0] / CENTI  # (a measured figure itself, not its noise class's)
            group.hops.append(RingHop(a, b, link.type, gbps, problem.estimate_basis[(a, b)],
                                      hop_label(link, tf=problem.topology is None or problem.topology.source == "tf-log"),
                                      _transport(link, level)))
    group.ring_text = "-".join(str(g) for g in ring + ring[:1]) if k > 2 else "-".join(str(g) for g in ring)
    if k >= 2:
        slowest = min(group.hops, key=lambda h: h.gbps)
        group.slowest_hop = slowest
        bottleneck_centi = round(slowest.gbps * CENTI)
        group.bottleneck_gbps = bottleneck_centi / CENTI
        group.bottleneck = (
            f"{slowest.label} between GPU {slowest.a} and GPU {slowest.b}, ~{format_gbps(slowest.gbps)} GB/s"
            + (" (measured)" if slowest.basis == "measured" else
               " (at least: a fact its speed depends on is not in the source)" if slowest.basis == "assumed" else "")
        )
        group.allreduce_busbw_gbps = bottleneck_centi / CENTI
        group.allreduce_gbps = round(bottleneck_centi / CENTI * k / (2 * (k - 1)), 2)
    else:
        group.bottleneck = "one GPU: no all-reduce between GPUs"
    gpus = group.gpus  # the key's total, but with measured pairs' own figures (not their noise classes')
    group.total_link_gbps = (sum(problem.own_figure(a, b)[0] for x, a in enumerate(gpus) for b in gpus[x + 1 :])
                             if problem.measured else group.key[3]) / CENTI


def _transport(link: Link, level: Any) -> str | None:
    """How NCCL connects the pair at ``level``: "P2P", "SHM"; None where it is not known: nothing is
    known of the link, or only that the pair can peer while its path is not (a TF log's pairs), so
    whether the path lies within NCCL's P2P level is unknown (only ``SYS`` takes every path, ``LOC`` none)."""
    from gputopo.analysis.expect.nccl_transport import uses_p2p

    if link.can_peer is False:
        return "SHM"
    if link.type == "UNKNOWN" and not link.is_nvlink:
        if level.level == "LOC":
            return "SHM"
        return "P2P" if link.can_peer is True and level.level == "SYS" else None
    return "P2P" if uses_p2p(link, level) else "SHM"


def _describe_locality(problem: Problem, group: GroupAdvice) -> None:
    """Hosts, NUMA nodes, whether the group stays on one socket, and the numactl prefix to use."""
    gpu_objs = [problem.gpus[g] for g in group.gpus]
    group.hosts = sorted({g.host for g in gpu_objs if g.host is not None})
    group.same_host = len({g.host for g in gpu_objs}) == 1
    group.numa_domains = problem.rank_of_key(group.key).numa_nodes
    domains = [(g.host, numa_domain_of(g)) for g in gpu_objs]
    placed = {domain for domain in domains if domain[1] is not None}
    if placed and len(placed) < len(set(domains)):
        # The rank counts the unplaced GPUs as a node of their own (groups the source places fully
        # rank first); in words, only the nodes the source gives are counted, the rest named.
        group.numa_domains = len(placed)
        group.numa_unknown_gpus = sorted(g.index for g, domain in zip(gpu_objs, domains) if domain[1] is None)
    group.same_socket = _same_socket(problem, group)
    numa_nodes = {g.numa_node for g in gpu_objs}
    affinities = {g.cpu_affinity for g in gpu_objs}
    if group.same_host and len(numa_nodes) == 1 and None not in numa_nodes and next(iter(numa_nodes)) >= 0:
        node = next(iter(numa_nodes))
        group.numa_node = node
        group.numactl = f"numactl --cpunodebind={node} --membind={node}"
    elif group.same_host and len(affinities) == 1 and None not in affinities:
        group.numactl = f"numactl --physcpubind={next(iter(affinities))}"


def _describe_cuda_numbering(problem: Problem, group: GroupAdvice) -> None:
    """CUDA_VISIBLE_DEVICES (per host for a multi-host group) and MirroredStrategy's device lists."""
    number_of = cuda_numbers(problem.topology)
    if group.same_host:
        numbers = sorted(number_of[g] for g in group.gpus)
        group.cuda_visible_devices = ",".join(str(n) for n in numbers)
        group.mirrored_strategy_devices = [f"/gpu:{i}" for i in range(len(group.gpus))]
        group.mirrored_strategy_devices_all_visible = [f"/gpu:{n}" for n in numbers]
        if group.hosts:  # one host of a multi-host topology: CUDA on that host numbers its GPUs from 0
            group.cuda_visible_devices_by_host = {group.hosts[0]: group.cuda_visible_devices}
        return
    by_host: dict[str, list[int]] = {}
    for g in group.gpus:
        by_host.setdefault(str(problem.gpus[g].host), []).append(number_of[g])
    group.cuda_visible_devices_by_host = {h: ",".join(map(str, sorted(v))) for h, v in by_host.items()}
    group.cuda_visible_devices = " ".join(f"{h}:{v}" for h, v in group.cuda_visible_devices_by_host.items())
    group.mirrored_strategy_devices = []
    group.mirrored_strategy_devices_all_visible = []


def hop_label(link: Link, tf: bool = True) -> str:
    """The link word users know; links read from a TF log alone only say whether TF could peer
    (``TF:P2P``), those of other tools that only say it (p2pBandwidthLatencyTest's peer lines, an
    NCCL log, `topo -p2p`) ``P2P`` / ``no-P2P``. Problems `gputopo doctor` found on the pair's path
    follow (``PIX, doctor: acs``)."""
    health = f", doctor: {'/'.join(link.health)}" if link.health else ""
    if link.type != "UNKNOWN":
        return link.type + health
    if link.can_peer is None:
        return "unknown" + health
    return ("TF:" if tf else "") + ("P2P" if link.can_peer else "no-P2P") + health


def _same_socket(problem: Problem, group: GroupAdvice) -> bool | None:
    """One CPU socket? True/False where known (the source's sockets) or implied (one NUMA node, a PCIe
    path below SYS); None where the source cannot tell (NUMA nodes apart, sockets unknown; a TF log:
    GPUs it says cannot peer most often sit under different sockets, but a GPU model without P2P or
    a driver setting say the same, so that is not taken as a socket)."""
    if not group.same_host:
        return False
    verdicts = []
    for a, b in itertools.combinations(group.gpus, 2):
        verdicts.append(same_socket(problem.topology, a, b) if problem.topology is not None else None)
    if False in verdicts:
        return False
    return None if None in verdicts else True


def _peers(link: Link) -> bool | None:
    """Whether two GPUs can copy directly (P2P): the capability bits where known, else a guess
    from the path (NVLink yes; PCIe within a socket yes; across sockets no, as on Intel QPI/UPI);
    ``None`` where neither is known (a TF log that says nothing about the pair)."""
    state = link.can_peer
    if state is not None:
        return state
    if link.is_nvlink:
        return True
    if link.type == "UNKNOWN":
        return None
    return link.type in ("PIX", "PXB", "PHB", "NODE")


def _not_peering_text(links: Any, not_peering: list[tuple[int, int]]) -> str:
    """"pairs X cannot peer", where the source says so; pairs only guessed not to (SYS, no P2P status in
    the source) said to be a guess, with what would tell."""
    known = [pair for pair in not_peering if links[pair].can_peer is False]
    guessed = [pair for pair in not_peering if links[pair].can_peer is None]
    parts = [f"pairs {pair_list(known, limit=4, more=' ...')} cannot peer"] if known else []
    if guessed:
        parts.append(
            f"pairs {pair_list(guessed, limit=4, more=' ...')} (SYS) most likely cannot peer (guessed from the path "
            "word: the source gives no P2P status; `nvidia-smi topo -p2p r` tells)"
        )
    return " and ".join(parts)


def _beyond_nccl_level(links: Any, pairs: list[tuple[int, int]], level: Any = None) -> str:
    """Where PCIe pairs that peer lie beyond NCCL's P2P level (``analysis.expect.nccl_transport``: its
    default PXB stops at a CPU host bridge, PHB, NODE, SYS; or the level an NCCL log shows), NCCL sends
    them through host memory all the same."""
    from gputopo.analysis.expect.nccl_transport import nccl_level, uses_p2p

    level = level if level is not None else nccl_level(None)
    far = [pair for pair in pairs if links[pair].type != "UNKNOWN" and not uses_p2p(links[pair], level)]
    unknown = [pair for pair in pairs if links[pair].type == "UNKNOWN" and not links[pair].is_nvlink]
    if not far and unknown and level.level not in ("SYS", "LOC"):
        # A TF log says which pairs can peer, never their path: NCCL's level may still stop short of them.
        return (f" where their path is within NCCL's P2P level (the source does not say how pairs "
                f"{pair_list(unknown, limit=4, more=' ...')} are connected: " +
                ("within PCIe switches NCCL's default level, PXB, allows P2P; across a CPU host bridge or between "
                 "CPUs NCCL copies through host memory (SHM) unless the job sets NCCL_P2P_LEVEL=SYS)"
                 if level.source == "default" else
                 f"the NCCL log shows it set to {level.level}; beyond it NCCL copies through host memory (SHM))"))
    if not far:
        return ""
    where = ("it stops at PCIe switches (PXB) on most hosts" if level.source == "default"
             else f"the NCCL log shows it set to {level.level}")
    return (
        f" as far as NCCL's P2P level lets them: {where}, so between "
        f"pairs {pair_list(far, limit=4, more=' ...')} ({'/'.join(sorted({links[pair].type for pair in far}))}) NCCL "
        "copies through host memory (SHM)" + (" unless the job sets NCCL_P2P_LEVEL=SYS" if level.source == "default" else "")
    )


def _set_ops(group: GroupAdvice, ops: str | None, reason: str) -> None:
    group.cross_device_ops = ops
    group.cross_device_ops_code = f"tf.distribute.{ops}()" if ops else None
    group.cross_device_ops_reason = reason


def _choose_cross_device_ops(problem: Problem, group: GroupAdvice) -> None:
    """Pick MirroredStrategy's cross-device ops from what TensorFlow offers, with the reason.

    - One GPU: nothing to reduce.
    - Several hosts: MirroredStrategy is single-host; MultiWorkerMirroredStrategy with NCCL.
    - Every pair can peer: ``NcclAllReduce`` (TF's default): NCCL's rings run GPU to GPU.
    - Pairs that cannot peer, but the group splits into two halves that can, with GPU j of the first
      half peering GPU j of the second (DGX-1's wiring, the exact shape TF's
      ``HierarchicalCopyAllReduce`` was written for: it reduces inside each half, then across those
      j <-> j+half links): ``HierarchicalCopyAllReduce``.
    - Otherwise: still ``NcclAllReduce`` — NCCL notices pairs that cannot peer and stages those hops
      through host memory itself, in a ring; ``ReductionToOneDevice`` would funnel every gradient
      through one device and ``HierarchicalCopyAllReduce`` would copy across pairs that cannot peer.
    """
    if len(group.gpus) == 1:
        group.strategy = "OneDeviceStrategy"
        _set_ops(group, None, "one GPU: MirroredStrategy has nothing to all-reduce (or use OneDeviceStrategy)")
        return
    if not group.same_host:
        group.strategy = "MultiWorkerMirroredStrategy"
        _set_ops(
            group, None,  # MultiWorkerMirroredStrategy takes communication options instead
            "the group spans several hosts: MirroredStrategy is single-host, so run one worker per host "
            "with MultiWorkerMirroredStrategy and NCCL over the shared NVLink domain",
        )
        group.cross_device_ops_code = (
            "tf.distribute.MultiWorkerMirroredStrategy(communication_options="
            "tf.distribute.experimental.CommunicationOptions(implementation="
            "tf.distribute.experimental.CommunicationImplementation.NCCL))"
        )
        return
    from gputopo.analysis.expect.nccl_transport import nccl_level

    _set_ops(group, *_single_host_ops(problem.links, group.gpus, group.ring, nccl_level(problem.topology)))
    if problem.topology is not None and any(n.code == "pcie-only-matrix" for n in problem.topology.reading_notes):
        group.cross_device_ops_reason += ("; the path words are `nvidia-smi topo -mp`'s, which shows no NVLink: "
                                          "pairs NVLink joins peer whatever their word")


def _single_host_ops(links: Any, gpus: list[int], ring: list[int], level: Any = None) -> tuple[str, str]:
    """(cross-device ops, reason) for two or more GPUs on one host; see ``_choose_cross_device_ops``."""
    pairs = list(itertools.combinations(gpus, 2))
    not_peering = [(a, b) for a, b in pairs if _peers(links[(a, b)]) is False]
    unknown = [(a, b) for a, b in pairs if _peers(links[(a, b)]) is None]
    if unknown and not not_peering:
        return "NcclAllReduce", (
            f"the source does not say whether pairs {pair_list(unknown, limit=4, more=' ...')} can peer; NcclAllReduce (TF's default "
            "on GPUs) suits either way: NCCL's rings run GPU to GPU where they can and stage hops through host "
            "memory where they cannot"
        )
    if not not_peering:
        kind = "NVLink" if all(links[(a, b)].is_nvlink for a, b in pairs) else "P2P"
        guessed = [(a, b) for a, b in pairs if links[(a, b)].can_peer is None and not links[(a, b)].is_nvlink]
        if guessed:  # no P2P status in the source: PCIe within one NUMA node usually peers, not always (ACS, IOMMU)
            return "NcclAllReduce", (
                "every pair should copy directly over PCIe (inferred from the path words: the source gives no P2P "
                "status; ACS or a translating IOMMU can still forbid it, `gputopo doctor` tells), so NCCL's rings "
                f"run GPU to GPU{_beyond_nccl_level(links, pairs, level)}; it is TF's default on GPUs"
            )
        return "NcclAllReduce", (
            f"every pair can copy directly ({kind}), so NCCL's rings run GPU to GPU{_beyond_nccl_level(links, pairs, level)}; "
            "it is TF's default on GPUs"
        )
    pairs_text = _not_peering_text(links, not_peering)
    hops = [tuple(sorted(hop)) for hop in zip(ring, ring[1:] + ring[:1])] if len(ring) > 2 else []
    if hops and all(links[hop].is_nvlink and _peers(links[hop]) is True for hop in hops):  # type: ignore[index]
        words = sorted({links[hop].type for hop in hops})  # type: ignore[index]
        return "NcclAllReduce", (
            f"{pairs_text}, but the ring {'-'.join(map(str, ring + ring[:1]))} is NVLink on every hop "
            f"({'/'.join(words)}): NCCL builds its rings over those links and never uses the pairs that cannot peer; "
            f"HierarchicalCopyAllReduce (built for DGX-1) is the fallback where NCCL is unavailable"
        )
    k = len(gpus)
    if k % 2 == 0 and k >= 4:
        half = k // 2
        first, second = gpus[:half], gpus[half:]
        halves_peer = all(_peers(links[(a, b)]) is True for part in (first, second) for a, b in itertools.combinations(part, 2))
        cross_peer = all(_peers(links[(first[j], second[j])]) is True for j in range(half))
        if halves_peer and cross_peer:
            return "HierarchicalCopyAllReduce", (
                f"{pairs_text}, but GPUs {format_cpu_list(first)} and {format_cpu_list(second)} can among "
                f"themselves and GPU j of one half reaches GPU j of the other directly: the DGX-1 shape "
                f"HierarchicalCopyAllReduce was built for (reduce in each half, then across those links); "
                f"NcclAllReduce is the close alternative"
            )
    return "NcclAllReduce", (
        f"{pairs_text}; NCCL notices and stages those hops through host memory itself, still "
        f"as a ring, which beats ReductionToOneDevice (every gradient through one device) and "
        f"HierarchicalCopyAllReduce (built for DGX-1); if NCCL is unavailable (Windows) use "
        f"tf.distribute.ReductionToOneDevice(reduce_to_device='/cpu:0')"
    )
