"""Measured against expected, in one place: the measured GB/s of a link (bench-p2p,
p2pBandwidthLatencyTest, nvbandwidth...), what its link type should give (``analysis.expect.bandwidth``),
their ratio and its rating, and the best figure to rank by (a measurement wins over an estimate).

``bandwidth.estimate_link`` gives estimates only; whoever wants the measurement asks here.
"""

from __future__ import annotations

import dataclasses
import itertools
import operator
from dataclasses import dataclass

from gputopo.analysis.expect.bandwidth import Estimate, card_line_rate, estimate_link, fewest_nvlinks, line_rate_gbps
from gputopo.analysis.expect.estimates import estimate_of
from gputopo.analysis.expect.nccl_transport import NcclLevel, uses_p2p
from gputopo.errors import InputError
from gputopo.model import Gpu, Link, Measurement, Topology

# measured / expected: at or above OK_RATIO is as expected; below FAR_BELOW_RATIO is called out.
OK_RATIO = 0.7
FAR_BELOW_RATIO = 0.5
# Measured above the link's line rate by more than this: the copy did not cross that link.
LINE_RATE_SLACK = 1.05
# Via host faster than direct by this factor: P2P does not help on this pair.
VIA_HOST_FASTER_RATIO = 1.1
# P2P figure below this share of the same tool's staged (P2P off) figure: P2P costs, it does not pay
# on this pair (ACS or the IOMMU redirecting peer traffic: a fault a fix removes).
P2P_SLOWER_RATIO = 0.9
# How much a measured figure is taken to vary from run to run where its tool records no repeated
# samples (p2pBandwidthLatencyTest, nvbandwidth): figures closer than this rank as equal.
DEFAULT_NOISE = 0.05


def measured_gbps(link: Link) -> float | None:
    """The slower measured direction of a GPU-to-GPU copy, or ``None`` if nothing usable was measured.

    Only ``device_kind == "GPU"`` counts: bench-p2p on logical CPU devices measures host memory
    copies, which say nothing about this link. A bidirectional figure alone is halved (it adds
    both directions)."""
    return _headline_gbps(link.measured)


def _headline_gbps(m: Measurement | None) -> float | None:
    if m is None or m.device_kind != "GPU":
        return None
    values = [v for v in (m.a_to_b_gbps, m.b_to_a_gbps) if v is not None and v > 0]
    if values:
        return min(values)
    if m.bidirectional_gbps is not None and m.bidirectional_gbps > 0:
        return m.bidirectional_gbps / 2
    return None


def method_of(m: Measurement | None) -> str:
    """What took a measurement, for people: ``"p2pBandwidthLatencyTest P2P=Enabled"``, ``"bench-p2p"``."""
    if m is None:
        return "nothing"
    words = [w for w in (m.method or "bench-p2p", m.test) if w]
    return " ".join(words)


def noise_by_method(topology: Topology) -> dict[str, float]:
    """The noise assumed of each tool's figures (``method_of``), as a share of a figure: the widest
    spread of its repeated samples (``Measurement.spread``, bench-p2p) where every figure of the tool
    records one, else ``DEFAULT_NOISE``. Estimates have none: they are exact, given their facts."""
    spreads: dict[str, list[float | None]] = {}
    for link in measured_links(topology):
        if measured_gbps(link) is not None:
            spreads.setdefault(method_of(link.measured), []).append(link.measured.spread)
    return {method: DEFAULT_NOISE if None in values else max(values)  # type: ignore[type-var]
            for method, values in spreads.items()}


def noise_text(noise: dict[str, float]) -> str:
    """``"~5% (p2pBandwidthLatencyTest P2P=Enabled: no repeated samples, a default)"``: the noise
    assumed, for a note: the widest, then each tool's and where it comes from."""
    widest = max(noise.values(), default=DEFAULT_NOISE)
    each = "; ".join(f"{method}: " + ("no repeated samples recorded, the default" if value == DEFAULT_NOISE
                                      else f"the widest spread of its repeated samples, {percent(value)}")
                     for method, value in sorted(noise.items()))
    return f"~{percent(widest)}" + (f" ({each})" if each else "")


def percent(share: float) -> str:
    """``0.05`` -> ``"5%"``, ``0.021`` -> ``"2.1%"``."""
    return f"{share * 100:.1f}".rstrip("0").rstrip(".") + "%"


