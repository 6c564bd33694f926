"""Where the GPUs sit: CPU sockets, NUMA nodes, a virtual machine's flat view. Pure functions.

A NUMA node is not a socket: AMD EPYC in NPS2/NPS4, Intel sub-NUMA clustering and NVIDIA Grace put
several NUMA nodes in one socket, and nvidia-smi's ``SYS`` means "between NUMA nodes". So:

- sockets are *known* where the source says them (``Gpu.socket``: the NVML probe reads sysfs,
  reference machines carry public facts);
- one NUMA node implies one socket (a NUMA node never spans sockets): a PCIe path below SYS (PIX,
  PXB, PHB, NODE), or GPUs whose NUMA affinity (or, without one, CPU affinity) is the same and
  tells the GPUs apart -- also where the link word is SYS (some PCIe boards say SYS within a node);
- different NUMA nodes say nothing about sockets: ``same_socket`` is then ``None`` unless the text
  shows it: the old word ``SOC``, which nvidia-smi's legend defined as "the SMP link between CPU
  sockets" (the reader notes it: reading note ``soc-between-sockets``), or two CPU sets too large
  together for any one socket (``MAX_THREADS_PER_SOCKET``);
- a virtual machine shows the hypervisor's PCI topology: nothing is concluded from it. Evidence:
  a line of the paste (``Hypervisor vendor: KVM``, DMI strings; the reader's note
  ``vm-evidence``), or every GPU showing one CPU set / NUMA set yet SYS (SOC) between every pair.
"""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from gputopo.analysis.notes.reading_notes import vm_line
from gputopo.model import Gpu, Link, ReadingNote, Topology
from gputopo.model.link_table import KIND_FIELDS, LinkTable
from gputopo.model.reading_notes import SOC_BETWEEN_SOCKETS, VM_EVIDENCE
from gputopo.notation import parse_cpu_list

# What nvidia-smi's SYS means, for findings made where the sockets are not known.
SYS_MEANING = (
    "SYS: the link between NUMA nodes, across CPU sockets on most two-socket servers, "
    "within one socket on AMD EPYC NPS2/NPS4, Intel SNC or Grace"
)
BELOW_SYS = ("PIX", "PXB", "PHB", "NODE")
# The most logical CPUs one socket has (AMD EPYC 9965: 192 cores, 2 threads each); two GPUs' CPU
# sets that together hold more cannot be one socket's.
MAX_THREADS_PER_SOCKET = 384
# Reading notes a text reader leaves for this module: what a line of the paste shows.
VM_EVIDENCE_CODE = VM_EVIDENCE
SOC_CODE = SOC_BETWEEN_SOCKETS
_BAD = object()


def pcie_path(link: Link) -> str | None:
    """The PCIe path word of a link (``Link.type`` is NV<n> where NVLink exists)."""
    if link.pcie_path:
        return link.pcie_path
    return None if link.is_nvlink or link.type == "UNKNOWN" else link.type


def sockets_known(topology: Topology, gpus: list[int] | None = None) -> bool:
    """Whether the source says the CPU socket of every GPU (of ``gpus``)."""
    chosen = topology.gpus if gpus is None else [topology.gpu(g) for g in gpus]
    return bool(chosen) and all(g.socket is not None for g in chosen)


# --- a virtual machine's flat topology -----------------------------------------------------------


def _affinity_text(gpu: Gpu) -> str | None:
    if gpu.numa_affinity:
        return gpu.numa_affinity
    return None if gpu.numa_node is None else str(gpu.numa_node)


def _text_fact(topology: Topology, code: str) -> ReadingNote | None:
    return next((note for note in topology.reading_notes if note.code == code), None)


