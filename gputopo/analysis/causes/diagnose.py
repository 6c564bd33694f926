"""Topology -> plain-language findings about how the GPUs are wired. Pure functions, no I/O.

Each finding has a stable ``code`` (scripts and tests key on it), a message a person can act on,
the GPUs it is about, and a ``fix`` where one exists. Codes:

=======================  ===================================================================
``virtual-machine``      nvidia-smi shows a hypervisor's flat virtual PCI topology (nothing is concluded from it)
``cross-socket``         GPUs split over NUMA nodes with SYS pairs between them; "CPU sockets" only where known
``pcie-link-narrow``  a GPU's PCIe link runs with fewer lanes than it can (x8 of x16)
``pcie-link-slow``    a GPU at P0 runs its link below its top generation: it trained down (inferred)
``pcie-link-slow-idle``  a GPU at P8 or lower power runs below its top generation: idle, by design
``pcie-link-slow-maybe-idle``   a GPU's PCIe link runs below its top generation, its state unknown (often just idle)
``p2p-<word>``           pairs without P2P, one finding per NVML reason word (``p2p-tns``, ``p2p-dr``)
``nvswitch-fabric``      NVSwitch: every pair has the same NVLink bandwidth
``nvlink-summary``       direct NVLinks (no switch): generation, links per GPU, which pairs have them
``no-nvlink``            several GPUs and no NVLink at all: every copy uses PCIe
``nvlink-links-down``    a GPU has fewer active NVLinks than its peers of the same model; from text, none
                         while its peers share an NVSwitch, or a pair joined by fewer NVLinks than the
                         other NVLinked pairs (``nvlink_findings``)
``mig-enabled``          MIG is on: no P2P/NCCL across MIG instances
``mixed-gpu-models``     GPUs of different models: synchronous training waits for the slowest
``sources-disagree``     several sources of one host (``--from`` twice, a mixed paste) say different things
``gpus-joined-by-index`` sources without PCI bus ids were joined by GPU index (same numbering assumed)
=======================  ===================================================================

With a TensorFlow view attached (``--tf-log``), ``gputopo.analysis.causes.tf_crosscheck.tf_findings`` adds
its findings (imported lazily, and skipped where that module is not installed).
"""

from __future__ import annotations

import importlib.util
import itertools
from collections import defaultdict

from gputopo.analysis.causes.disagreements import disagreement_findings
from gputopo.analysis.expect.measured import measured_links
from gputopo.analysis.causes.nccl_paths import nccl_if_cuda_allows, nccl_without_p2p, refused_pairs
from gputopo.analysis.causes.sys_within_numa import sys_within_numa_node
from gputopo.analysis.causes.nvlink_findings import nvlink_fabric, nvlinks_down
from gputopo.analysis.causes.observed_findings import observed_findings
from gputopo.analysis.causes.vm import virtual_machine
from gputopo.analysis.causes.slow_gpu_findings import link_slow_gpu_causes
from gputopo.analysis.causes.pcie_findings import pcie_degraded
from gputopo.analysis.place.locality import (
    SYS_MEANING,
    link_sides,
    numa_crossing_links,
    socket_groups,
    sockets_shown_apart,
    sockets_known,
    vm_evidence,
)
from gputopo.model import P2P_OK, P2P_STATUS_MEANING, Finding, Link, Topology
from gputopo.notation import gpu_list, gpus_word, pair_list

# Sockets known, their link not named (NVML and sysfs do not say it): Intel's or AMD's, said both ways.
DEFAULT_INTERCONNECT = "the link between CPU sockets (QPI/UPI on Intel, Infinity Fabric on AMD)"

P2P_FIX = {
    "DR": (
        "P2P was switched off by a driver registry key: on Linux look for an NVreg_RegistryDwords option "
        "in /etc/modprobe.d/*.conf (on Windows, the NVIDIA registry keys), remove it and reload the driver "
        "or reboot, unless it was set on purpose because peer traffic is unreliable on this platform"
    ),
    "TNS": "train on GPUs under one CPU socket (`gputopo recommend` picks such groups)",
    "CNS": (
        "check for a BIOS update and the PCIe ACS / IOMMU settings (ACS on PCIe switches forces peer "
        "traffic up through the CPU); otherwise train on GPUs that can peer"
    ),
}


