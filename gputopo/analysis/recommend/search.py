"""The ``keep`` best groups of ``k`` GPUs: twin classes, greedy seeds, branch and bound.

GPUs that are *twins* (identical bandwidth to every other GPU, same host and NUMA node) are
interchangeable, so the search only picks how many of each twin class to take; that collapses
NVSwitch machines and racks like the GB200 NVL72. The search is exact (pruning only drops groups
that cannot beat the ones already kept) for up to ``EXACT_LIMIT`` candidate GPUs; beyond, it runs
with a budget of ``NODE_BUDGET`` search nodes and says whether it finished.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

from gputopo.analysis.recommend.bounds import Pools
from gputopo.analysis.recommend.problem import Problem, negated_key
from gputopo.analysis.recommend.result import GroupKey
from gputopo.analysis.recommend.ring import INF, ring_reaches
from gputopo.analysis.recommend.rings import fastest_ring_groups

EXACT_LIMIT = 16  # candidate GPUs up to which the search has no node budget (always exact)
NODE_BUDGET = 20_000  # search nodes allowed beyond EXACT_LIMIT before settling for "best found"
WALK_BEFORE_RINGS = 1_000  # nodes beyond EXACT_LIMIT before the rings of the fastest links are listed
MAX_SEEDS = 16  # greedy starting groups that set the first bar for the branch and bound


def node_budget_for(n: int) -> int | None:
    """The node budget for a search over ``n`` candidate GPUs: none (exact) up to ``EXACT_LIMIT``."""
    return None if n <= EXACT_LIMIT else NODE_BUDGET


def twin_classes(problem: Problem, required: set[int]) -> list[list[int]]:
    """Positions grouped into classes of interchangeable GPUs.

    Two GPUs are twins when they have the same bandwidth to every other GPU and sit on the same host
    and NUMA node: swapping them changes no group's worth. (Twins also have the same bandwidth to
    each other as to any third twin, so the relation is an equivalence.) Required GPUs stay alone.
    """
    w = problem.weight
    buckets: dict[Any, list[int]] = {}
    for i in range(problem.n):
        if i in required:
            buckets[("required", i)] = [i]
            continue
        row = sorted(w[i][:i] + w[i][i + 1 :])
        buckets.setdefault((problem.host_id[i], problem.domain_id[i], tuple(row)), []).append(i)
    classes: list[list[int]] = []
    for members in buckets.values():
        reps: list[list[int]] = []
        for i in members:
            for cls in reps:
                r = cls[0]
                if _without(w[i], i, r) == _without(w[r], i, r):  # the same link to every third GPU
                    cls.append(i)
                    break
            else:
                reps.append([i])
        classes.extend(reps)
    classes.sort(key=lambda c: c[0])
    return classes


def _without(row: list[int], i: int, j: int) -> list[int]:
    """``row`` without positions ``i`` and ``j``."""
    low, high = (i, j) if i < j else (j, i)
    return row[:low] + row[low + 1 : high] + row[high + 1 :]


@dataclass
class SearchResult:
    ranked: list[tuple[GroupKey, tuple[int, ...]]]  # best first
    exhausted: bool  # False: the node budget stopped the search (best found, not proven)
    nodes: int
    classes: int
    node_budget: int | None = None
    listed: bool = False  # settled by listing the rings of the fastest links (``rings``)


class _Best:
    """The ``keep`` best groups offered so far, best first (ties: lowest positions first)."""

    def __init__(self, problem: Problem, keep: int):
        self.problem = problem
        self.keep = keep
        self.ranked: list[tuple[GroupKey, tuple[int, ...]]] = []
        self.offered: set[tuple[int, ...]] = set()

    def offer(self, members: tuple[int, ...]) -> None:
        if members in self.offered:
            return
        self.offered.add(members)
        problem = self.problem
        ranked = self.ranked
        if len(ranked) >= self.keep and not self._may_beat(members, ranked[-1][0]):
            return
        key = problem.key(members)
        if len(ranked) >= self.keep and key <= ranked[-1][0]:
            return
        ranked.append((key, members))
        ranked.sort(key=lambda item: (negated_key(item[0]), item[1]))
        del ranked[self.keep :]

    def _may_beat(self, members: tuple[int, ...], bar: GroupKey) -> bool:
        """False when ``members`` surely does not beat ``bar``: its best ring cannot reach the
        bar's bottleneck (or pass it, where the rest of its key is no better). Asks only whether a
        ring reaches that speed, which is cheaper than finding the best ring."""
        rest = self.problem.locality_and_total(members)
        need = bar[0] if rest > tuple(bar[1:]) else bar[0] + 1
        reaches, complete = ring_reaches(members, self.problem.weight, need)
        return reaches or not complete


def search_groups(problem: Problem, k: int, required: set[int], keep: int, node_budget: int | None) -> SearchResult:
    """The ``keep`` best groups of ``k`` positions containing ``required`` (branch and bound).

    Walks the twin classes (strongest GPUs first), choosing how many of each to take (most first).
    Greedy groups seed the list, so pruning bites from the start. A partial group is dropped when an
    optimistic key for anything it can still become is no better than the ``keep``-th best found:

    - bottleneck <= for each chosen GPU, its 2nd-fastest link to the chosen GPUs and those still
      available (a ring uses two links per GPU; for a pair, its fastest);
    - hosts / NUMA nodes >= those used, plus the fewest more that can hold the GPUs still to add;
    - total <= what is chosen, plus the fastest link any remaining GPU has, for every pair to come.

    A complete group is only ranked once its ring is known to reach the bar's bottleneck (or pass
    it, where the rest of its key is no better); asking that is cheaper than the best ring.

    Every bound is optimistic, so nothing pruned could have beaten the groups kept: with no node
    budget the result is exact.
    """
    w = problem.weight
    strength = problem.ring_ceilings(k)
    classes = twin_classes(problem, required)
    classes.sort(key=lambda c: (-strength[c[0]], c[0]))
    c_count = len(classes)
    class_of = {i: ci for ci, members in enumerate(classes) for i in members}
    pools = Pools(problem, classes, required)
    optimistic = pools.bound(problem, k)

    best = _Best(problem, keep)
    ranked = best.ranked
    offer = best.offer
    nodes = 0
    stopped = False
    limit = node_budget if node_budget is None else min(node_budget, WALK_BEFORE_RINGS)

    def walk(ci: int, chosen: list[int], remaining: int, total: int) -> None:
        nonlocal nodes, stopped
        if stopped:
            return
        nodes += 1
        if limit is not None and nodes > limit and ranked:
            stopped = True  # the budget only stops a search that has an answer to give
            return
        if remaining == 0:
            if pools.required[ci] == 0:
                offer(tuple(sorted(chosen)))
            return
        if ci >= c_count or pools.size[ci] < remaining or pools.required[ci] > remaining:
            return
        if len(ranked) >= keep:
            bar = ranked[-1][0]
            bound = optimistic(chosen, remaining, ci, total)
            if bound <= bar or pools.beyond_reach(problem, chosen, remaining, ci, total, bar, k, bound):
                return
        members = classes[ci]
        must = sum(1 for i in members if i in required)
        for count in range(min(len(members), remaining), must - 1, -1):
            taken = members[:count]
            added = 0
            for x, i in enumerate(taken):
                row = w[i]
                added += sum(row[j] for j in chosen) + sum(row[j] for j in taken[x + 1 :])
            walk(ci + 1, chosen + taken, remaining - count, total + added)

    for seed in _greedy_seeds(problem, k, required, classes, class_of) + _ring_seeds(problem, k, required, classes, class_of):
        offer(seed)
    walk(0, [], k, 0)
    if stopped:  # a long search: the rings of the fastest links may settle it at once
        listed = fastest_ring_groups(problem, k, required, keep, lambda group: _canonical(group, classes, class_of))
        if listed is not None:
            return SearchResult(ranked=listed, exhausted=True, nodes=nodes, classes=c_count, node_budget=node_budget, listed=True)
        if limit != node_budget:  # else the whole budget, from the start (the groups found so far kept as the bar)
            nodes, stopped, limit = 0, False, node_budget
            walk(0, [], k, 0)
    return SearchResult(ranked=ranked, exhausted=not stopped, nodes=nodes, classes=c_count, node_budget=node_budget)


def _greedy_seeds(
    problem: Problem, k: int, required: set[int], classes: list[list[int]], class_of: dict[int, int]
) -> list[tuple[int, ...]]:
    """Good groups found fast, to start the search with a high bar: from one GPU of each of the
    strongest twin classes (at most ``MAX_SEEDS``), add the GPU whose slowest link into the group is
    fastest (then same host, same NUMA node, most bandwidth) until there are k. Each is rewritten in
    the canonical form the search uses (the first members of each twin class)."""
    n = problem.n
    w = problem.weight
    host, domain = problem.host_id, problem.domain_id
    seeds: list[tuple[int, ...]] = []
    for members in classes[:MAX_SEEDS]:
        group = sorted(required | {members[0]})
        if len(group) > k:
            continue
        in_group = [False] * n
        min_link = [INF] * n
        link_sum = [0] * n
        hosts: set[int] = set()
        domains: set[int] = set()

        def add(g: int) -> None:
            in_group[g] = True
            hosts.add(host[g])
            domains.add(domain[g])
            row = w[g]
            min_link[:] = map(min, min_link, row)
            link_sum[:] = map(operator.add, link_sum, row)

        for g in group:
            add(g)
        while len(group) < k:
            # (each GPU's key as a tuple made in C: slowest link, same host, same NUMA node, sum, lowest number)
            keys = zip(min_link, map(hosts.__contains__, host), map(domains.__contains__, domain), link_sum, range(0, -n, -1))
            best = -max(itertools.compress(keys, map(operator.not_, in_group)))[-1]
            group.append(best)
            add(best)
        counts: dict[int, int] = {}
        for i in group:
            counts[class_of[i]] = counts.get(class_of[i], 0) + 1
        seeds.append(tuple(sorted(i for ci, c in counts.items() for i in classes[ci][:c])))
    return seeds


RING_SEED_STEPS = 20_000  # depth-first steps spent looking for fast rings to seed the search


def _ring_seeds(
    problem: Problem, k: int, required: set[int], classes: list[list[int]], class_of: dict[int, int]
) -> list[tuple[int, ...]]:
    """Groups whose ring is as fast as any ring found: for each link speed t, fastest first, look
    (depth first, ``RING_SEED_STEPS`` at most) for cycles of k GPUs over links at least t fast;
    the first speed with one gives up to ``MAX_SEEDS`` of them. Greedy growth misses such rings in
    a topology without symmetry (a random 72-GPU one: greedy 40 GB/s, a ring at 80 exists), and the
    search only prunes well once its bar is that high."""
    n, w = problem.n, problem.weight
    if k < 3 or required or n < k or n <= EXACT_LIMIT:  # small searches are exact and quick without
        return []
    steps = 0
    for t in problem.speeds:
        adjacent: dict[int, list[int]] = {}  # per GPU walked from, the GPUs its links at least t fast reach
        found: list[tuple[int, ...]] = []
        for start in range(n):
            path, seen = [start], {start}
            stack = [iter(u for u in _reached(adjacent, w, start, t) if u > start)]
            while stack and len(found) < MAX_SEEDS and steps < RING_SEED_STEPS:
                steps += 1
                u = next(stack[-1], None)
                if u is None:
                    stack.pop()
                    seen.discard(path.pop())
                    continue
                if u in seen:
                    continue
                if len(path) == k - 1:
                    if w[u][start] >= t:
                        found.append(tuple(sorted(path + [u])))
                    continue
                path.append(u)
                seen.add(u)
                stack.append(iter(x for x in _reached(adjacent, w, u, t) if x > start))
            if len(found) >= MAX_SEEDS or steps >= RING_SEED_STEPS:
                break
        if found:
            return [_canonical(group, classes, class_of) for group in dict.fromkeys(found)]
        if steps >= RING_SEED_STEPS:
            return []
    return []


def _reached(adjacent: dict[int, list[int]], w: list[list[int]], i: int, t: int) -> list[int]:
    """The positions GPU ``i``'s links at least ``t`` fast reach, in order: made when first asked
    (a walk visits few GPUs of a large domain), kept in ``adjacent``."""
    found = adjacent.get(i)
    if found is None:
        fast = list(map(t.__le__, w[i]))
        fast[i] = False
        found = adjacent[i] = list(itertools.compress(range(len(fast)), fast))
    return found


def _canonical(group: tuple[int, ...], classes: list[list[int]], class_of: dict[int, int]) -> tuple[int, ...]:
    """The same group as the search writes it: the first members of each twin class."""
    counts: dict[int, int] = {}
    for i in group:
        counts[class_of[i]] = counts.get(class_of[i], 0) + 1
    return tuple(sorted(i for ci, c in counts.items() for i in classes[ci][:c]))