def vm_evidence(topology: Topology) -> str | None:
    """Why the topology looks like a virtual machine's (the hypervisor's virtual PCI topology), or
    None. A line of the paste that says so (the reader's ``vm-evidence`` note, in words); else,
    conservatively: every GPU that shows a CPU set / NUMA affinity shows the same one (two at
    least) yet every pair shows SYS (SOC), or they share one CPU set and a multi-node NUMA set and
    reach every NIC through PHB. Computed once per topology where no line of the paste says it (per-pair
    functions ask it for every pair)."""
    if _text_fact(topology, VM_EVIDENCE_CODE) is not None:
        return _vm_evidence(topology)
    return topology.cached("vm_evidence", _vm_evidence)


def _vm_evidence(topology: Topology) -> str | None:
    gpus = topology.gpus
    if topology.is_reference or len({g.host for g in gpus}) > 1:
        return None
    said = _text_fact(topology, VM_EVIDENCE_CODE)
    words = vm_line(said) if said is not None else None
    if words is not None:
        return words
    if len(gpus) < 2:
        return None
    cpu_known = [g.cpu_affinity for g in gpus if g.cpu_affinity]
    numa_known = [_affinity_text(g) for g in gpus if _affinity_text(g) is not None]
    cpus, numa = set(cpu_known), set(numa_known)
    if len(cpus) > 1 or len(numa) > 1 or max(len(cpu_known), len(numa_known)) < 2:
        return None  # the GPUs differ (or too little is known): a real layout, or no evidence
    shared = [f"CPUs {next(iter(cpus))}"] if cpus else []
    numa_nodes = next((g.numa_nodes for g in gpus if g.numa_nodes), None) or ()
    if numa:
        shared.append(f"NUMA node{'s' if len(numa_nodes) > 1 else ''} {next(iter(numa))}")
    everyone = f"{'both GPUs' if len(gpus) == 2 else f'all {len(gpus)} GPUs'} share {' and '.join(shared)}"
    paths = [pcie_path(link) for link in topology.links]
    if paths and all(path == "SYS" for path in paths):
        return f"{everyone}, yet nvidia-smi shows SYS (SOC) between every pair"
    multi_node = len(numa_nodes) > 1 and all(g.gpu_numa_id is None for g in gpus)
    nic_paths = {link.type for link in topology.nic_links}
    if multi_node and cpus and nic_paths == {"PHB"}:
        return f"{everyone}, and every GPU reaches every NIC through one host bridge (PHB)"
    return None


# --- NUMA nodes and sockets ----------------------------------------------------------------------


def _tells_apart(topology: Topology, kind: str) -> bool:
    """Whether the GPUs' NUMA (``kind="numa"``) or CPU affinities are per-GPU facts: not one value
    shared by every GPU that shows one where that value cannot be the truth (a multi-node NUMA set,
    or one CPU set with SYS between GPUs: a job's cpuset or a container's view). GPUs that show no
    value (a damaged paste) are no evidence either way. Once per topology and kind."""
    return topology.cached(f"tells_apart_{kind}", lambda topo: _compute_tells_apart(topo, kind))


def _compute_tells_apart(topology: Topology, kind: str) -> bool:
    values = {_affinity_text(g) if kind == "numa" else g.cpu_affinity for g in topology.gpus} - {None}
    if len(values) > 1 or len(topology.gpus) < 2:
        return True
    if kind == "numa":
        known = next((g.numa_nodes for g in topology.gpus if g.numa_nodes), None)
        return len(known or ()) <= 1
    return not any(pcie_path(link) == "SYS" for link in topology.links)


def same_numa_side(topology: Topology, a: Gpu, b: Gpu) -> bool | None:
    """Whether two GPUs hang off the same NUMA node, from their NUMA (else CPU) affinity: True,
    False, or None where the facts do not tell (unknown, overlapping, shared by a flat view).
    Asked for every pair: answered once per pair of distinct affinities."""
    answers: dict[tuple[Any, ...], bool | None] = topology.cached("numa_side_answers", lambda topo: {})
    key = (_side_key(a), _side_key(b))
    if key not in answers:
        answers[key] = _same_numa_side(topology, a, b)
    return answers[key]


