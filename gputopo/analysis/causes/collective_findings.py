"""What an nccl-tests run's bus bandwidth says of the links it crossed:

- ``collective-busbw-vs-ring``: where the topology gives every link between the run's GPUs, busbw at
  the largest bandwidth-bound size against the slowest hop of the best ring through them (a warning
  below half of it, else an info);
- ``collective-busbw-vs-pcie`` (info): where it does not (nccl-tests alone), the same figure against
  one PCIe x16 link per direction, Gen3/Gen4/Gen5 (or the GPUs' own generation where a source gives
  it, else the card's own generation where the output names the card: inferred from its name, said
  so), said as an estimate with its assumption.

From first principles: a ring collective (all_reduce, all_gather, reduce_scatter, broadcast, reduce)
sends every byte around the ring, each GPU to the next at once, so it runs at its slowest hop;
nccl-tests' busbw is scaled (all_reduce: algbw x 2(n-1)/n) to be comparable with that hop's
bandwidth per direction, for any n. Said only for one host (several: the network decides), at least
two GPUs the output names (one per rank), a named ring operation, and a size whose call takes long
enough that latency is a small share of it (``bandwidth_bound_row``): below that busbw is latency.
Figures are ``analysis.expect.bandwidth``'s (through ``measured.pair_best``: a measured pair wins).
"""

from __future__ import annotations

from gputopo.analysis.expect.bandwidth import (
    PCIE_EFFECTIVE_GBPS_PER_LANE,
    PCIE_GENERATION_RANGE,
    Estimate,
    card_generation,
    pcie_generation,
)
from gputopo.analysis.expect.measured import pair_best, rate
from gputopo.model import CollectiveRow, CollectiveRun, Finding, Topology
from gputopo.notation import format_size, gpu_list

RING_OPERATIONS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")
# One host's collective latency is tens of microseconds (the 8-byte all_reduce of 8 PCIe GPUs in the
# corpus: 39 us); a call of a millisecond or more, and 20x the smallest size's call where the table
# has one of at most 1 KiB, spends at most ~5% of its time on latency: bandwidth-bound.
MIN_CALL_US = 1000.0
LATENCY_SHARE = 0.05
SMALL_BYTES = 1024
X16 = 16


def collective_findings(topology: Topology) -> list[Finding]:
    """One busbw finding per nccl-tests run that can be judged (see the module), in order."""
    findings = []
    for run in topology.collectives:
        row = bandwidth_bound_row(run)
        if row is None or not _judged(topology, run):
            continue
        busbw = row.out_busbw_gbps or row.in_busbw_gbps  # out of place: the figure nccl-tests' average and users quote
        finding = _vs_ring(topology, run, row, busbw) if _links_known(topology, run.gpus) else _vs_pcie(topology, run, row, busbw)
        if finding is not None:
            findings.append(finding)
    return findings


def bandwidth_bound_row(run: CollectiveRun) -> CollectiveRow | None:
    """The largest size whose call is bandwidth-bound (see ``MIN_CALL_US``), with a busbw; else None."""
    rows = [r for r in run.rows if r.out_time_us is not None and (r.out_busbw_gbps or r.in_busbw_gbps)]
    if not rows:
        return None
    largest = max(rows, key=lambda r: r.size_bytes)
    smallest = min(run.rows, key=lambda r: r.size_bytes)
    floor = MIN_CALL_US
    if smallest.size_bytes <= SMALL_BYTES and smallest.out_time_us is not None:
        floor = max(floor, smallest.out_time_us / LATENCY_SHARE)
    return largest if largest.out_time_us >= floor else None


def _judged(topology: Topology, run: CollectiveRun) -> bool:
    """A ring operation on at least two GPUs of one host, one named GPU per rank."""
    if run.operation not in RING_OPERATIONS or len(run.gpus) < 2 or run.nranks != len(run.gpus):
        return False
    known = set(topology.gpu_indices)
    if not set(run.gpus) <= known:
        return False
    return len({topology.gpu(g).host for g in run.gpus}) == 1


def _links_known(topology: Topology, gpus: list[int]) -> bool:
    links = topology.link_map()
    pairs = [(a, b) for i, a in enumerate(sorted(gpus)) for b in sorted(gpus)[i + 1:]]
    return all((p in links and links[p].type != "UNKNOWN") for p in pairs)


def _head(topology: Topology, run: CollectiveRun, row: CollectiveRow, busbw: float) -> str:
    names = sorted({topology.gpu(g).name for g in run.gpus if topology.gpu(g).name})
    named = f" ({', '.join(names)[:120]})" if names else ""
    return (f"nccl-tests {run.operation} on GPUs {gpu_list(run.gpus)}{named}: busbw {busbw:g} GB/s at "
            f"{format_size(row.size_bytes)} (bandwidth-bound: {row.out_time_us / 1000:.1f} ms a call)")


