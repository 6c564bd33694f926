"""What ``scan`` answers, made once: the findings (each with its kind), every measured direction
against what its link should give with the one verdict of ``analysis.expect.measured``, each GPU's place
(host, socket, NUMA node, CPUs, PCI bus id) with its nearest NICs (``analysis.place.nics``), and what the
source does not say. The text screen, the report page and ``scan --json`` all render this one object,
as ``recommend`` renders its ``Recommendation`` and ``doctor`` its ``DoctorReport``: none of them
judges a figure while drawing it. What they colour and write is made here too: each link's expected
figure and whether its speed is known at all (a virtual machine's PCIe words), each link word's span
and what it assumes, a measured link's verdict, a PCIe link below its max read with its performance
state, the findings ranked and those the drawing marks, the pairs doctor named.

Costs stay those of the parts, each made once and only where a rendering asks for it: the measured
links are found in one pass in C (``measured_links``) and shared by the verdicts and
``link_figures``; the places (a pass over the GPUs and NIC links), the unknowns (once per kind of
link) and ``link_figures`` (every link's expected figure, once per class of pair) are made when
first asked: a 576-GPU domain's text screen needs none of them.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Iterator

from gputopo.analysis.causes.finding_kinds import FAULT, kind_of, worst_first
from gputopo.analysis.expect import pstates
from gputopo.analysis.expect.bandwidth import Estimate, implied_nvlinks
from gputopo.analysis.expect.estimates import Span, estimate_column, estimate_of, pair_classes, word_spans
from gputopo.analysis.expect.link_figures import link_figures
from gputopo.analysis.expect.measured import Comparison, compare, measured_gbps, measured_links
from gputopo.analysis.place.locality import vm_evidence
from gputopo.analysis.place.nics import nearest_nics, nic_label
from gputopo.model import Finding, Gpu, Link, Topology


@dataclass(frozen=True)
class GpuPlace:
    """Where one GPU sits: host, CPU socket, NUMA node(s), the CPUs near it, its PCI bus id, and the
    NICs on its best path (``nic_path``: nvidia-smi's word for that path; None where no NIC or no
    path to one is known)."""

    gpu: int
    pci_bus_id: str | None
    host: str | None
    socket: int | None
    numa_node: int | None
    numa_affinity: str | None
    cpu_affinity: str | None
    nic_path: str | None = None
    nearest_nics: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"gpu": self.gpu, "pci_bus_id": self.pci_bus_id, "host": self.host, "socket": self.socket,
                "numa_node": self.numa_node, "numa_affinity": self.numa_affinity, "cpu_affinity": self.cpu_affinity,
                "nic_path": self.nic_path, "nearest_nics": list(self.nearest_nics)}


@dataclass(frozen=True)
class Unknowns:
    """What the source does not say, as facts (each view words them): GPU pairs with no link in the
    source, pairs whose kind of link is not known, GPUs with neither NUMA node nor CPU affinity,
    and whether the source says nothing of P2P support."""

    missing_pairs: list[tuple[int, int]] = field(default_factory=list)
    unknown_link_pairs: list[tuple[int, int]] = field(default_factory=list)
    unplaced_gpus: list[int] = field(default_factory=list)
    p2p_not_in_source: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"missing_pairs": [list(p) for p in self.missing_pairs],
                "unknown_link_pairs": [list(p) for p in self.unknown_link_pairs],
                "unplaced_gpus": self.unplaced_gpus, "p2p_not_in_source": self.p2p_not_in_source}


@dataclass
class ScanResult:
    """One topology as ``scan`` shows it (see the module's docstring)."""

    topology: Topology
    findings: list[Finding]
    measured: list[Link]  # the links with a measurement, in link order
    compared: list[Comparison]  # every measured direction with an expectation, in link order

    @cached_property
    def places(self) -> list[GpuPlace]:
        return gpu_places(self.topology)

    @cached_property
    def unknowns(self) -> Unknowns:
        return unknowns(self.topology)

    def comparison(self, src: int, dst: int) -> Comparison | None:
        """The measured direction ``src -> dst`` against its expectation, or None."""
        return self._by_direction.get((src, dst))

    @cached_property
    def _by_direction(self) -> dict[tuple[int, int], Comparison]:
        return {(c.src, c.dst): c for c in self.compared}

    @cached_property
    def link_figures(self) -> dict[str, Any]:
        """``analysis.expect.link_figures``'s figures, each measured link with its measured directions."""
        figures = link_figures(self.topology, self.measured)
        for entry in figures["measured"]:
            entry["directions"] = [direction_dict(c) for c in (self.comparison(entry["a"], entry["b"]),
                                                               self.comparison(entry["b"], entry["a"])) if c]
        return figures

    # What the views colour and write of each link and GPU, judged here once: they draw it, never decide it.

    @cached_property
    def in_vm(self) -> bool:
        """Whether the source shows a virtual machine: its PCIe words are the hypervisor's, so no
        speed is known from them (``analysis.place.locality.vm_evidence``)."""
        return vm_evidence(self.topology) is not None

    def expected(self, link: Link) -> Estimate:
        """What ``link`` should give per direction (never its measurement), once per class of pair
        (``analysis.expect.estimates``): the figure every view writes beside the link."""
        return estimate_of(self.topology, link)

    def expected_speed(self, link: Link) -> float | None:
        """The expected GB/s the link matrix is coloured by; None where its speed is not known: a
        link of unknown kind, or a PCIe word on a virtual machine (``in_vm``)."""
        if link.type == "UNKNOWN" or (self.in_vm and not link.is_nvlink):
            return None
        return self.expected(link).gbps

    @cached_property
    def speed_spans(self) -> dict[str, Span | None]:
        """Each link word's span of expected GB/s over its pairs (``estimates.word_spans``, a range
        where a generation is not in the source, with what it assumes); None where the speed is not
        known at all: ``UNKNOWN``, and on a virtual machine every word but NV#."""
        spans: dict[str, Span | None] = dict(word_spans(self.topology))
        for word in dict.fromkeys(kind[0] for kind in self.topology.link_table().kinds):
            if word == "UNKNOWN" or (self.in_vm and not word.startswith("NV")):
                spans[word] = None
        return spans

    @cached_property
    def expected_column(self) -> list[Estimate]:
        """Every link's expectation, in ``topology.links`` order (``estimates.estimate_column``)."""
        return estimate_column(self.topology)

    @cached_property
    def class_column(self) -> list[int] | None:
        """Every link's class of pair, in link order (links of one class have one expectation and
        one kind); None where a link's GPU is not in the topology's list."""
        classes = pair_classes(self.topology)
        return classes.code_of if classes.complete else None

    def measured_gbps(self, link: Link) -> float | None:
        """The figure a link is measured at (``measured.measured_gbps``: its slower GPU-to-GPU direction)."""
        return measured_gbps(link)

    def link_verdict(self, link: Link) -> str | None:
        """The verdict on a measured link's slower direction (``compared``: the one rule of
        ``analysis.expect.measured``); None where not measured or nothing is expected."""
        judged = [c for c in (self.comparison(link.a, link.b), self.comparison(link.b, link.a)) if c is not None]
        return min(judged, key=lambda c: c.measured_gbps).verdict if judged else None

    @cached_property
    def pcie_below(self) -> dict[int, tuple[str, str | None]]:
        """``{gpu: (pstates.BELOW or pstates.BELOW_IDLE, "P8" or None)}`` for each GPU whose PCIe link
        reads below its max (``pstates.pcie_below``: the performance state it was read in, named where
        the source read one, says whether by design)."""
        found = {}
        for gpu in self.topology.gpus:
            below = pstates.pcie_below(gpu)
            if below is not None:
                found[gpu.index] = (below, pstates.word(gpu.performance_state) if pstates.known(gpu.performance_state) else None)
        return found

    def implied_nvlinks(self, gpu: Gpu) -> int | None:
        """The fewest NVLinks ``gpu`` must have by the NV# words (``bandwidth.implied_nvlinks``)."""
        return implied_nvlinks(self.topology, gpu.index)

    @cached_property
    def ranked_findings(self) -> list[tuple[Finding, str]]:
        """Each finding with its kind (``finding_kinds.kind_of``: fault, design or note), worst first
        (``worst_first``: errors, warnings, infos; in each, faults, design facts, notes)."""
        return [(f, kind_of(f)) for f in worst_first(self.findings)]

    @cached_property
    def faults(self) -> list[Finding]:
        """The findings the drawing marks where they point: the faults (``Finding.kind``), and a
        finding of no kind (an older snapshot's) that is an error."""
        return [f for f in self.findings if f.kind == FAULT or (f.kind is None and f.severity == "error")]

    @cached_property
    def pair_faults(self) -> dict[tuple[int, int], list[str]]:
        """``{(a, b): problems}``: the pairs doctor named with what it found on their path
        (``Link.health``, set by ``causes.doctor.apply_health``), found in one pass in C."""
        links = self.topology.links
        return {(lk.a, lk.b): list(lk.health) for lk in itertools.compress(links, map(_HEALTH, links))}

    def json_extra(self) -> dict[str, Any]:
        """What ``scan --json`` writes after the topology's own members (a snapshot reader ignores them)."""
        return {"link_figures": self.link_figures, "gpu_places": [p.to_dict() for p in self.places],
                "unknowns": self.unknowns.to_dict()}

    def json_parts(self) -> Iterator[str]:
        """``scan --json``'s text in parts (``Topology.json_parts``: a domain's is never held whole)."""
        return self.topology.json_parts(extra=self.json_extra())


_HEALTH = operator.attrgetter("health")


def direction_dict(c: Comparison) -> dict[str, Any]:
    """One measured direction for JSON: the ratio is null where the expectation rests on an
    assumption (a fact its speed depends on is not in the source: the share would be a guess)."""
    return {"src": c.src, "dst": c.dst, "measured_gbps": round(c.measured_gbps, 2),
            "expected_gbps": round(c.expected_gbps, 2), "ratio": None if c.assumption else round(c.ratio, 3),
            "verdict": c.verdict, "method": c.method}


def scan_result(topology: Topology) -> ScanResult:
    """``topology`` (resolved, its findings made: ``analysis.topology_for``) as ``scan`` shows it."""
    measured = measured_links(topology)  # (once: a domain's links are many, its measured ones few)
    return ScanResult(topology=topology, findings=list(topology.diagnostics), measured=measured,
                      compared=[c for link in measured for c in compare(topology, link)])  # (= comparisons(topology))


def gpu_places(topology: Topology) -> list[GpuPlace]:
    """Every GPU's place, in the topology's order, with the NICs nearest it."""
    nearest = {n.gpu: n for n in nearest_nics(topology)}
    places = []
    for g in topology.gpus:
        near = nearest.get(g.index)
        places.append(GpuPlace(g.index, g.pci_bus_id, g.host, g.socket, g.numa_node, g.numa_affinity, g.cpu_affinity,
                               near.path if near else None, tuple(nic_label(n) for n in near.nics) if near else ()))
    return places


def unknowns(topology: Topology) -> Unknowns:
    """What the source does not say (once per kind of link: a 576-GPU domain has 165,600 links)."""
    table = topology.link_table()
    if _every_pair_linked(topology):
        missing: list[tuple[int, int]] = []
    else:
        links = topology.link_map()
        missing = [p for p in topology.pairs() if p not in links]
    unknown_kinds = [k for k, kind in enumerate(table.kinds) if kind[0] == "UNKNOWN"]
    unknown_links = [(lk.a, lk.b) for lk in table.links_where(topology.links, unknown_kinds)] if unknown_kinds else []
    return Unknowns(
        missing_pairs=missing,
        unknown_link_pairs=unknown_links,
        unplaced_gpus=[g.index for g in topology.gpus if g.numa_node is None and not g.cpu_affinity],
        p2p_not_in_source=bool(topology.links) and all(link.can_peer is None for link in table.examples),
    )


def _every_pair_linked(topology: Topology) -> bool:
    """Whether every pair of the topology's GPUs has a link, in whole columns: where the links come
    in order (each ``a < b``, each pair after the one before it: a reader's matrix, a snapshot) and
    are as many as the pairs, each pair is there once, and no table of every pair is made (a 576-GPU
    domain's 165,600 links); else the link table counts them (``covers_every_pair``)."""
    gpus = frozenset(topology.gpu_indices)
    table = topology.link_table()
    if len(topology.links) != len(gpus) * (len(gpus) - 1) // 2 or not table.gpus_of() <= gpus:
        return False
    ends_a, ends_b = table.ends_a, table.ends_b
    try:
        in_order = all(map(operator.lt, ends_a, ends_b)) and all(
            map(operator.lt, zip(ends_a, ends_b), itertools.islice(zip(ends_a, ends_b), 1, None)))
    except TypeError:  # (ends that do not compare: the table's count says)
        in_order = False
    return in_order or table.covers_every_pair(topology.gpu_indices)