def _side_key(gpu: Gpu) -> tuple[Any, ...]:
    return (gpu.host, gpu.numa_affinity, gpu.numa_node, gpu.cpu_affinity)


class NumaSides:
    """``same_numa_side`` by GPU numbers, ``get((a, b))``: answered once per pair of distinct
    affinities (a 576-GPU domain: 165,600 pairs, a few hundred kinds of GPU)."""

    def __init__(self, topology: Topology):
        self.topology = topology
        self.gpus = {g.index: g for g in topology.gpus}
        self.keys = {index: _side_key(g) for index, g in self.gpus.items()}
        self.answers: dict[tuple[Any, ...], bool | None] = {}

    def get(self, pair: tuple[int, int], default: Any = None) -> Any:
        a, b = pair
        key_a, key_b = self.keys.get(a), self.keys.get(b)
        if key_a is None or key_b is None:
            return default
        answer = self.answers.get((key_a, key_b), _BAD)
        if answer is _BAD:
            answer = self.answers[(key_a, key_b)] = _same_numa_side(self.topology, self.gpus[a], self.gpus[b])
        return answer


def numa_sides(topology: Topology) -> NumaSides:
    """``same_numa_side`` of any pair of the topology's GPUs (kept once per topology)."""
    return topology.cached("numa_sides", NumaSides)


def _same_numa_side(topology: Topology, a: Gpu, b: Gpu) -> bool | None:
    if a.host != b.host:
        return False
    if vm_evidence(topology) is not None:
        return None
    return _same_node(topology, a, b)


def _same_node(topology: Topology, a: Gpu, b: Gpu) -> bool | None:
    """``_same_numa_side`` of two GPUs of one host, outside a virtual machine's flat view: from
    their affinities alone (``_side_key`` but the host)."""
    nodes_a, nodes_b = a.numa_nodes, b.numa_nodes
    if nodes_a is not None and nodes_b is not None:
        if nodes_a == nodes_b:
            return True if _tells_apart(topology, "numa") else None
        return False if not nodes_a & nodes_b else None
    if nodes_a is None and nodes_b is None and a.cpu_affinity and b.cpu_affinity:
        if a.cpu_affinity == b.cpu_affinity:
            return True if _tells_apart(topology, "cpu") else None
        return None if _overlap(a.cpu_affinity, b.cpu_affinity) else False
    return None


def _overlap(cpus_a: str, cpus_b: str) -> bool:
    try:
        return bool(set(parse_cpu_list(cpus_a)) & set(parse_cpu_list(cpus_b)))
    except ValueError:
        return True


def same_socket(topology: Topology, a: int, b: int) -> bool | None:
    """Whether GPUs ``a`` and ``b`` share a CPU socket: known sockets decide; one NUMA node (a PCIe
    path below SYS, or the same NUMA side whatever the link word) implies one socket; different NUMA
    nodes are different sockets only where the text shows it (SOC; CPU sets no socket holds); else None."""
    gpu_a, gpu_b = topology.gpu(a), topology.gpu(b)
    if gpu_a.host != gpu_b.host:
        return False
    if gpu_a.socket is not None and gpu_b.socket is not None:
        return gpu_a.socket == gpu_b.socket
    if vm_evidence(topology) is not None:
        return None
    path = pcie_path(topology.link(a, b))
    if path in BELOW_SYS:
        return True
    side = same_numa_side(topology, gpu_a, gpu_b)
    if side:
        return True  # a NUMA node never spans sockets
    if path == "SYS" and _text_fact(topology, SOC_CODE) is not None and _real_layout(topology):
        return False  # the old legend: SOC = "the SMP link between CPU sockets"
    if side is False and _too_many_cpus_for_one_socket(gpu_a, gpu_b):
        return False
    return None