def staged_gbps(m: Measurement | None) -> float | None:
    """The slower direction of the copies the tool staged through host memory (P2P off), or None."""
    if m is None or m.device_kind != "GPU":
        return None
    values = [v for v in (m.p2p_off_a_to_b_gbps, m.p2p_off_b_to_a_gbps) if v is not None and v > 0]
    return min(values) if values else None


def p2p_slower_than_staged(link: Link) -> tuple[float, float] | None:
    """``(with P2P, staged)`` GB/s where the pair copied slower with P2P on than the same tool's
    copies through host memory (``P2P_SLOWER_RATIO``): its P2P path is broken (ACS or the IOMMU
    redirecting peer traffic), a fault a fix removes; None otherwise."""
    m = link.measured
    if m is None or m.p2p_enabled is not True:
        return None
    on, off = measured_gbps(link), staged_gbps(m)
    return (on, off) if on is not None and off is not None and on < P2P_SLOWER_RATIO * off else None


def own_link_factor(topology: Topology, link: Link) -> float:
    """What a pair's staged copies say of its GPUs' own links: its staged figure against the median
    of the measured pairs of its kind of link, at most 1 (1 where nothing was staged)."""
    staged = staged_gbps(link.measured)
    typical = topology.cached("staged_gbps_by_kind", _staged_by_kind).get(link.type)
    return min(1.0, staged / typical) if staged and typical else 1.0


def _staged_by_kind(topology: Topology) -> dict[str, float]:
    import statistics

    by_kind: dict[str, list[float]] = {}
    for link in measured_links(topology):
        value = staged_gbps(link.measured)
        if value is not None:
            by_kind.setdefault(link.type, []).append(value)
    return {kind: statistics.median(values) for kind, values in by_kind.items()}


def best_estimate(link: Link, gpu_a: Gpu | None = None, gpu_b: Gpu | None = None, fewest_links: int = 0,
                  topology: Topology | None = None, level: NcclLevel | None = None) -> Estimate:
    """The figure to rank ``link`` by: its measurement where there is one, else the estimate.

    A measurement is judged before it is used: one of a pair whose P2P is broken (slower than
    staged copies, ``p2p_slower_than_staged``) describes a fault, not the box, so the pair ranks by
    its link's estimate (the healthy state, once fixed), scaled by what its staged copies say of its
    GPUs' own links (``own_link_factor``, given the ``topology``: a GPU on an x8 link stays slow).

    Given NCCL's P2P ``level`` (``analysis.expect.nccl_transport``), a pair beyond it is figured as
    NCCL connects it, through host memory: by the same tool's staged copies where it took them (the
    path NCCL's SHM takes, fixed or not), else as before."""
    staged = staged_gbps(link.measured)
    if level is not None and staged is not None and link.can_peer is not False and not uses_p2p(link, level):
        return Estimate(staged, "measured", f"measured {staged:.1f} GB/s staged through host memory "
                                            f"({method_of(link.measured)}): the path NCCL's SHM takes beyond its P2P "
                                            f"level {level.level}")
    broken = p2p_slower_than_staged(link)
    if broken is not None:
        estimate = estimate_link(link, gpu_a, gpu_b, fewest_links)
        factor = own_link_factor(topology, link) if topology is not None else 1.0
        scaled = f", x{factor:.2f} for what its staged copies show of its GPUs' links" if factor < 1 else ""
        low, high = (None if v is None else v * factor for v in (estimate.low_gbps, estimate.high_gbps))
        return Estimate(estimate.gbps * factor, "estimated",
                        f"{estimate.explanation}{scaled} (measured {broken[0]:.1f} GB/s set aside: P2P slower than "
                        f"staged {broken[1]:.1f}, a fault to fix)", low, high, estimate.assumption)
    measured = measured_gbps(link)
    if measured is not None:
        return Estimate(measured, "measured", f"measured {measured:.1f} GB/s ({method_of(link.measured)})")
    return estimate_link(link, gpu_a, gpu_b, fewest_links)


def pair_best(topology: Topology, a: int, b: int) -> Estimate:
    """``best_estimate`` for GPUs ``a`` and ``b`` of ``topology``."""
    link = topology.link(a, b)
    return best_estimate(link, _gpu_or_none(topology, link.a), _gpu_or_none(topology, link.b), fewest_nvlinks(topology, a, b),
                         topology)


def best_matrix(topology: Topology) -> dict[tuple[int, int], float]:
    """``{(a, b): GB/s}`` for every ordered pair: measured where measured, else estimated (symmetric)."""
    result: dict[tuple[int, int], float] = {}
    for link in topology.links:
        est = best_estimate(link, _gpu_or_none(topology, link.a), _gpu_or_none(topology, link.b),
                            fewest_nvlinks(topology, link.a, link.b), topology)
        result[(link.a, link.b)] = result[(link.b, link.a)] = est.gbps
    return result


