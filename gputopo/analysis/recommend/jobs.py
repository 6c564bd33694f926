"""``--jobs N``: N disjoint groups of k GPUs, the worst group as good as possible.

Exact where every group can be listed (at most ``JOBS_EXACT_GROUP_LIMIT``): groups are evaluated
lazily in optimistic order and packed by an exact cover search. Beyond, greedy: the best group, then
the best of the GPUs left, and so on.
"""

from __future__ import annotations

import itertools
import math

from gputopo.analysis.recommend.problem import Problem, negated_key
from gputopo.analysis.recommend.result import GroupKey
from gputopo.analysis.recommend.search import NODE_BUDGET, search_groups
from gputopo.errors import InputError

JOBS_EXACT_GROUP_LIMIT = 20_000  # enumerate every group for --jobs when there are at most this many


def split_jobs(problem: Problem, k: int, jobs: int, required: set[int]) -> tuple[list[tuple[int, ...]], bool, str]:
    """``jobs`` disjoint groups of ``k`` positions covering ``required``; the worst group's key is
    maximised (exactly where every group can be listed, else greedily). Returns (groups, exact, how)."""
    total_groups = math.comb(problem.n, k)
    if total_groups <= JOBS_EXACT_GROUP_LIMIT:
        best = _split_jobs_exact(problem, k, jobs, required)
        if best is None:
            raise InputError(f"cannot split the GPUs into {jobs} groups of {k} that use every required GPU")
        return best, True, f"exact: all {total_groups} groups of {k} considered, the worst job's group maximised"
    return _split_jobs_greedy(problem, k, jobs, required), False, (
        "greedy: the best group, then the best of the GPUs left, and so on"
    )


def _split_jobs_greedy(problem: Problem, k: int, jobs: int, required: set[int]) -> list[tuple[int, ...]]:
    """The best group, then the best of what is left, and so on."""
    chosen: list[tuple[int, ...]] = []
    left = set(range(problem.n))
    need = set(required)
    for _ in range(jobs):
        remaining_positions = sorted(left)
        local = problem.restricted(remaining_positions)
        local_position = {p: x for x, p in enumerate(remaining_positions)}
        must = {local_position[i] for i in sorted(need)[:k]}
        result = search_groups(local, k, must, 1, NODE_BUDGET)
        problem.ring_budget_hit = problem.ring_budget_hit or local.ring_budget_hit
        group = tuple(sorted(remaining_positions[i] for i in result.ranked[0][1]))
        chosen.append(group)
        left -= set(group)
        need -= set(group)
    return chosen


def _split_jobs_exact(problem: Problem, k: int, jobs: int, required: set[int]) -> list[tuple[int, ...]] | None:
    """The fairest split, evaluating rings lazily.

    Every group gets an optimistic key first (its ring bounded by each member's second-fastest link
    anywhere; locality and total exact). Groups are then evaluated exactly in optimistic order, in
    growing batches. Once a split is found whose worst group is at least as good as the optimistic
    key of every group not yet evaluated, no split using those could do better: it is optimal.
    Within the evaluated groups the worst group is maximised by ``_fairest_packing``."""
    n = problem.n
    ceilings = problem.ring_ceilings(k)
    optimistic: list[tuple[GroupKey, tuple[int, ...]]] = []
    for g in itertools.combinations(range(n), k):
        optimistic.append(((min(ceilings[i] for i in g),) + problem.locality_and_total(g), g))
    optimistic.sort(key=lambda item: (negated_key(item[0]), item[1]))
    evaluated: list[tuple[GroupKey, tuple[int, ...]]] = []
    done = 0
    batch = 64
    while True:
        upto = min(len(optimistic), done + batch)
        evaluated.extend((problem.key(g), g) for _, g in optimistic[done:upto])
        done = upto
        bar = optimistic[done][0] if done < len(optimistic) else None
        usable = sorted(
            ((key, g) for key, g in evaluated if bar is None or key >= bar),
            key=lambda item: (negated_key(item[0]), item[1]),
        )
        best = _fairest_packing(usable, n, k, jobs, required)
        if best is not None or bar is None:
            return best
        batch *= 2


def _fairest_packing(
    usable: list[tuple[GroupKey, tuple[int, ...]]], n: int, k: int, jobs: int, required: set[int]
) -> list[tuple[int, ...]] | None:
    """The packing of ``usable`` groups (best first) whose worst group is best: binary search on the
    lowest key allowed (a lower bar never makes a split impossible)."""
    distinct = sorted({key for key, _ in usable}, reverse=True)
    best: list[tuple[int, ...]] | None = None
    lo, hi = 0, len(distinct) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        packing = _pack([g for key, g in usable if key >= distinct[mid]], n, k, jobs, required)
        if packing is not None:
            best = packing
            hi = mid - 1
        else:
            lo = mid + 1
    return best


def _pack(groups: list[tuple[int, ...]], n: int, k: int, jobs: int, required: set[int]) -> list[tuple[int, ...]] | None:
    """``jobs`` disjoint groups from ``groups`` (best first) covering ``required``, or None.

    Branches on the lowest free GPU: it either starts one of the groups whose lowest member it is, or
    is left out (while there is slack and it is not required)."""
    by_lowest: dict[int, list[int]] = {}
    masks = []
    for idx, g in enumerate(groups):
        mask = 0
        for i in g:
            mask |= 1 << i
        masks.append(mask)
        by_lowest.setdefault(g[0], []).append(idx)
    required_mask = 0
    for i in required:
        required_mask |= 1 << i
    dead: set[tuple[int, int]] = set()

    def go(free: int, jobs_left: int, slack: int) -> list[int] | None:
        if jobs_left == 0:
            return [] if not (free & required_mask) else None
        if (free, jobs_left) in dead:
            return None
        low_bit = free & -free
        if not low_bit:
            return None
        v = low_bit.bit_length() - 1
        for idx in by_lowest.get(v, ()):
            if masks[idx] & free == masks[idx]:
                rest = go(free & ~masks[idx], jobs_left - 1, slack)
                if rest is not None:
                    return [idx] + rest
        if slack > 0 and not (low_bit & required_mask):
            rest = go(free & ~low_bit, jobs_left, slack - 1)
            if rest is not None:
                return rest
        dead.add((free, jobs_left))
        return None

    picked = go((1 << n) - 1, jobs, n - jobs * k)
    return None if picked is None else [groups[i] for i in picked]