def sockets_shown_apart(topology: Topology, one: list[int], other: list[int]) -> bool:
    """Whether ``same_socket`` is False for every pair across two groups: only where the text can
    show it (the old word SOC, or CPU sets no one socket holds), so a domain of 165,600 links is not
    indexed pair by pair to learn that it cannot."""
    a, b = topology.gpu(one[0]), topology.gpu(other[0])
    if (_text_fact(topology, SOC_CODE) is None and not _too_many_cpus_for_one_socket(a, b)
            and (a.socket is None or b.socket is None) and a.host == b.host):
        return False  # nothing that could say False for this pair, so not for every pair
    return all(same_socket(topology, a, b) is False for a in one for b in other)


def _real_layout(topology: Topology) -> bool:
    """Positive evidence that the matrix is the host's own, not a hypervisor's flat view: a PCIe
    switch between devices (PIX, PXB), or GPUs whose affinities differ."""
    if any(pcie_path(link) in ("PIX", "PXB") for link in topology.links):
        return True
    if any(link.type in ("PIX", "PXB") for link in topology.nic_links):
        return True
    cpus = {g.cpu_affinity for g in topology.gpus} - {None}
    return len(cpus) > 1 or len({_affinity_text(g) for g in topology.gpus} - {None}) > 1


def _too_many_cpus_for_one_socket(a: Gpu, b: Gpu) -> bool:
    if not a.cpu_affinity or not b.cpu_affinity:
        return False
    try:
        cpus = set(parse_cpu_list(a.cpu_affinity)) | set(parse_cpu_list(b.cpu_affinity))
    except ValueError:
        return False
    return len(cpus) > MAX_THREADS_PER_SOCKET


def link_crosses_numa(topology: Topology, link: Link) -> bool:
    """Whether a link's GPUs sit on different NUMA nodes: a SYS path between GPUs whose affinities do
    not put them on one node, or (nvidia-smi text shows only
    NV<n> for NVLinked pairs) NVLinked GPUs whose affinities differ. Unknown links (a TF log alone)
    and a virtual machine's flat view are not claimed either way."""
    if vm_evidence(topology) is not None:
        return False
    side = same_numa_side(topology, topology.gpu(link.a), topology.gpu(link.b))
    if side:
        return False  # one NUMA node, whatever the link word (some PCIe boards say SYS within a node)
    path = pcie_path(link)
    if path == "SYS":
        return side is False or not link_sides(topology).sys_within_node
    return path is None and link.is_nvlink and side is False


@dataclass
class LinkSides:
    """What every link says about NUMA sides, from one pass over the links (once per topology)."""

    crossing: list[Link] = field(default_factory=list)  # SYS, or NVLinked GPUs on different sides
    joined: list[tuple[int, int]] = field(default_factory=list)  # below SYS, or known to share a side
    unknown_nvlink: list[Link] = field(default_factory=list)  # NVLinked, no PCIe path, sides not known
    # SYS between GPUs of one NUMA node somewhere in the source: there SYS is a path class, not a
    # crossing, so a SYS pair whose sides the source does not give (a cut paste) is not called one.
    sys_within_node: bool = False
    crossing_gpus: list[int] = field(default_factory=list)  # the GPUs of ``crossing``, in order
    crossing_without_nvlink: list[Link] = field(default_factory=list)  # those of ``crossing`` with no NVLink


_CROSSING, _UNKNOWN_NVLINK = 1, 2
_LINK_FACTS = operator.attrgetter("pcie_path", "type", "nvlink_count")  # what _verdict reads of a link


def link_sides(topology: Topology) -> LinkSides:
    """``LinkSides`` of the topology: per link its PCIe path word, else (NVLink only) whether its
    GPUs share a NUMA side. What a link says depends only on its words and its two GPUs' kinds
    (their affinities): decided once per distinct combination, and the links sorted by it in whole
    columns (a 576-GPU domain: 165,600 links, a few dozen combinations)."""
    return topology.cached("link_sides", _link_sides)