def rate(measured: float, expected: float) -> str:
    """``"ok"``, ``"low"`` or ``"far-below"`` for a measured figure against its expectation."""
    ratio = measured / expected if expected > 0 else 1.0
    if ratio >= OK_RATIO:
        return "ok"
    if ratio >= FAR_BELOW_RATIO:
        return "low"
    return "far-below"


def above_line_rate(measured: float, line_rate: float | None) -> bool:
    """Whether ``measured`` is more than the link can carry (with ``LINE_RATE_SLACK`` for rounding
    and clocks): the copy did not move its bytes over this link at that speed."""
    return line_rate is not None and measured > line_rate * LINE_RATE_SLACK


def verdict(measured: float, expected: float, line_rate: float | None = None) -> str:
    """The one judgement of a measured figure, for every view: ``"above-line-rate"`` (suspect),
    else ``rate``'s ``"ok"``, ``"low"`` or ``"far-below"``."""
    return "above-line-rate" if above_line_rate(measured, line_rate) else rate(measured, expected)


@dataclass(frozen=True)
class Expectation:
    """What a pair's link should give per direction, and why; the most it can carry (raw)."""

    link_type: str
    gbps: float
    explanation: str
    line_rate_gbps: float | None = None
    assumption: str | None = None
    # The line rate by the cards' own generation, inferred from their names (``card_line_rate``): (GB/s, gen).
    card_line_rate: tuple[float, int] | None = None


def expectation(topology: Topology, link: Link) -> Expectation | None:
    """``link``'s expectation (never its measurement); None where its type is not known."""
    expected = expected_for(topology, link)
    if expected is None:
        return None
    gpu_a, gpu_b = _gpu_or_none(topology, link.a), _gpu_or_none(topology, link.b)
    return Expectation(link.type, expected.gbps, expected.explanation, line_rate_gbps(link, gpu_a, gpu_b),
                       expected.assumption, card_line_rate(link, gpu_a, gpu_b))


@dataclass(frozen=True)
class Comparison:
    """One direction of one link: measured against what its link type should give."""

    src: int
    dst: int
    link_type: str
    measured_gbps: float
    expected_gbps: float
    expected_explanation: str
    method: str
    assumption: str | None = None  # where the expectation rests on a fact the source lacks (a range)
    line_rate_gbps: float | None = None  # the most the link can carry: above it, the bytes went elsewhere
    card_line_rate: tuple[float, int] | None = None  # (GB/s, gen) by the cards' generation inferred from their names

    @property
    def above_line_rate(self) -> bool:
        return above_line_rate(self.measured_gbps, self.line_rate_gbps)

    @property
    def above_card_line_rate(self) -> bool:
        """Above what the cards' own generation (inferred from their names) carries, not above the line rate
        of what the source read: a thing to check, not proof."""
        return (not self.above_line_rate and self.card_line_rate is not None
                and above_line_rate(self.measured_gbps, self.card_line_rate[0]))

    @property
    def ratio(self) -> float:
        return self.measured_gbps / self.expected_gbps if self.expected_gbps > 0 else 1.0

    @property
    def rating(self) -> str:
        return rate(self.measured_gbps, self.expected_gbps)

    @property
    def verdict(self) -> str:
        """The one judgement of this direction (``verdict``): ``"above-line-rate"``, else ``rating``."""
        return verdict(self.measured_gbps, self.expected_gbps, self.line_rate_gbps)

    def text(self) -> str:
        """``GPU 2→5: 9.9 GB/s, 40% of what PIX over PCIe Gen4 x16 gives (~24.6 GB/s)``."""
        return (
            f"GPU {self.src}\u2192{self.dst}: {self.measured_gbps:.1f} GB/s, {self.ratio:.0%} of what "
            f"{self.expected_explanation} gives (~{self.expected_gbps:.1f} GB/s; {self.method})"
        )


def expected_for(topology: Topology, link: Link) -> Estimate | None:
    """What ``link``'s type should give per direction (never a measurement); ``None`` where the
    link type is not known (a measurement alone, a TF log), since there is nothing to expect."""
    if link.type == "UNKNOWN":
        return None
    return estimate_of(topology, link)  # (the same figure, once per class of pair, as every view shows)