def diagnose(topology: Topology) -> list[Finding]:
    """Every finding about ``topology``, most important kinds first; does not modify it."""
    findings: list[Finding] = []
    findings += _virtual_machine(topology)
    findings += _cross_socket(topology)
    findings += sys_within_numa_node(topology)
    findings += _p2p_unsupported(topology)
    findings += _mig(topology)
    findings += _mixed_models(topology)
    findings += nvlinks_down(topology)
    findings += pcie_degraded(topology)
    findings += nvlink_fabric(topology)
    findings += disagreement_findings(topology)
    findings += observed_findings(topology)
    if topology.tf is not None and importlib.util.find_spec("gputopo.analysis.causes.tf_crosscheck") is not None:
        from gputopo.analysis.causes.tf_crosscheck import tf_findings

        findings += tf_findings(topology)
    link_slow_gpu_causes(findings, topology.diagnostics)
    return findings


# --- where the GPUs sit ---------------------------------------------------------------------------


def _virtual_machine(topology: Topology) -> list[Finding]:
    evidence = vm_evidence(topology)
    if evidence is None:
        return []
    # one GPU: no pair, so what the hypervisor hides of the wiring changes nothing
    return [virtual_machine(evidence, topology.gpu_indices, one_gpu=len(topology.gpus) == 1, from_topology=True)]


def _group_nodes(topology: Topology, groups: list[list[int]]) -> list[str] | None:
    """Each group's NUMA node(s) as text, where every GPU of each group says the same; else None."""
    texts = []
    for grp in groups:
        values = {topology.gpu(g).numa_affinity or (None if topology.gpu(g).numa_node is None else str(topology.gpu(g).numa_node)) for g in grp}
        if len(values) != 1 or None in values:
            return None
        texts.append(next(iter(values)))  # type: ignore[arg-type]
    return texts


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _where(topology: Topology, groups: list[list[int]]) -> tuple[str, str, str, str]:
    """``(where the groups are, the other side, the link between them, one unit)`` in words; sockets
    only where the source knows them, else NUMA nodes with what SYS means."""
    nodes = _group_nodes(topology, groups)
    known = sockets_known(topology, [g for grp in groups for g in grp])
    group_sockets = [{topology.gpu(g).socket for g in grp} for grp in groups] if known else []
    one_socket_each = known and all(len(s) == 1 for s in group_sockets)
    sockets = [next(iter(s)) for s in group_sockets] if one_socket_each else []
    interconnect = topology.socket_interconnect
    if len(groups) == 2 and sockets and sockets[0] != sockets[1]:
        where = "different CPU sockets" + (f" (NUMA nodes {nodes[0]} and {nodes[1]})" if nodes else "")
        return where, "the other socket", interconnect or DEFAULT_INTERCONNECT, "socket"
    if len(groups) == 2 and not sockets and sockets_shown_apart(topology, groups[0], groups[1]):
        # The text shows the sockets apart though it does not number them (the old word SOC, whose legend
        # says "the SMP link between CPU sockets"; CPU sets no one socket holds): no NUMA hedge to add.
        where = "different CPU sockets" + (f" (NUMA nodes {nodes[0]} and {nodes[1]})" if nodes else "")
        return where, "the other socket", interconnect or "the link between CPU sockets", "socket"
    numa = f"different NUMA nodes ({_and(nodes)})" if nodes else "different NUMA nodes"
    if sockets and len(set(sockets)) == 1:
        where = f"{numa} of one CPU socket ({sockets[0]})"
        return where, "another NUMA node", interconnect or "the link between NUMA nodes", "NUMA node"
    if sockets:
        where = f"{numa} on CPU sockets {_and([str(s) for s in sockets])}"
        return where, "another NUMA node", interconnect or DEFAULT_INTERCONNECT, "NUMA node"
    # Sockets not known (nvidia-smi text): say what SYS means and that this source does not tell.
    notes = ([_and(nodes)] if nodes else []) + [f"{SYS_MEANING}; which it is here, the source does not say"]
    return f"different NUMA nodes ({'; '.join(notes)})", "another NUMA node", interconnect or "the link between NUMA nodes", "NUMA node"


def _ungroupable(topology: Topology, groups: list[list[int]]) -> bool:
    """Whether GPUs of different groups are NVLinked with no PCIe path and no affinity that tells
    their NUMA sides (a DGX-1 capture whose CPU Affinity is a job's one-CPU cpuset)."""
    group_of = {g: n for n, grp in enumerate(groups) for g in grp}
    return any(group_of.get(link.a) != group_of.get(link.b) for link in link_sides(topology).unknown_nvlink)


