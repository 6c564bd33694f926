"""The ``keep`` best groups of ``k`` GPUs: twin classes, greedy seeds, branch and bound.

GPUs that are *twins* (identical bandwidth to every other GPU, same host and NUMA node) are
interchangeable, so the search only picks how many of each twin class to take; that collapses
NVSwitch machines and racks like the GB200 NVL72. The search is exact (pruning only drops groups
that cannot beat the ones already kept) unless the recommendation's work budget (``budget``, shared
with the ring searches) runs out first; then it keeps the best found and says it did not finish.
Beyond ``EXACT_LIMIT`` candidate GPUs it lists the rings of the fastest links after a short walk.
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

EXACT_LIMIT = 16  # candidate GPUs up to which the walk goes on without first listing the rings
WALK_BEFORE_RINGS = 1_000  # nodes beyond EXACT_LIMIT before the rings of the fastest links are listed
MAX_SEEDS = 16  # greedy starting groups that set the first bar for the branch and bound
# Where ties of the healthy ranking are ordered by today (``today.tiebreak``), the search keeps this many
# groups more than asked, so that the groups tied with those asked for are found to order among them.
TIE_EXTRA = 16
# Beyond this many candidate GPUs, GPUs whose pairs differ today stay in their twin classes (the tie
# among them is then by the lowest GPU numbers): splitting every class would undo the symmetry.
TIE_SPLIT_LIMIT = 64


def twin_classes(problem: Problem, required: set[int]) -> list[list[int]]:
    """Positions grouped into classes of interchangeable GPUs.

    Two GPUs are twins when they have the same bandwidth to every other GPU and sit on the same host
    and NUMA node: swapping them changes no group's worth. (Twins also have the same bandwidth to
    each other as to any third twin, so the relation is an equivalence.) Required GPUs stay alone, and
    so do GPUs a tie may be decided on by today (``today.tiebreak``: memory held, a pair that works
    otherwise today), up to ``TIE_SPLIT_LIMIT`` GPUs.
    """
    from gputopo.analysis.recommend.today import today_gpus

    w = problem.weight
    buckets: dict[Any, list[int]] = {}
    # GPUs a tie may be decided on by today (memory held, a pair that differs today) are no one's twins.
    apart = set(problem.held) | (today_gpus(problem) if problem.n <= TIE_SPLIT_LIMIT else set())
    for i in range(problem.n):
        if i in required or problem.index[i] in apart:
            buckets[("alone", i)] = [i]
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
    exhausted: bool  # False: the work budget stopped the search (best found, not proven)
    nodes: int
    classes: int
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
        problem.budget.spend(len(members))
        if len(ranked) >= self.keep and not self._may_beat(members, ranked[-1][0]):
            return
        key = problem.key(members)
        if len(ranked) >= self.keep and key <= ranked[-1][0]:
            return
        problem.budget.spend(len(ranked))
        ranked.append((key, members))
        ranked.sort(key=lambda item: (negated_key(item[0]), item[1]))
        del ranked[self.keep :]

    def _may_beat(self, members: tuple[int, ...], bar: GroupKey) -> bool:
        """False when ``members`` surely does not beat ``bar``: its best ring cannot reach the
        bar's bottleneck (or pass it, where the rest of its key is no better). Asks only whether a
        ring reaches that speed, which is cheaper than finding the best ring."""
        rest = self.problem.locality_and_total(members)
        need = bar[0] if rest > tuple(bar[1:]) else bar[0] + 1
        reaches, complete = ring_reaches(members, self.problem.weight, need, self.problem.budget)
        return reaches or not complete


def search_groups(problem: Problem, k: int, required: set[int], keep: int) -> SearchResult:
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

    Every bound is optimistic, so nothing pruned could have beaten the groups kept: where the
    problem's work budget does not run out first, the result is exact.

    Groups whose keys tie are ordered by the lowest positions, or, where today may tell them apart
    (``today.tiebreaks``), first by ``today.tiebreak``: the search then keeps ``TIE_EXTRA`` groups more,
    so that every group better than the last one kept is found, ordered, and cut to ``keep``.
    """
    from gputopo.analysis.recommend.today import tiebreak, tiebreaks

    if tiebreaks(problem):  # ties ordered by today: find the groups tied with those asked for, then order
        found = _search(problem, k, required, keep + TIE_EXTRA)
        found.ranked = sorted(found.ranked, key=lambda item: (negated_key(item[0]), tiebreak(problem, item[1]), item[1]))[:keep]
        return found
    return _search(problem, k, required, keep)