def _vs_ring(topology: Topology, run: CollectiveRun, row: CollectiveRow, busbw: float) -> Finding:
    # Here, not at the top: `scan` would otherwise load all of recommend for every topology
    # (tests/unit/test_cli_imports.py); only a run with every link known gets here.
    from gputopo.analysis.recommend.ring import best_ring

    members = sorted(run.gpus)
    estimates = {(a, b): pair_best(topology, a, b) for i, a in enumerate(members) for b in members[i + 1:]}

    def centi(a: int, b: int) -> int:
        return 0 if a == b else round(estimates[(min(a, b), max(a, b))].span[0] * 100)

    weight = [[centi(a, b) for b in members] for a in members]
    _, order, _ = best_ring(list(range(len(members))), weight)
    hops = [(members[x], members[y]) for x, y in zip(order, order[1:] + order[:1])]
    a, b = min(hops, key=lambda h: centi(*h))
    slowest = estimates[(min(a, b), max(a, b))]
    low, high = slowest.span
    rating = rate(busbw, low)
    if rating != "far-below" and rate(busbw, high) != "ok":
        rating = "range" if high > low else rating
    figure = f"~{_gbps(low)}" + (f"-{_gbps(high)}" if high > low else "")
    share = f"{busbw / high:.0%}-{busbw / low:.0%}" if high > low else f"{busbw / low:.0%}"
    said = (f"{share} of the {figure} GB/s per direction that the best ring through these GPUs' links should "
            f"reach (its slowest hop: GPU {a}-{b}, {_basis(slowest)})")
    why = {"ok": ": the links, not a fault, set this figure",
           "range": ": within what the links may give; which end holds depends on what the source does not say",
           "low": ": somewhat below (estimates are rough; a hop may share a link or run slower than its type gives)",
           "far-below": (": a hop runs far below its link: P2P off or refused there (NCCL then copies through host "
                         "memory), a link trained narrow or slow, ACS or the IOMMU redirecting peer traffic, or other "
                         "work on the GPUs")}[rating]
    far_below = rating == "far-below"
    return Finding(
        "warning" if far_below else "info", "collective-busbw-vs-ring",
        f"{_head(topology, run, row, busbw)}, {said}{why}",
        gpus=list(run.gpus),
        fix=("see which pairs NCCL sends through host memory (run with NCCL_DEBUG=INFO and give gputopo the log: "
             "`gputopo scan --from topo.txt --from nccl.log`), measure the pairs (`gputopo bench-p2p`) and check the "
             "links (`gputopo doctor`)") if far_below else None,
    )


def _gbps(gbps: float) -> str:
    """``12.32`` -> ``"12.3"``, ``371.2`` -> ``"371"``: as the figures of bandwidth.py's note read."""
    return f"{gbps:.1f}" if gbps < 100 else f"{gbps:.0f}"


def _basis(estimate: Estimate) -> str:
    if estimate.basis == "measured":
        return estimate.explanation
    return f"estimated from {estimate.explanation}" + (f"; {estimate.assumption}" if estimate.assumption else "")


def _vs_pcie(topology: Topology, run: CollectiveRun, row: CollectiveRow, busbw: float) -> Finding | None:
    """Against one PCIe x16 link per direction: the GPUs' own (slowest) link where every GPU's
    generation is known (read, or inferred from the card's name: ``card_generation``), else each of
    Gen3-Gen5 x16. None where busbw is above them all (NVLink)."""
    gpus = [topology.gpu(g) for g in run.gpus]
    gens = [pcie_generation(g) or card_generation(g) for g in gpus]
    cards = list(dict.fromkeys(f"{g.name} is a Gen{card_generation(g)} card" for g in gpus if card_generation(g)))
    if all(gens):
        own = min((PCIE_EFFECTIVE_GBPS_PER_LANE.get(gen, 0.0) * ((g.pcie_width_current or g.pcie_width_max or X16)),
                   gen, g.pcie_width_current or g.pcie_width_max or X16) for g, gen in zip(gpus, gens))
        figures = [(f"their slowest PCIe link, Gen{own[1]} x{own[2]}", own[0])]
        assumption = "the GPUs' PCIe generation and width as read; the links between them are not in the source"
        if cards:  # a generation from a name: the most the card's link trains to, not a reading of it
            figures = [(f"a Gen{own[1]} x{own[2]} link", own[0])]
            assumption = (f"the card's PCIe generation, inferred from its name: {'; '.join(cards)}, the most its link "
                          "trains to, less in an older slot or riser; "
                          + ("the width as read" if all(g.pcie_width_current or g.pcie_width_max for g in gpus)
                             else "x16 assumed") + "; the links between the GPUs are not in the source")
    else:
        lo, hi = PCIE_GENERATION_RANGE
        figures = [(f"Gen{gen}", PCIE_EFFECTIVE_GBPS_PER_LANE[gen] * X16) for gen in range(lo, hi + 1)]
        assumption = "the output gives neither the links between the GPUs nor their PCIe generation"
    if busbw > max(gbps for _, gbps in figures):
        return None
    shares = ", ".join(f"{busbw / gbps:.0%} of {label} (~{_gbps(gbps)} GB/s)" for label, gbps in figures)
    return Finding(
        "info", "collective-busbw-vs-pcie",
        f"{_head(topology, run, row, busbw)}. A ring collective runs at its slowest hop; as an estimate against one "
        f"PCIe x16 link per direction ({assumption}), that is {shares}. Where the GPUs' own links carry more, a hop "
        "of the ring runs slower than P2P over them: copies through host memory (no P2P), the link between CPUs, "
        "or a narrow link",
        gpus=list(run.gpus),
        fix="give gputopo this host's `nvidia-smi topo -m` with it (`gputopo scan --from topo.txt --from "
            "nccl-tests.txt`) to compare with the ring's slowest link; NCCL_DEBUG=INFO shows which pairs NCCL sends "
            "through host memory",
    )