def _cross_socket(topology: Topology) -> list[Finding]:
    """GPUs on different NUMA nodes (sockets where known) with SYS pairs between them: what crosses
    the interconnect, and whether measurements say it costs anything here."""
    sys_links = numa_crossing_links(topology)
    placed = _crossing_groups(topology, sys_links) if sys_links else None
    if placed is None:
        return []
    grouped, groups, by_pair = placed
    where, other_side, interconnect, unit = _where(topology, groups)
    gpus = link_sides(topology).crossing_gpus  # the GPUs of sys_links
    hosts = {topology.gpu(g).host for g in gpus}
    if len(hosts) > 1:  # the groups are the first host's
        suffix = f"likewise on the other {len(hosts) - 1} hosts"
        where = where[:-1] + f"; {suffix})" if where.endswith(")") else where + f" ({suffix})"
    without_nvlink = link_sides(topology).crossing_without_nvlink  # those of sys_links (found once per kind of link)
    if not without_nvlink:
        return [Finding(
            severity="info", code="cross-socket",
            message=(f"{grouped} are on {where}; GPU-to-GPU copies between them use NVLink, "
                     f"but host-to-GPU traffic (the input pipeline) crosses {interconnect} when it runs on {other_side}"),
            gpus=gpus,
            fix="bind each training process's CPU work to its GPUs' NUMA node (numactl --cpunodebind=N --membind=N)",
        )]
    group_of = {g: n for n, grp in enumerate(groups) for g in grp}
    nvlink_across = any(link.is_nvlink and link.a in group_of and link.b in group_of and group_of[link.a] != group_of[link.b]
                        for link in topology.links)
    peers = {link.can_peer for link in without_nvlink}
    staged = " through host memory" if False in peers else (" (through host memory where they cannot peer)" if None in peers else "")
    how = f"cross {interconnect}{staged}"
    # `topo -mp` shows PCIe paths only: NVLink between the groups is neither seen nor ruled out.
    unless = (" (unless NVLink joins them: `nvidia-smi topo -mp` does not show NVLink)"
              if any(note.code == "pcie-only-matrix" for note in topology.reading_notes) else "")
    # Pairs joined by NVLink (through NVSwitch too) copy over it, whatever their NUMA nodes: name only
    # the pairs without where some crossing pairs have it (a B200 whose GPU 2 lost its NVLinks).
    if len(without_nvlink) == len(sys_links) and (by_pair or not nvlink_across):
        message = f"{grouped} are on {where}: copies between them {how}"
    else:
        message = f"{grouped} are on {where}: copies between the pairs without NVLink ({pair_list((lk.a, lk.b) for lk in without_nvlink)}) {how}"
    alike = _measured_alike(topology, without_nvlink)
    if alike is not None:  # measured wins: here the interconnect costs nothing a copy can see
        return [Finding(
            severity="info", code="cross-socket",
            message=message + f"; measured, they copy as fast as pairs within one {unit} "
                              f"({alike[0]:.1f} against {alike[1]:.1f} GB/s), so placement matters only for the input pipeline",
            gpus=gpus,
            fix="bind each training process's CPU work to its GPUs' NUMA node (numactl --cpunodebind=N --membind=N)",
        )]
    # Every group one GPU (8 GPUs on 8 NUMA nodes): no group to train within; every pair crosses.
    fix = ("no two GPUs share a NUMA node here, so every group of GPUs crosses it: expect slower gradient exchange"
           if all(len(grp) == 1 for grp in groups) else
           "train on GPUs within one group (`gputopo recommend` picks them), or expect slower gradient exchange")
    return [Finding(
        severity="warning", code="cross-socket",
        message=message + f", which is slower than PCIe within one {unit}{unless}",
        gpus=gpus, fix=fix,
    )]


