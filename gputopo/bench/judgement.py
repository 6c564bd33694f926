"""bench-p2p's result judged once, for every rendering (the rich screen, ``--json``): each ordered
pair's expectation by the one rule scan and the report use (``analysis.expect.measured``), its rating
and share of that expectation, whether a figure is above the link's line rate, the call-outs for pairs
far below, and the pairs where copying through host memory beat the direct copy. The views read
these; they do not judge again."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.analysis.expect.measured import VIA_HOST_FASTER_RATIO, Expectation, expectation, rate, verdict
from gputopo.bench.results import BenchResult
from gputopo.model import Topology

Pair = tuple[int, int]


@dataclass
class BenchJudgement:
    """Per ordered pair (where the link's expectation is known): ``expected``; the headline
    one-way figure's ``rating`` and ``percent`` of it, and the two-way figure's ``bidir_rating``
    against twice it; ``suspect`` where the one-way figure is above the link's line rate."""

    expected: dict[Pair, Expectation] = field(default_factory=dict)
    rating: dict[Pair, str] = field(default_factory=dict)
    bidir_rating: dict[Pair, str] = field(default_factory=dict)
    percent: dict[Pair, float] = field(default_factory=dict)
    suspect: dict[Pair, bool] = field(default_factory=dict)
    callouts: list[str] = field(default_factory=list)
    via_host_faster: list[str] = field(default_factory=list)


def judge(result: BenchResult, topology: Topology | None) -> BenchJudgement:
    judged = BenchJudgement(expected=pair_expectations(result, topology))
    for key, exp in judged.expected.items():
        pair = result.pairs.get(key)
        head = pair.headline() if pair else None
        uni = head.uni_gbps.median if head and head.uni_gbps else None
        bidir = head.bidir_gbps.median if head and head.bidir_gbps else None
        if uni is not None:
            judged.rating[key] = rate(uni, exp.gbps)
            judged.suspect[key] = exp.line_rate_gbps is not None and uni > exp.line_rate_gbps
            if exp.gbps > 0:
                judged.percent[key] = 100 * uni / exp.gbps
        if bidir is not None:
            judged.bidir_rating[key] = rate(bidir, 2 * exp.gbps)
    judged.callouts = callouts(result, judged.expected)
    judged.via_host_faster = via_host_notes(result)
    return judged


def pair_expectations(result: BenchResult, topology: Topology | None) -> dict[tuple[int, int], Expectation]:
    """Per ordered pair, what its link should give (``analysis.expect.measured.expectation``, the one rule
    scan and the report use too); empty for host memory or no topology."""
    if topology is None or result.measures_host_memory:
        return {}
    links = topology.link_map()
    expected: dict[tuple[int, int], Expectation] = {}
    for a, b in result.ordered_pairs():
        link = links.get((a, b))
        found = expectation(topology, link) if link is not None else None
        if found is not None:
            expected[(a, b)] = found
    return expected


def callouts(result: BenchResult, expected: dict[tuple[int, int], Expectation]) -> list[str]:
    """One line per pair far below expectation, e.g. ``GPU 2 -> 5: NV2 expected ~40 GB/s, measured 11``."""
    lines: list[str] = []
    for key in result.ordered_pairs():
        pair, exp = result.pairs.get(key), expected.get(key)
        head = pair.headline() if pair else None
        if exp is None or head is None or head.uni_gbps is None or (pair and pair.inferred_from):
            continue
        judged = verdict(head.uni_gbps.median, exp.gbps, exp.line_rate_gbps)
        if judged == "above-line-rate":
            lines.append(
                f"{result.device_kind} {key[0]} -> {key[1]}: measured {head.uni_gbps.median:.0f} GB/s is above the "
                f"{exp.link_type} line rate (~{exp.line_rate_gbps:.0f} GB/s): suspect, the copy cannot have moved "
                "its bytes over this link at that speed"
            )
        elif judged == "far-below":
            lines.append(
                f"{result.device_kind} {key[0]} -> {key[1]}: {exp.link_type} expected ~{exp.gbps:.0f} GB/s, "
                f"measured {head.uni_gbps.median:.0f}"
            )
    return lines


def via_host_notes(result: BenchResult) -> list[str]:
    """Pairs where copying through host memory beat the direct copy: P2P does not pay there. None on
    logical CPU devices: every copy is in host memory, so neither is a link (docs/bench-p2p.md)."""
    lines: list[str] = []
    if result.measures_host_memory:
        return lines
    for key in result.ordered_pairs():
        pair = result.pairs.get(key)
        head = pair.headline() if pair else None
        if head is None or head.uni_gbps is None or head.via_host_gbps is None:
            continue
        if head.via_host_gbps.median > VIA_HOST_FASTER_RATIO * head.uni_gbps.median:
            lines.append(
                f"{result.device_kind} {key[0]} -> {key[1]}: through host memory {head.via_host_gbps.median:.1f} GB/s "
                f"beats the direct copy {head.uni_gbps.median:.1f} GB/s"
            )
    return lines