def _link_sides(topology: Topology) -> LinkSides:
    """The links' verdicts in whole columns (``Topology.link_table``): two GPUs of different hosts
    are on different sides; within a host, the sides depend on the two GPUs' affinities alone
    (``_same_node``). A verdict is made once per (kind of link, kinds of its GPUs) and each link
    gets its own by a code, ``kind + kinds * pair`` (pair: 0 across hosts, else from the GPUs' kinds)."""
    gpus = {g.index: g for g in topology.gpus}
    table = topology.link_table()
    links, ends_a, ends_b = topology.links, table.ends_a, table.ends_b
    if not gpus.keys() >= table.gpus_of():
        return _link_sides_one_by_one(topology)  # links to GPUs the list lacks (a damaged source)
    gpu_kinds: dict[tuple[Any, ...], int] = {}
    kind_of = {g: gpu_kinds.setdefault(_side_key(gpu)[1:], len(gpu_kinds)) for g, gpu in gpus.items()}
    one_of_kind = {kind: gpus[g] for g, kind in reversed(kind_of.items())}
    hosts: dict[str | None, int] = {}
    host_of = {g: hosts.setdefault(gpu.host, len(hosts)) for g, gpu in gpus.items()}
    count, link_kinds = len(gpu_kinds), len(table.kinds)
    codes = _side_codes(table, kind_of, count, host_of if len(hosts) > 1 else None)
    flat_view = vm_evidence(topology) is not None
    facts = {}
    for code in set(codes):
        which, kind = divmod(code, link_kinds)
        gpu_a, gpu_b = divmod(which - 1, count)
        side = False if not which else None if flat_view else _same_node(topology, one_of_kind[gpu_a], one_of_kind[gpu_b])
        facts[code] = (side, *(table.kinds[kind][KIND_FIELDS.index(name)] for name in ("pcie_path", "type", "nvlink_count")))
    sys_within_node = any(_sys_within_node(*fact) for fact in facts.values())
    verdicts = {code: _verdict(*fact, sys_within_node) for code, fact in facts.items()}
    crossing_codes = {code for code, (_, what) in verdicts.items() if what == _CROSSING}
    joined = _codes_where(codes, {code for code, (joined, _) in verdicts.items() if joined}, facts)
    crossing = _codes_where(codes, crossing_codes, facts)
    unknown = _codes_where(codes, {code for code, (_, what) in verdicts.items() if what == _UNKNOWN_NVLINK}, facts)
    without_nvlink = _codes_where(codes, {code for code in crossing_codes if facts[code][3] <= 0}, facts)
    return LinkSides(
        crossing=list(itertools.compress(links, crossing)),
        joined=list(zip(itertools.compress(ends_a, joined), itertools.compress(ends_b, joined))),
        unknown_nvlink=list(itertools.compress(links, unknown)),
        crossing_gpus=sorted(table.gpus_of(crossing)),
        sys_within_node=sys_within_node,
        crossing_without_nvlink=list(itertools.compress(links, without_nvlink)),
    )


def _side_codes(table: LinkTable, kind_of: dict[int, int], count: int, host_of: dict[int, int] | None) -> list[int]:
    """Each link's code for ``_link_sides``, ``kind + kinds * pair``: pair ``kind_a * count + kind_b +
    1`` (``kind_of``: each GPU's kind, of ``count``), 0 across hosts (``host_of``: each GPU's host;
    None: one host). In whole columns; of a domain's links, only those within a host get a pair."""
    link_kinds = len(table.kinds)
    first = {g: (kind * count + 1) * link_kinds for g, kind in kind_of.items()}
    second = {g: kind * link_kinds for g, kind in kind_of.items()}
    ends_a, ends_b = table.ends_a, table.ends_b
    if host_of is None:
        return list(map(operator.add, table.kind_of, map(operator.add, map(first.__getitem__, ends_a), map(second.__getitem__, ends_b))))
    within = list(map(operator.eq, map(host_of.__getitem__, ends_a), map(host_of.__getitem__, ends_b)))
    codes = list(table.kind_of)  # across hosts: the link's kind alone
    at = list(itertools.compress(range(len(codes)), within))
    pairs = map(operator.add, map(first.__getitem__, itertools.compress(ends_a, within)),
                map(second.__getitem__, itertools.compress(ends_b, within)))
    deque(map(codes.__setitem__, at, map(operator.add, map(codes.__getitem__, at), pairs)), maxlen=0)
    return codes


