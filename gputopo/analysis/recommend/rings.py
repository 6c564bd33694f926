"""The best groups found by listing rings, where the branch and bound would take too long.

On a topology without symmetry (a random 72-GPU one) many groups tie on the fastest ring and on one
NUMA node, and only the total bandwidth inside them tells them apart: a densest-subgraph question
the branch and bound's bounds answer slowly. But where the links at least as fast as the best ring
are few, the groups with such a ring can simply be listed: a ring of k GPUs over links at least t
fast is a k-cycle in the graph of those links. So:

1. the fastest ring speed t is the first link speed, fastest first, at which a k-cycle exists
   (each slower speed's graph is searched completely, so none is faster);
2. every group of k GPUs of one NUMA node holding a k-cycle at t is listed. Any group on more NUMA
   nodes (so no fewer hosts) or with a slower ring ranks below all of them, so where there are
   ``keep`` of them, the ``keep`` best by the rest of the key are exact.

Each step of the depth-first listing counts against a budget (``RING_STEPS``, and what is left of
the recommendation's work budget, which each step and each speed's graph also count in); past it,
or where fewer than ``keep`` such groups exist, nothing is settled here and the branch and bound
goes on.
"""

from __future__ import annotations

from collections.abc import Callable

from gputopo.analysis.recommend.problem import Problem, negated_key
from gputopo.analysis.recommend.result import GroupKey

RING_STEPS = 200_000  # depth-first steps the listing may take


class _Steps:
    """The listing's steps ``left``; ``other``: the rest of its work (graphs, sets), which counts
    in the recommendation's budget only."""

    def __init__(self, budget: int):
        self.left = budget
        self.other = 0


def fastest_ring_groups(problem: Problem, k: int, required: set[int], keep: int,
                        canonical: Callable[[tuple[int, ...]], tuple[int, ...]],
                        budget: int = RING_STEPS) -> list[tuple[GroupKey, tuple[int, ...]]] | None:
    """The ``keep`` best groups of ``k`` positions holding ``required``, best first (ties: lowest
    positions), where steps 1 and 2 of the module text settle them; else None. ``canonical``: a
    group as the search writes it (the first members of each twin class)."""
    if k < 3 or problem.locality_scaled or problem.n < k:
        return None  # (with sockets or distances in the locality, one NUMA node need not rank first)
    w, n = problem.weight, problem.n
    work = problem.budget
    allowed = min(budget, work.left)
    steps = _Steps(allowed)
    try:
        for speed in problem.speeds:
            steps.other += n * n // 2  # the graph of the links at least that fast
            if steps.other > work.left:
                return None
            fast = [{j for j in range(n) if j != i and w[i][j] >= speed} for i in range(n)]
            found = _cycles(fast, list(range(n)), k, steps, first_only=True)
            if found is None:
                return None
            if found:
                break
        else:
            return None
        return _listed(problem, k, required, keep, canonical, fast, speed, steps)
    finally:
        work.spend(allowed - max(steps.left, 0) + steps.other)


def _listed(problem: Problem, k: int, required: set[int], keep: int,
            canonical: Callable[[tuple[int, ...]], tuple[int, ...]], fast: list[set[int]], speed: int,
            steps: _Steps) -> list[tuple[GroupKey, tuple[int, ...]]] | None:
    """Step 2 of the module text, at ring speed ``speed`` over the ``fast`` links."""
    n = problem.n
    places: dict[int, list[int]] = {}
    for position in range(n):
        places.setdefault(problem.domain_id[position], []).append(position)
    groups: set[tuple[int, ...]] = set()
    for members in places.values():
        if len(members) < k or not required <= set(members):
            continue
        listed = _cycles(fast, members, k, steps, first_only=False)
        if listed is None:
            return None
        groups.update(canonical(group) for group in listed if required <= set(group))
    if len(groups) < keep:
        return None
    keyed = [((speed,) + tuple(problem.locality_and_total(group)), group) for group in groups]
    keyed.sort(key=lambda item: (negated_key(item[0]), item[1]))
    return keyed[:keep]


def _cycles(fast: list[set[int]], members: list[int], k: int, steps: _Steps,
            first_only: bool) -> set[tuple[int, ...]] | None:
    """The sets of ``k`` of ``members`` that hold a cycle over ``fast`` links (each cycle found from
    its lowest GPU); with ``first_only``, at most one. None where ``steps`` ran out."""
    found: set[tuple[int, ...]] = set()
    inside = set(members)
    for start in sorted(members):
        steps.other += len(inside)
        after = {u for u in inside if u > start}
        closing = fast[start] & after  # the last GPU of the path must link back to the start
        if len(closing) < 2:
            continue
        path, on_path = [start], {start}
        stack = [iter(sorted(fast[start] & after))]
        while stack:
            steps.left -= 1
            if steps.left < 0:
                return None
            u = next(stack[-1], None)
            if u is None:
                stack.pop()
                on_path.discard(path.pop())
                continue
            if u in on_path:
                continue
            if len(path) == k - 1:
                if u in closing:
                    found.add(tuple(sorted(path + [u])))
                    if first_only:
                        return found
                continue
            if len(path) == k - 2 and not (fast[u] & closing) - on_path:
                continue  # no GPU left to close the ring through
            path.append(u)
            on_path.add(u)
            stack.append(iter(sorted(fast[u] & after)))
    return found
