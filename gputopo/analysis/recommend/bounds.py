"""The search's bounds: what a partial group can still become, per pool of GPUs left.

``Pools`` holds, per twin class ``ci``, facts about the GPUs still available from ``classes[ci:]``
(how many, per host and NUMA node, every GPU's best two links into them, the fastest link), and from
them two bounds the branch and bound prunes with:

- ``bound``: an optimistic key (ring bottleneck, hosts, NUMA nodes, total) cheap enough for every node;
- ``beyond_reach``: whether no group grown from a node can tie or beat the bar, looked at more
  closely. A group whose ring is at least the bar's bottleneck gives each member two links that
  fast to other members (one for a pair), so GPUs without them are peeled off (the 2-core of the
  fast links). Where the ring can at best tie the bar's, the hosts and NUMA nodes decide next: each
  choice of the nodes a group could use (the used ones plus 0, 1, ... more) is tried, and where its
  locality ties the bar's, the total bandwidth inside the group (the densest-subgraph tie-break) is
  bounded within that choice.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

from gputopo.analysis.recommend.problem import Problem
from gputopo.analysis.recommend.result import GroupKey
from gputopo.analysis.recommend.ring import INF

# Choices of NUMA nodes ``beyond_reach`` tries at one node before it gives up (and prunes nothing).
MAX_PLACE_CHOICES = 32
# Ways to finish a group up to which ``beyond_reach`` finds the best total among them, not a bound.
EXACT_COMPLETIONS = 300
# Pools above this many GPUs are not peeled (a 576-GPU domain: its twin classes settle it anyway).
MAX_PEELED_POOL = 160


class Pools:
    """Facts about the GPUs still available from twin class ``ci`` on (``classes[ci:]``), per ``ci``:
    how many, how many per host / NUMA node, every GPU's best two links into them, the fastest link
    any of them has, and how many are required."""

    def __init__(self, problem: Problem, classes: list[list[int]], required: set[int]):
        n, w = problem.n, problem.weight
        top1 = [max(row[:i] + row[i + 1 :], default=0) for i, row in enumerate(w)]
        count = len(classes)
        self.size = [0] * (count + 1)
        self.hosts: list[dict[int, int]] = [{} for _ in range(count + 1)]
        self.domains: list[dict[int, int]] = [{} for _ in range(count + 1)]
        # Every GPU's best two links into the pool, as two columns per pool (first and second).
        self.top2: list[tuple[list[int], list[int]]] = [([-1] * n, [-1] * n)] * (count + 1)
        self.best = [0] * (count + 1)
        self.required = [0] * (count + 1)
        for ci in range(count - 1, -1, -1):
            members = classes[ci]
            self.size[ci] = self.size[ci + 1] + len(members)
            hosts = dict(self.hosts[ci + 1])
            domains = dict(self.domains[ci + 1])
            for i in members:
                hosts[problem.host_id[i]] = hosts.get(problem.host_id[i], 0) + 1
                domains[problem.domain_id[i]] = domains.get(problem.domain_id[i], 0) + 1
            self.hosts[ci] = hosts
            self.domains[ci] = domains
            self.top2[ci] = _with_class(self.top2[ci + 1], members, w)
            self.best[ci] = max([self.best[ci + 1]] + [top1[i] for i in members])
            self.required[ci] = self.required[ci + 1] + sum(1 for i in members if i in required)
        # For beyond_reach (built when first asked): per pool and choice of NUMA nodes, its GPUs'
        # links to each other as prefix sums; per bar bottleneck, each GPU's links that fast.
        self.classes = classes
        self.pool_members: dict[int, list[int]] = {}
        self.pool_prefixes: dict[Any, dict[int, list[int]]] = {}
        self._fast: dict[int, list[set[int]]] = {}
        self.host_of_domain = dict(zip(problem.domain_id, problem.host_id))

    def members_from(self, ci: int) -> list[int]:
        found = self.pool_members.get(ci)
        if found is None:
            found = self.pool_members[ci] = [i for members in self.classes[ci:] for i in members]
        return found


    def beyond_reach(self, problem: Problem, chosen: list[int], remaining: int, ci: int, total: int,
                     bar: GroupKey, k: int, bound: GroupKey) -> bool:
        """Whether no group grown from ``chosen`` by ``remaining`` GPUs of pool ``ci`` can tie or beat
        ``bar`` (``bound``: the node's optimistic key, no worse than the bar). See the module text;
        False where it cannot tell (too many choices of NUMA nodes, a pool too large to peel)."""
        pool = self.members_from(ci)
        if len(pool) > MAX_PEELED_POOL:
            return False
        links_needed = 2 if k >= 3 else (1 if k == 2 else 0)
        fast = self._fast_links(problem, bar[0])
        problem.budget.spend(2 * (len(pool) + len(chosen)))  # a peeling looks at each GPU's fast links
        if bound[0] > bar[0]:  # a faster ring would beat the bar whatever its locality
            kept = core(chosen, pool, fast, links_needed)
            return kept is None or len(kept) < remaining
        used_domains = {problem.domain_id[i] for i in chosen}
        used_hosts = {problem.host_id[i] for i in chosen}
        spare = [d for d in self.domains[ci] if d not in used_domains]
        tried = 0
        for more in range(len(spare) + 1):
            if (-len(used_hosts), -(len(used_domains) + more)) < tuple(bar[1:3]):
                return True  # more NUMA nodes (and no fewer hosts) only rank lower
            for extra in itertools.combinations(spare, more):
                tried += 1
                if tried > MAX_PLACE_CHOICES:
                    return False
                domains = used_domains.union(extra)
                locality = (-len(used_hosts | {self.host_of_domain[d] for d in extra}), -len(domains))
                if locality < tuple(bar[1:3]):
                    continue
                candidates = [u for u in pool if problem.domain_id[u] in domains]
                problem.budget.spend(3 * len(pool))
                kept = core(chosen, candidates, fast, links_needed) if len(candidates) >= remaining else None
                if kept is None or len(kept) < remaining:
                    continue
                if locality > tuple(bar[1:3]):
                    return False  # such a group would rank above the bar
                key = (ci, frozenset(domains))
                if self._total_within(problem, chosen, remaining, key, candidates, kept, total) > bar[3]:
                    return False
        return True

    def _total_within(self, problem: Problem, chosen: list[int], remaining: int, key: Any, candidates: list[int],
                      kept: list[int], total: int) -> int:
        """At most the total pair bandwidth of a group grown from ``chosen`` (``total`` so far) by
        ``remaining`` of ``kept`` (of ``candidates``): the added total is the sum over added GPUs u of
        w(u, chosen) plus half of u's links to the other added GPUs, so at most the ``remaining``
        largest values of w(u, chosen) + (u's ``remaining - 1`` fastest links to candidates) / 2.
        Counted twice, to stay in integers."""
        w = problem.weight
        towards = {u: sum(w[u][v] for v in chosen) for u in kept}  # each GPU's links to the chosen ones
        ways = math.comb(len(kept), remaining)
        problem.budget.spend(len(kept) * (len(chosen) + 1) + (ways * remaining * remaining if ways <= EXACT_COMPLETIONS else 0))
        if ways <= EXACT_COMPLETIONS:  # few ways to finish: the best of them
            return total + max(sum(towards[u] for u in added) + sum(w[a][b] for a, b in itertools.combinations(added, 2))
                               for added in itertools.combinations(kept, remaining))
        prefix = self._prefix(problem, key, candidates)
        values = []
        for u in kept:
            sums = prefix[u]
            values.append(2 * towards[u] + sums[min(remaining - 1, len(sums) - 1)])
        values.sort(reverse=True)
        return (2 * total + sum(values[:remaining])) // 2

    def _fast_links(self, problem: Problem, need: int) -> list[set[int]]:
        """Per GPU, the GPUs its link to is at least ``need`` fast (kept per ``need``: the bar's
        bottleneck, which changes seldom)."""
        found = self._fast.get(need)
        if found is None:
            w, n = problem.weight, problem.n
            problem.budget.spend(n * n // 2)
            found = self._fast[need] = [{j for j in range(n) if j != i and w[i][j] >= need} for i in range(n)]
        return found

    def _prefix(self, problem: Problem, key: Any, candidates: list[int]) -> dict[int, list[int]]:
        """Per GPU u of ``candidates``: prefix sums of u's links to the others, fastest first (once
        per pool and choice of NUMA nodes)."""
        found = self.pool_prefixes.get(key)
        if found is None:
            w = problem.weight
            problem.budget.spend(len(candidates) * len(candidates))
            found = {}
            for u in candidates:
                row = w[u]
                found[u] = [0] + list(itertools.accumulate(sorted((row[v] for v in candidates if v != u), reverse=True)))
            self.pool_prefixes[key] = found
        return found

    def bound(self, problem: Problem, k: int) -> Callable[[list[int], int, int, int], GroupKey]:
        """``optimistic(chosen, remaining, ci, total)``: a key no group grown from ``chosen`` with
        ``remaining`` GPUs from pool ``ci`` can beat. (A closure over locals: it runs at every node.)"""
        w, host_id, domain_id = problem.weight, problem.host_id, problem.domain_id
        top2, best, pool_hosts, pool_domains = self.top2, self.best, self.hosts, self.domains

        def optimistic(chosen: list[int], remaining: int, ci: int, total: int) -> GroupKey:
            if k == 1:
                bottleneck = INF
            elif not chosen:
                bottleneck = best[ci]
            else:
                bottleneck = INF
                firsts, seconds = top2[ci]
                for v in chosen:
                    a, b = firsts[v], seconds[v]
                    row = w[v]
                    for u in chosen:
                        if u != v:
                            x = row[u]
                            if x > a:
                                a, b = x, a
                            elif x > b:
                                b = x
                    bound = b if k >= 3 else a
                    if bound < bottleneck:
                        bottleneck = bound
            used_hosts = {host_id[i] for i in chosen}
            used_domains = {domain_id[i] for i in chosen}
            hosts = len(used_hosts) + places_needed(remaining, pool_hosts[ci], used_hosts)
            domains = len(used_domains) + places_needed(remaining, pool_domains[ci], used_domains)
            total_bound = total + (remaining * len(chosen) + remaining * (remaining - 1) // 2) * best[ci]
            return (bottleneck, -hosts, -domains, total_bound)

        return optimistic



def _with_class(tops: tuple[list[int], list[int]], members: list[int], w: list[list[int]]) -> tuple[list[int], list[int]]:
    """Every GPU's best two links into a pool (``tops``: first and second) once the twin class
    ``members`` joins it. Twins have the same link to every other GPU, so a GPU outside the class
    meets one figure ``len(members)`` times: merged in whole columns; the members themselves (their
    links to each other) one by one."""
    firsts, seconds = tops
    column = w[members[0]]  # every GPU's link to the class (the matrix is symmetric: a row)
    new_firsts = list(map(max, firsts, column))
    if len(members) > 1:  # two of the figure at least: it is the second too, where it is not below
        new_seconds = list(map(max, seconds, column))
    else:
        new_seconds = list(map(max, seconds, map(min, firsts, column)))
    for v in members:
        a, b = firsts[v], seconds[v]
        for j in members:
            if j != v:
                x = w[v][j]
                if x > a:
                    a, b = x, a
                elif x > b:
                    b = x
        new_firsts[v], new_seconds[v] = a, b
    return new_firsts, new_seconds


def core(chosen: list[int], candidates: list[int], fast: list[set[int]], links_needed: int) -> list[int] | None:
    """The candidates that can be in a group with ``chosen`` where every member has ``links_needed``
    fast links (``fast``) to other members: candidates with fewer among the chosen and the other
    candidates left are peeled off until none is; None where a chosen GPU has fewer."""
    if not links_needed:
        return candidates
    alive = set(candidates)
    members = alive.union(chosen)
    peel = [u for u in candidates if len(fast[u] & members) < links_needed]
    while peel:
        u = peel.pop()
        if u not in alive:
            continue
        alive.discard(u)
        members.discard(u)
        peel.extend(x for x in fast[u] & alive if len(fast[x] & members) < links_needed)
    if any(len(fast[v] & members) < links_needed for v in chosen):
        return None
    return [u for u in candidates if u in alive]


def places_needed(remaining: int, offered: dict[int, int], used: set[int]) -> int:
    """How many more hosts (or NUMA nodes) at least ``remaining`` GPUs need: what the used ones still
    offer is filled first, then the places offering the most GPUs."""
    remaining -= sum(offered.get(place, 0) for place in used)
    if remaining <= 0:
        return 0
    extra = 0
    for size in sorted((n for place, n in offered.items() if place not in used), reverse=True):
        remaining -= size
        extra += 1
        if remaining <= 0:
            break
    return extra