def _codes_where(codes: list[int], chosen: set[int], every: dict[int, Any]) -> list[bool]:
    """Per link, whether its code is one of ``chosen`` (of ``every`` code there is): one value where
    it is every code or none, without a look per link."""
    if not chosen or len(chosen) == len(every):
        return [bool(chosen)] * len(codes)
    return list(map(chosen.__contains__, codes))


def _path(pcie: str | None, word: str, nvlinks: int) -> str | None:
    """A link's PCIe path word: the pcie_path, else the link word where it is a PCIe word."""
    return pcie or (None if nvlinks > 0 or word == "UNKNOWN" else word)


def _sys_within_node(side: bool | None, pcie: str | None, word: str, nvlinks: int) -> bool:
    """SYS between two GPUs of one NUMA node: there SYS is a path class, not a crossing."""
    return side is True and _path(pcie, word, nvlinks) == "SYS"


def _verdict(side: bool | None, pcie: str | None, word: str, nvlinks: int, sys_within_node: bool) -> tuple[bool, int]:
    """(whether the link joins its GPUs' sides, 0 / ``_CROSSING`` / ``_UNKNOWN_NVLINK``). Where the
    source shows SYS within one NUMA node (``sys_within_node``), a SYS pair whose sides it does not
    give (a cut paste) is not called a crossing."""
    path = _path(pcie, word, nvlinks)
    joined = bool(side) if path is None else (path != "SYS" or side is True)
    if side:  # one NUMA node, whatever the link word (some PCIe boards say SYS within a node)
        return joined, 0
    if (path == "SYS" and (side is False or not sys_within_node)) or (path is None and nvlinks > 0 and side is False):
        return joined, _CROSSING
    return joined, _UNKNOWN_NVLINK if path is None and nvlinks > 0 and side is None else 0


def _link_sides_one_by_one(topology: Topology) -> LinkSides:
    result = LinkSides()
    sides = numa_sides(topology)
    facts = [(link, (sides.get((link.a, link.b)), *_LINK_FACTS(link))) for link in topology.links]
    result.sys_within_node = any(_sys_within_node(*fact) for _, fact in facts)
    for link, fact in facts:
        joined, what = _verdict(*fact, result.sys_within_node)
        if joined:
            result.joined.append((link.a, link.b))
        if what == _CROSSING:
            result.crossing.append(link)
        elif what == _UNKNOWN_NVLINK:
            result.unknown_nvlink.append(link)
    result.crossing_gpus = sorted({g for link in result.crossing for g in (link.a, link.b)})
    result.crossing_without_nvlink = [link for link in result.crossing if link.nvlink_count <= 0]
    return result


def numa_crossing_links(topology: Topology) -> list[Link]:
    """The links for which ``link_crosses_numa`` is true (none in a virtual machine's flat view)."""
    return [] if vm_evidence(topology) is not None else link_sides(topology).crossing


def socket_groups(topology: Topology) -> list[list[int]]:
    """GPUs grouped by what they share below the interconnect between NUMA nodes.

    Connected components of "PCIe path known and not SYS" (per host): GPUs 0-3 of a DGX-1, the GPU
    pairs of an NPS4 DGX A100. Where a pair's PCIe path is unknown (``nvidia-smi topo -m`` shows only
    NV<n> for NVLinked pairs), the two GPUs are joined when their NUMA (else CPU) affinity says so.
    """
    parent = {g: g for g in topology.gpu_indices}

    def find(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for a, b in link_sides(topology).joined:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = defaultdict(list)
    for g in topology.gpu_indices:
        groups[find(g)].append(g)
    return sorted((sorted(members) for members in groups.values()), key=lambda m: m[0])
