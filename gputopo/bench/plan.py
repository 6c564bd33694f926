"""Which ordered pairs ``bench-p2p`` measures, and what it infers (no TensorFlow here).

- Full (the default): every ordered pair.
- ``--quick``: one ordered pair per class of equivalent pairs (``analysis.place.pair_classes``: same link
  word, NUMA relation, switch), plus pairs so that every GPU is in at least one measured pair (a
  single bad link or GPU still shows); every other pair's figures are its class's, marked inferred.
- ``--concurrent``: rounds of disjoint pairs (a perfect matching per round, as a round-robin
  tournament schedules them) that copy at the same time, beside their one-at-a-time figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputopo.analysis.place.pair_classes import pair_classes
from gputopo.bench.results import BenchResult
from gputopo.model import Topology


@dataclass
class PairPlan:
    """The ordered pairs to measure, and for each other ordered pair the measured one it takes its
    figures from."""

    measured: list[tuple[int, int]]
    inferred: dict[tuple[int, int], tuple[int, int]] = field(default_factory=dict)
    classes: list[dict[str, Any]] = field(default_factory=list)
    quick: bool = False

    def unordered(self) -> list[tuple[int, int]]:
        """The measured pairs without direction (for the both-ways copies), in order."""
        return list(dict.fromkeys((min(a, b), max(a, b)) for a, b in self.measured))


def full_plan(indices: list[int]) -> PairPlan:
    return PairPlan([(a, b) for a in indices for b in indices if a != b])


def quick_plan(indices: list[int], topology: Topology | None) -> PairPlan:
    """One ordered pair per class, then one more for each GPU no measured pair has yet (paired with
    another such GPU where there is one); the rest inferred from their class's first pair."""
    classes = pair_classes(topology, indices)
    position = {g: k for k, g in enumerate(indices)}
    chosen: list[tuple[int, int]] = [_oriented(cls.pairs[0], position) for cls in classes]
    covered = {g for pair in chosen for g in pair}
    for g in indices:
        if g in covered:
            continue
        partners = [h for h in indices if h != g and h not in covered] or [h for h in indices if h != g]
        pair = _oriented((min(g, partners[0]), max(g, partners[0])), position)
        chosen.append(pair)
        covered.update(pair)
    measured = list(dict.fromkeys(chosen))
    class_of = {pair: k for k, cls in enumerate(classes) for pair in cls.pairs}
    first = [_oriented(cls.pairs[0], position) for cls in classes]
    inferred: dict[tuple[int, int], tuple[int, int]] = {}
    for a in indices:
        for b in indices:
            if a == b or (a, b) in measured:
                continue
            inferred[(a, b)] = first[class_of[(min(a, b), max(a, b))]]
    described = [
        {"link": cls.key.label(), "link_type": cls.key.link_type, "pairs": len(cls.pairs),
         "measured": [list(p) for p in measured if (min(p), max(p)) in set(cls.pairs)]}
        for cls in classes
    ]
    return PairPlan(measured, inferred, described, quick=True)


def _oriented(pair: tuple[int, int], position: dict[int, int]) -> tuple[int, int]:
    """The pair in the order the devices were given (the first named copies to the second)."""
    a, b = pair
    return (a, b) if position[a] <= position[b] else (b, a)


def fill_inferred(result: BenchResult, plan: PairPlan) -> None:
    """Give each inferred ordered pair its class's measured figures, marked ``inferred_from``."""
    for (a, b), source in plan.inferred.items():
        measured = result.pairs.get(source)
        pair = result.pair(a, b)
        pair.inferred_from = source
        if measured is None:
            continue
        pair.points = list(measured.points)
        pair.latency_us = measured.latency_us
        pair.bytes_checked = measured.bytes_checked
    result.quick = plan.quick
    result.pair_classes = list(plan.classes)


def matchings(indices: list[int]) -> list[list[tuple[int, int]]]:
    """Rounds of disjoint pairs covering every unordered pair once (the circle method: with an odd
    count one device rests each round)."""
    players: list[int | None] = list(indices) + ([None] if len(indices) % 2 else [])
    n = len(players)
    rounds = []
    for _ in range(n - 1):
        pairs = [(players[k], players[n - 1 - k]) for k in range(n // 2)]
        rounds.append([(a, b) for a, b in pairs if a is not None and b is not None])
        players = [players[0], players[-1], *players[1:-1]]
    return rounds


def measure_concurrent(run: Any, size: int) -> None:
    """``--concurrent``: each round's disjoint pairs copy ``size`` bytes at the same time, one way
    (the first of each pair to the second); each pair's figure is its bytes over the round's time,
    beside its one-at-a-time figure (``contention`` = concurrent / alone). ``run`` is the
    ``run._PairRun`` measuring (its steps, timeouts and byte checks)."""
    from gputopo.bench.results import gbps_stat
    from gputopo.notation import format_size

    result: BenchResult = run.result
    for number, pairs in enumerate(matchings([d.index for d in run.devices]), start=1):
        names = [(run.by_index[a].tf_name, run.by_index[b].tf_name) for a, b in pairs]
        seconds, error = run.step(
            f"{run.kind} round {number}: {len(pairs)} pairs at once, {format_size(size)}",
            sorted({g for pair in pairs for g in pair}),
            lambda cancel, names=names: run.bench.measure_concurrent(names, size, cancel),
            copies=list(pairs),
        )
        entry: dict[str, Any] = {"round": number, "pairs": [list(p) for p in pairs], "size_bytes": size,
                                 "error": error, "aggregate_gbps": None, "per_pair": []}
        if error is None:
            per_pair = gbps_stat(size, seconds)
            entry["aggregate_gbps"] = per_pair.median * len(pairs)
            for a, b in pairs:
                pair = result.pair(a, b)
                pair.concurrent_gbps = per_pair
                head = pair.headline()
                alone = head.uni_gbps.median if head and head.uni_gbps else None
                entry["per_pair"].append({
                    "src": a, "dst": b, "gbps": per_pair.median, "alone_gbps": alone,
                    "contention": per_pair.median / alone if alone else None,
                    "alone_inferred": pair.inferred_from is not None,
                })
        result.concurrent_rounds.append(entry)
    if result.measures_host_memory:
        result.notes.append(
            "--concurrent on logical CPU devices: every pair copies within the same host memory, so the "
            "contention figures measure host memory bandwidth shared by the copies, not links"
        )