def _crossing_groups(topology: Topology, sys_links: list[Link]) -> tuple[str, list[list[int]], bool] | None:
    """(the groups in words, the groups, whether only pairs can be named) of the GPUs on either side
    of the NUMA crossings; a multi-host domain (GB200 NVL72) is described by its first host."""
    crossing = set(link_sides(topology).crossing_gpus)  # the GPUs of sys_links
    groups = [grp for grp in socket_groups(topology) if set(grp) & crossing]
    hosts = {topology.gpu(g).host for g in crossing}
    prefix = ""
    if len(hosts) > 1:
        first_host = min((g for g in topology.gpus if g.host in hosts), key=lambda g: g.index).host  # its lowest GPU first
        groups = [grp for grp in groups if topology.gpu(grp[0]).host == first_host]
        prefix = f"on host {first_host}, "
    groups, unplaced = _lump_unplaced(topology, groups)
    if len(groups) < 2:
        return None
    words = [gpu_list(grp) + (" (whether these share a NUMA node, the source does not say)" if grp is unplaced else "")
             for grp in groups]
    grouped = f"GPUs {words[0]} and {words[1]}" if len(groups) == 2 else "GPU groups " + " | ".join(words)
    by_pair = bool(_ungroupable(topology, groups))  # NVLinked pairs whose NUMA sides the source does not tell
    if by_pair:
        grouped = "the GPU pairs " + pair_list((link.a, link.b) for link in sys_links)
    grouped = prefix + grouped
    return grouped[0].upper() + grouped[1:], groups, by_pair


def _lump_unplaced(topology: Topology, groups: list[list[int]]) -> tuple[list[list[int]], list[int] | None]:
    """The GPUs alone in their group only because the source does not say how they connect to each other
    (the rows a cut paste lacks: pairs UNKNOWN, no NUMA node) put in one group, said as such: never called
    "on different NUMA nodes" from each other. Returns the groups and that group (None where none)."""
    singles = [grp[0] for grp in groups if len(grp) == 1]
    loose = [g for g in singles if topology.gpu(g).numa_node is None]
    if len(loose) < 2:  # (the pair lookup below only where there are such GPUs: a domain has none)
        return groups, None
    unplaced = [g for g in loose if any(h != g and topology.has_link(g, h) and topology.link(g, h).type == "UNKNOWN"
                                        for h in singles)]
    if len(unplaced) < 2:
        return groups, None
    return [grp for grp in groups if not (len(grp) == 1 and grp[0] in unplaced)] + [unplaced], unplaced


# Crossing pairs measured at this share of the pairs within one NUMA node (or more) cost nothing a copy sees.
MEASURED_ALIKE_RATIO = 0.9