def compare(topology: Topology, link: Link) -> list[Comparison]:
    """Each measured direction of ``link`` against its expectation (empty where either is missing)."""
    m = link.measured
    if m is None or m.device_kind != "GPU":
        return []
    expected = expectation(topology, link)
    if expected is None:
        return []
    result = []
    for src, dst, value in ((link.a, link.b, m.a_to_b_gbps), (link.b, link.a, m.b_to_a_gbps)):
        if value is not None and value > 0:
            result.append(Comparison(src, dst, link.type, value, expected.gbps, expected.explanation, method_of(m),
                                     expected.assumption, expected.line_rate_gbps, expected.card_line_rate))
    return result


def comparisons(topology: Topology) -> list[Comparison]:
    """Every measured direction of every link against its expectation, in link order."""
    return [c for link in measured_links(topology) for c in compare(topology, link)]


def measured_links(topology: Topology) -> list[Link]:
    """The links with a measurement, in order: one pass in C (a 576-GPU domain has 165,600 links,
    and usually none measured), not a Python step per link. Asked afresh each time: measurements
    are added to links in place (``merge_measurements``)."""
    links = topology.links
    return list(itertools.compress(links, map(_MEASURED, links)))


_MEASURED = operator.attrgetter("measured")


def merge_measurements(topology: Topology, bench: Topology, bench_path: str, join_by_index: bool = False) -> int:
    """Copy ``bench``'s measured links onto ``topology``'s links of the same GPU pairs; returns how many.

    GPUs are joined by PCI bus id, else by UUID, where every measured GPU has one: a GPU of the
    bench that ``topology`` lacks refuses the bench (other GPUs). Without either, joining by index
    assumes both number the GPUs alike: refused in one line unless ``join_by_index``
    (``--join-by-index``). Host memory measured on logical CPU devices (``bench-p2p --cpu-devices``)
    never lands on GPU links, whatever is asked."""
    measured = [lk for lk in bench.links if lk.measured is not None]
    if not measured:
        raise InputError(f"{bench_path} has no measurements (save one with `gputopo bench-p2p --save FILE`)")
    if any(lk.measured.device_kind != "GPU" for lk in measured):
        raise InputError(f"{bench_path} measured host memory on logical CPU devices (bench-p2p --cpu-devices), not "
                         "GPUs: its figures are not laid on GPU links")
    index_of = _bench_join(topology, bench, bench_path, join_by_index)
    links = topology.link_map()
    count = 0
    for lk in measured:
        a, b = index_of[lk.a], index_of[lk.b]
        target = links.get((min(a, b), max(a, b)))
        if target is not None:
            target.measured = lk.measured if a < b else _reversed(lk.measured)
            count += 1
    return count


def _bench_join(topology: Topology, bench: Topology, bench_path: str, join_by_index: bool) -> dict[int, int]:
    """``{bench GPU index: topology's}`` by bus id, else UUID, else (asked for) by index."""
    for field, what in (("pci_bus_id", "PCI bus id"), ("uuid", "UUID")):
        mine = {getattr(g, field): g.index for g in topology.gpus if getattr(g, field)}
        if mine and bench.gpus and all(getattr(g, field) for g in bench.gpus):
            other = [g for g in bench.gpus if getattr(g, field) not in mine]
            if other:
                raise InputError(f"{bench_path} was measured on other GPUs: its GPU {other[0].index} is "
                                 f"{what} {getattr(other[0], field)}, which this topology does not have")
            return {g.index: mine[getattr(g, field)] for g in bench.gpus}
    if not join_by_index:
        raise InputError(f"{bench_path} does not name its GPUs by PCI bus id or UUID, so which GPUs it measured "
                         "cannot be told: give --join-by-index to lay its figures on the GPUs of the same index")
    for gpu in bench.gpus:
        if _gpu_or_none(topology, gpu.index) is None:
            raise InputError(f"{bench_path} measures GPU {gpu.index}, which this topology does not have")
    return {g.index: g.index for g in bench.gpus}


def _reversed(measurement: Measurement) -> Measurement:
    return dataclasses.replace(measurement, a_to_b_gbps=measurement.b_to_a_gbps, b_to_a_gbps=measurement.a_to_b_gbps,
                               p2p_off_a_to_b_gbps=measurement.p2p_off_b_to_a_gbps,
                               p2p_off_b_to_a_gbps=measurement.p2p_off_a_to_b_gbps)


def _gpu_or_none(topology: Topology, index: int) -> Gpu | None:
    try:
        return topology.gpu(index)
    except KeyError:
        return None