def _search(problem: Problem, k: int, required: set[int], keep: int) -> SearchResult:
    classes = twin_classes(problem, required)
    strength = problem.ring_ceilings(k)
    classes.sort(key=lambda c: (-strength[c[0]], c[0]))
    class_of = {i: ci for ci, members in enumerate(classes) for i in members}
    best = _Best(problem, keep)
    walk = _Walk(problem, k, required, keep, classes, best)
    for seed in _greedy_seeds(problem, k, required, classes, class_of) + _ring_seeds(problem, k, required, classes, class_of):
        best.offer(seed)
    first_limit = None if problem.n <= EXACT_LIMIT else WALK_BEFORE_RINGS
    walk.run(first_limit)
    if walk.stopped and first_limit is not None and not problem.budget.exhausted:
        # a long search: the rings of the fastest links may settle it at once
        listed = fastest_ring_groups(problem, k, required, keep, lambda group: _canonical(group, classes, class_of))
        if listed is not None:
            return SearchResult(ranked=listed, exhausted=True, nodes=walk.nodes, classes=len(classes), listed=True)
        walk.run(None)  # the whole budget left, from the start (the groups found so far kept as the bar)
    if walk.stopped:
        problem.budget.stop()
    return SearchResult(ranked=best.ranked, exhausted=not walk.stopped, nodes=walk.nodes, classes=len(classes))


class _Walk:
    """The branch and bound over the twin classes, on its own stack (as deep as there are classes,
    hundreds on a large machine without symmetry). ``run(limit)`` walks from the start until it is
    done (``stopped`` False), or, once some group is ranked, until ``limit`` nodes or the problem's
    work budget are spent (``stopped`` True)."""

    def __init__(self, problem: Problem, k: int, required: set[int], keep: int, classes: list[list[int]], best: _Best):
        self.problem, self.k, self.required, self.keep = problem, k, required, keep
        self.classes = classes
        self.best = best
        self.pools = Pools(problem, classes, required)
        self.optimistic = self.pools.bound(problem, k)
        self.nodes = 0
        self.stopped = False

    def run(self, limit: int | None) -> None:
        self.nodes, self.stopped = 0, False
        frame = self._visit(0, [], self.k, 0, limit)
        stack = [frame] if frame is not None else []
        while stack and not self.stopped:
            frame = stack[-1]
            ci, chosen, remaining, total, added, count, low = frame
            if count < low:
                stack.pop()
                continue
            frame[5] = count - 1
            taken = self.classes[ci][:count]
            child = self._visit(ci + 1, chosen + taken, remaining - count, total + added[count], limit)
            if child is not None:
                stack.append(child)

    def _visit(self, ci: int, chosen: list[int], remaining: int, total: int, limit: int | None) -> list | None:
        """One node: the group ``chosen`` with ``remaining`` GPUs to take from pool ``ci``. Offers a
        complete group; returns the frame that walks its children (how many of class ``ci`` to
        take, most first), or None where there are none or the bounds prune them."""
        problem, pools, budget = self.problem, self.pools, self.problem.budget
        ranked = self.best.ranked
        self.nodes += 1
        budget.spend(1)
        if ranked and ((limit is not None and self.nodes > limit) or budget.exhausted):
            self.stopped = True  # a budget only stops a search that has an answer to give
            return None
        if remaining == 0:
            if pools.required[ci] == 0:
                self.best.offer(tuple(sorted(chosen)))
            return None
        if ci >= len(self.classes) or pools.size[ci] < remaining or pools.required[ci] > remaining:
            return None
        if len(ranked) >= self.keep:
            bar = ranked[-1][0]
            budget.spend(len(chosen) * len(chosen))  # the bound looks at every pair chosen
            bound = self.optimistic(chosen, remaining, ci, total)
            if bound <= bar or pools.beyond_reach(problem, chosen, remaining, ci, total, bar, self.k, bound):
                return None
        members = self.classes[ci]
        must = sum(1 for i in members if i in self.required)
        top = min(len(members), remaining)
        # added[c]: the pair bandwidth the first c members of the class add to the chosen ones
        w = problem.weight
        added = [0] * (top + 1)
        for x in range(top):
            row = w[members[x]]
            added[x + 1] = added[x] + sum(row[j] for j in chosen) + sum(row[members[y]] for y in range(x))
        budget.spend(top * (len(chosen) + top))
        return [ci, chosen, remaining, total, added, top, must]


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
        problem.budget.spend(k * n // 8)  # k passes over n GPUs, each in C
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
    search only prunes well once its bar is that high. Each step counts in the problem's budget,
    and a GPU's links once when first looked at."""
    n, w = problem.n, problem.weight
    if k < 3 or required or n < k or n <= EXACT_LIMIT:  # small searches are exact and quick without
        return []
    steps = counted = 0
    budget = problem.budget
    allowed = min(RING_SEED_STEPS, budget.left)
    for t in problem.speeds:
        adjacent: dict[int, list[int]] = {}  # per GPU walked from, the GPUs its links at least t fast reach
        found: list[tuple[int, ...]] = []
        for start in range(n):
            path, seen = [start], {start}
            stack = [iter(u for u in _reached(adjacent, w, start, t) if u > start)]
            while stack and len(found) < MAX_SEEDS and steps < allowed:
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
            if len(found) >= MAX_SEEDS or steps >= allowed:
                break
        budget.spend(steps - counted + len(adjacent) * n // 8)
        counted = steps
        if found:
            return [_canonical(group, classes, class_of) for group in dict.fromkeys(found)]
        if steps >= allowed:
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