def _measured_alike(topology: Topology, crossing: list[Link]) -> tuple[float, float] | None:
    """(slowest crossing GB/s, median within-node GB/s) where every crossing pair and some PCIe pairs
    within one node were measured and the crossing pairs are as fast; else None. Never from a box
    whose measurements show P2P broken on any pair (slower than staged copies: ACS or the IOMMU):
    there the pairs within a node are slow for a fault, and their figures relax nothing."""
    from gputopo.analysis.expect.measured import measured_gbps, measured_links, p2p_slower_than_staged

    if any(p2p_slower_than_staged(link) is not None for link in measured_links(topology)):
        return None
    across = [measured_gbps(link) for link in crossing]
    keys = {(link.a, link.b) for link in crossing}
    within = sorted(v for v in (measured_gbps(link) for link in topology.links
                                if (link.a, link.b) not in keys and not link.is_nvlink and link.type != "UNKNOWN")
                    if v is not None)
    if not within or any(v is None for v in across):
        return None
    slowest, median = min(v for v in across if v is not None), within[len(within) // 2]
    return (slowest, median) if slowest >= MEASURED_ALIKE_RATIO * median else None


# Sources whose "cannot peer" is CUDA's answer alone, not nvidia-smi's status word with its reason.
_LOG_SOURCES = ("tf-log", "nccl-log", "cuda-peer-access")


def _p2p_unsupported(topology: Topology) -> list[Finding]:
    """``p2p-<word>`` for the pairs that cannot peer, except the pairs NCCL found connected yet
    refused (``nccl-p2p-refused`` says those, as the fault it is: not the machine's design)."""
    by_word: dict[str, list[tuple[int, int]]] = defaultdict(list)
    refused = refused_pairs(topology)
    table = topology.link_table()  # the words are read once per kind of link
    word_of_kind = []
    for link in table.examples:
        read, write = link.p2p_read, link.p2p_write
        word_of_kind.append(read if read is not None and read != P2P_OK else (write if write is not None and write != P2P_OK else None))
    links_of_word: dict[str, list[Link]] = defaultdict(list)  # one link of each kind: its path words
    for word in [w for w in dict.fromkeys(word_of_kind) if w is not None]:  # (in order of first link)
        chosen = table.kinds_where(k for k, w in enumerate(word_of_kind) if w == word)
        by_word[word] = list(zip(itertools.compress(table.ends_a, chosen), itertools.compress(table.ends_b, chosen)))
        links_of_word[word] = [link for link, w in zip(table.examples, word_of_kind) if w == word]
    findings = []
    for word in sorted(by_word, key=lambda w: list(P2P_STATUS_MEANING).index(w) if w in P2P_STATUS_MEANING else 99):
        pairs = sorted(pair for pair in by_word[word] if word != "NS" or pair not in refused)
        if not pairs:
            continue
        meaning = P2P_STATUS_MEANING.get(word, "not supported")
        unknown = word == "U"  # the driver could not tell: not a "no"
        findings.append(
            Finding(
                severity="info" if unknown else "warning",
                code=f"p2p-{word.lower()}",
                message=(
                    f"P2P status unknown between GPU pairs {pair_list(pairs)}: U = {meaning}; "
                    "if they cannot peer, their copies are staged through host memory"
                    + _nccl_clause(nccl_if_cuda_allows({lk.type for lk in links_of_word[word]},
                                                       any(lk.is_nvlink for lk in links_of_word[word])))
                    if unknown
                    else f"No P2P between GPU pairs {pair_list(pairs)}: " + (
                        f"{word} = {meaning}; " if topology.source not in _LOG_SOURCES else
                        "the log says they cannot peer (which of nvidia-smi's reasons, NS, TNS, CNS or GNS, it "
                        "does not say: `nvidia-smi topo -p2p r` does); ")
                    + "their copies go through host memory: CUDA stages them, and "
                    + (_nccl_tried_p2p(tried) if (tried := _nccl_p2p_pairs(topology) & set(pairs)) else
                       nccl_without_p2p({lk.type for lk in links_of_word[word]}))
                    + "; a program that asks for peer access anyway gets an error (TensorFlow logs it and goes on)"
                ),
                gpus=sorted({g for pair in pairs for g in pair}),
                fix=P2P_FIX.get(word),
            )
        )
    return findings


def _nccl_p2p_pairs(topology: Topology) -> set[tuple[int, int]]:
    """The GPU pairs an NCCL log shows NCCL connecting over P2P (older NCCL tried P2P where CUDA says no)."""
    view = topology.nccl
    return {(min(t.a, t.b), max(t.a, t.b)) for t in (view.transports if view is not None else [])
            if t.transport == "P2P" and t.a is not None and t.b is not None}


def _nccl_tried_p2p(pairs: set[tuple[int, int]]) -> str:
    return (f"yet the log shows NCCL choosing P2P between {pair_list(sorted(pairs))} all the same (an NCCL that "
            "does not ask CUDA first fails there: nccl-p2p-ipc-failed)")


def _nccl_clause(text: str) -> str:
    return f" ({text})" if text else ""


def _mig(topology: Topology) -> list[Finding]:
    gpus = [g.index for g in topology.gpus if g.mig_mode]
    if not gpus:
        return []
    first = gpus[0]
    return [
        Finding(
            severity="warning",
            code="mig-enabled",
            message=(
                f"MIG is on for {gpus_word(gpus)}: CUDA sees MIG instances instead of whole GPUs, and there is "
                "no P2P or NCCL between MIG instances, so data-parallel training cannot span them efficiently"
            ),
            gpus=gpus,
            fix=f"for multi-GPU training turn MIG off: sudo nvidia-smi -i {first} -mig 0 (then reset the GPU)",
        )
    ]


def _mixed_models(topology: Topology) -> list[Finding]:
    by_model: dict[str, list[int]] = defaultdict(list)
    for g in topology.gpus:
        if g.name:
            by_model[g.name].append(g.index)
    if len(by_model) < 2:
        return []
    if any(link.measured.device_kind != "GPU" for link in measured_links(topology)):  # (the links looked at last)
        return []  # bench-p2p --cpu-devices: each logical CPU device has its own name, none is a model
    parts = [f"{gpu_list(idx)}: {name}" for name, idx in sorted(by_model.items(), key=lambda kv: kv[1][0])]
    return [
        Finding(
            severity="warning",
            code="mixed-gpu-models",
            message=(
                "the GPUs are of different models (" + "; ".join(parts) + "): synchronous data-parallel "
                "training waits for the slowest GPU every step"
            ),
            gpus=sorted(i for idx in by_model.values() for i in idx),
            fix="train on GPUs of one model together (set CUDA_VISIBLE_DEVICES to them)",
        )
    ]


