"""``nccl-shm-between-gpus``: GPU pairs of one host that an ``NCCL_DEBUG=INFO`` log shows NCCL
connecting through host memory (``via SHM/...``, the older ``via direct shared memory``; ``via NET``
where the log names one host for both ranks) rather than P2P, and what the link between them says of
why. Pairs the topology says can peer (NVLink, or P2P ok) are ``nccl-not-p2p``'s
(``observed_findings``).

Why NCCL leaves P2P out (NVIDIA/nccl ``src/graph/paths.cc``, ``ncclTopoCheckP2p``): it uses P2P only
on paths up to its P2P level. By default that level is PXB (PCIe switches only, no CPU host bridge)
on Intel, Zhaoxin and ARM CPUs since NCCL 2.9, and on every host since 2.23 except AMD CPUs with at
most two GPUs (SYS: any path); NCCL 2.7-2.8 stopped at PHB on Intel CPUs but Broadwell.
``NCCL_P2P_LEVEL`` sets it (``NCCL_P2P_DISABLE=1`` shows as ``NCCL_P2P_LEVEL ... LOC``). Within the
level, NVML must still report P2P read and write OK for the pair, else no P2P ("P2P is disabled
between connected GPUs", logged only for paths below SYS). NCCL counts a host bridge as PHB whether
nvidia-smi says PHB or NODE; SYS is SYS. So the link word tells the likely cause apart, as an
inference: SYS, NODE or PHB are beyond NCCL's default level on most hosts (its rule, not a fault);
PIX or PXB are within every default, so P2P was turned off or is unavailable there.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.analysis.expect.nccl_transport import NCCL_LEVELS, NCCL_PATH_OF_WORD, level_of_settings  # (the one table of them), level_of_settings
from gputopo.model import Finding, Link, NcclTransport, Topology
from gputopo.notation import pair_list

HOST_MEMORY = ("SHM", "NET")
MAX_EVIDENCE = 12

DEFAULT_LEVEL = ("NCCL's default P2P level stops at PCIe switches (PXB) on Intel and ARM CPUs (since NCCL 2.9), "
                 "and since NCCL 2.23 on every host but AMD CPUs with at most two GPUs")
_NOT_FASTER = ("keep it only if nccl-tests or `gputopo bench-p2p` measure P2P faster there (P2P through a host "
               "bridge or between CPUs can be slower than host memory)")


@dataclass
class HostMemoryPairs:
    """The host-memory pairs of one cause, their link words and the transports that show them."""

    pairs: set[tuple[int, int]] = field(default_factory=set)
    words: set[str] = field(default_factory=set)
    transports: list[NcclTransport] = field(default_factory=list)


def host_memory_findings(topology: Topology) -> list[Finding]:
    """One ``nccl-shm-between-gpus`` finding per likely cause, naming its pairs (see the module)."""
    by_cause = host_memory_pairs(topology)
    if not by_cause:
        return []
    view = topology.nccl
    p2p = {(min(t.a, t.b), max(t.a, t.b)) for t in view.transports
           if t.transport == "P2P" and t.a is not None and t.b is not None}
    level = _p2p_level(view.settings)
    return [_finding(cause, entry, p2p, level) for cause, entry in sorted(by_cause.items())]


def refused_pairs(topology: Topology) -> set[tuple[int, int]]:
    """The pairs NCCL logged "P2P is disabled between connected GPUs" for, as this topology's GPUs:
    NCCL numbers them by NVML index, so only where the topology numbers GPUs that way too, or is
    numbered by the NCCL log itself (read first: its numbers are the topology's)."""
    view = topology.nccl
    if view is None or (topology.gpu_numbering != "nvml" and topology.source != "nccl-log"):
        return set()
    return {(min(a, b), max(a, b)) for a, b in view.p2p_disabled_pairs}


def host_memory_pairs(topology: Topology) -> dict[str, HostMemoryPairs]:
    """The GPU pairs NCCL connected through host memory, by likely cause: ``setting`` (the log shows
    a P2P level that leaves the path out), ``refused`` (NCCL logged P2P disabled for the pair),
    ``allowed`` (the log shows a P2P level that lets P2P use the path), ``sockets`` (SYS),
    ``host-bridge`` (NODE, PHB), ``switch`` (PIX, PXB), ``unknown`` (no link word)."""
    view = topology.nccl
    if view is None:
        return {}
    links = topology.link_map()
    level = _p2p_level(view.settings)
    refused = refused_pairs(topology)
    by_cause: dict[str, HostMemoryPairs] = {}
    for t in view.transports:
        link = _host_memory_link(topology, t, links)
        if link is None:
            continue
        entry = by_cause.setdefault(_cause(link, level, (link.a, link.b) in refused), HostMemoryPairs())
        entry.pairs.add((link.a, link.b))
        entry.words.add(link.type)
        entry.transports.append(t)
    return by_cause


def _host_memory_link(topology: Topology, t: NcclTransport, links: dict) -> Link | None:
    """The link of a connection NCCL made through host memory between two GPUs of one host, where
    the topology does not say they can peer (those are ``nccl-not-p2p``'s); else None."""
    if t.transport not in HOST_MEMORY or t.a is None or t.b is None or t.a == t.b:
        return None
    if t.transport == "NET" and not _one_host(topology, t):
        return None
    link = links.get((min(t.a, t.b), max(t.a, t.b)))
    if link is None or link.is_nvlink or link.can_peer:
        return None
    return link


def _one_host(topology: Topology, t: NcclTransport) -> bool:
    """Whether the log names one host for both ranks of a connection (NET between hosts is normal)."""
    hosts = {r.rank: r.host for r in topology.nccl.ranks} if topology.nccl else {}
    a, b = hosts.get(t.src_rank), hosts.get(t.dst_rank)
    return a is not None and a == b


def _p2p_level(settings: dict[str, str]) -> str | None:
    """NCCL's P2P level as the log shows it set (``NCCL_P2P_DISABLE=1`` = LOC), else None: read by the
    one rule recommend's figures use (``expect.nccl_transport.level_of_settings``)."""
    return level_of_settings(settings)


def _cause(link: Link, level: str | None, refused: bool) -> str:
    path = NCCL_PATH_OF_WORD.get(link.type)
    if level is not None and (level == "LOC" or (path is not None and NCCL_LEVELS.index(path) > NCCL_LEVELS.index(level))):
        return "setting"
    if refused:
        return "refused"
    if level is not None and path is not None:
        return "allowed"  # the level the log shows lets P2P use this path: not NCCL's default rule
    if path == "SYS":
        return "sockets"
    if path == "PHB":
        return "host-bridge"
    if path in ("PIX", "PXB"):
        return "switch"
    return "unknown"


def _finding(cause: str, entry: HostMemoryPairs, p2p: set[tuple[int, int]], level: str | None) -> Finding:
    pairs = pair_list(entry.pairs)
    via = ", ".join(sorted({t.detail for t in entry.transports}))[:120]
    words = "/".join(sorted(entry.words - {"UNKNOWN"}))
    contrast = f", while it uses P2P between {pair_list(p2p)}" if p2p else ""
    head = (f"NCCL sends between GPUs {pairs}{f' ({words})' if words else ''} through host memory ({via}), not "
            f"P2P{contrast}: each transfer is copied through host memory, slower than P2P, and a ring through these "
            "pairs runs at their speed")
    severity, why, fix = _WHY[cause](words, level)
    evidence = [f"GPU {t.a} -> GPU {t.b} via {t.detail} (channel{'s' if len(t.channels) > 1 else ''} "
                f"{', '.join(f'{c:02d}' for c in t.channels[:8])})" for t in entry.transports[:MAX_EVIDENCE]]
    return Finding(severity, "nccl-shm-between-gpus", f"{head}. {why}", gpus=sorted({g for p in entry.pairs for g in p}),
                   fix=fix, evidence=evidence)


def _setting(words: str, level: str | None) -> tuple[str, str, str]:
    if level == "LOC":
        why = "The log shows P2P turned off for the job (NCCL_P2P_DISABLE=1 or NCCL_P2P_LEVEL=LOC)"
    else:
        why = f"The log shows NCCL_P2P_LEVEL={level}: NCCL uses P2P only on paths up to {level}, and {words} is beyond it"
    return "info", why, f"unset the setting for pairs that can peer; {_NOT_FASTER}"


def _refused(words: str, level: str | None) -> tuple[str, str, str]:
    why = ("NCCL also logged \"P2P is disabled between connected GPUs\" for them: the driver (NVML) reports they "
           "cannot peer (see nccl-p2p-refused)")
    fix = "`nvidia-smi topo -p2p r` shows the driver's word per pair; `gputopo doctor` checks ACS, the IOMMU and a VM"
    return "info", why, fix


def _allowed(words: str, level: str | None) -> tuple[str, str, str]:
    why = (f"The log shows NCCL_P2P_LEVEL={level}, which lets NCCL use P2P on {words}: so not NCCL's default level; "
           "P2P is unavailable for the pair (the driver reports it cannot peer: across CPUs on many platforms, "
           "GeForce cards, a VM) (inferred: the log shows no reason)")
    severity = "info" if words in ("SYS", "PHB", "NODE", "NODE/PHB") else "warning"
    return severity, why, _refused(words, level)[2]


def _sockets(words: str, level: str | None) -> tuple[str, str, str]:
    why = (f"SYS between them (across NUMA nodes, over the CPUs' interconnect): {DEFAULT_LEVEL}, and the driver often "
           "reports pairs across sockets cannot peer; NCCL's own rule for the CPUs' link, not a fault (inferred from "
           "the link word: the log shows neither the CPU nor NCCL's reason)")
    fix = ("give a job that exchanges a lot GPUs of one CPU (`gputopo recommend`); NCCL_P2P_LEVEL=SYS makes NCCL try "
           f"P2P across: {_NOT_FASTER}")
    return "info", why, fix


def _host_bridge(words: str, level: str | None) -> tuple[str, str, str]:
    why = (f"{words} between them (through a CPU's host bridge, no PCIe switch joins them), which NCCL counts as PHB: "
           f"{DEFAULT_LEVEL}, so this is likely NCCL's own rule, not a fault (inferred: the log shows neither the CPU "
           "nor NCCL's version; before NCCL 2.23 on an AMD CPU P2P would have been used, and SHM would mean the "
           "driver reports the pair cannot peer)")
    return "info", why, f"NCCL_P2P_LEVEL=PHB makes NCCL try P2P through the host bridge: {_NOT_FASTER}"


def _switch(words: str, level: str | None) -> tuple[str, str, str]:
    why = (f"{words} between them (through PCIe switches only): every NCCL uses P2P on such a path by default, so "
           "P2P is turned off for the job (NCCL_P2P_DISABLE or NCCL_P2P_LEVEL set where the log does not show it) "
           "or unavailable for the pair (the driver reports it cannot peer: GeForce cards, the platform, a VM) "
           "(inferred from the link word)")
    fix = ("check the job's NCCL_P2P_DISABLE / NCCL_P2P_LEVEL and `nvidia-smi topo -p2p r` for the pair (anything "
           "but OK: the driver refuses); `gputopo doctor` checks ACS, the IOMMU and a VM")
    return "warning", why, fix


def _unknown(words: str, level: str | None) -> tuple[str, str, str]:
    setting = f"; the log shows NCCL_P2P_LEVEL={level}, which leaves out paths beyond {level}" if level else ""
    why = ("The log does not say why: NCCL's default P2P level (no P2P between CPUs, or across a CPU host bridge, on "
           "Intel and ARM CPUs, and on most hosts since NCCL 2.23), NCCL_P2P_DISABLE / NCCL_P2P_LEVEL set for the "
           f"job, or the driver reporting the pair cannot peer (GeForce cards, the platform, a VM){setting}")
    fix = ("give gputopo this host's `nvidia-smi topo -m` with the log (`gputopo scan --from topo.txt --from "
           "nccl.log`): SYS, NODE or PHB between a pair points at NCCL's P2P level; PIX or PXB at P2P turned off "
           "or unavailable there (the job's NCCL_P2P_* variables, `nvidia-smi topo -p2p r`, `gputopo doctor`)")
    return "info", why, fix


_WHY = {"setting": _setting, "refused": _refused, "allowed": _allowed, "sockets": _sockets, "host-bridge": _host_bridge,
        "switch": _switch, "unknown": _unknown}


# Paths within every default P2P level of NCCL (NVLink, PCIe switches); PHB, NODE and SYS are beyond
# it on most hosts (``DEFAULT_LEVEL``).
_WITHIN_EVERY_DEFAULT = frozenset({"PIX", "PXB"})


def nccl_without_p2p(words: set[str]) -> str:
    """What NCCL does between GPU pairs CUDA says cannot peer (NVML's P2P status is the driver's
    answer CUDA gives too), their link words ``words``: stated as NCCL's rule."""
    beyond = sorted(w for w in words if w in NCCL_PATH_OF_WORD and NCCL_PATH_OF_WORD[w] not in _WITHIN_EVERY_DEFAULT)
    level = f"; {'/'.join(beyond)} is also beyond NCCL's default P2P level on most hosts" if beyond else ""
    return f"NCCL uses its SHM transport there (it does not try P2P where CUDA says a pair cannot peer{level})"


def nccl_if_cuda_allows(words: set[str], nvlink: bool) -> str:
    """What NCCL does between pairs whose P2P status is unknown, by their link words: it tries P2P
    only within its P2P level and where CUDA says the pair can peer; where such a try fails, it stops."""
    within = nvlink or any(NCCL_PATH_OF_WORD.get(w) in _WITHIN_EVERY_DEFAULT for w in words)
    beyond = sorted(w for w in words if w in NCCL_PATH_OF_WORD and NCCL_PATH_OF_WORD[w] not in _WITHIN_EVERY_DEFAULT)
    parts = []
    if within:
        parts.append("where CUDA says such a pair can peer NCCL tries P2P (its path is within NCCL's P2P level) "
                     "and stops if the peer mapping fails ('failed to open CUDA IPC handle')")
    if beyond:
        parts.append(f"over {'/'.join(beyond)} NCCL uses its SHM transport by its default P2P level on most hosts")
    return "; ".join(parts)
