"""``--jobs N``: N disjoint groups of k GPUs, the worst group as good as possible.

Exact where every group can be listed (at most ``JOBS_EXACT_GROUP_LIMIT``): a good split found fast
sets a floor, the groups that may reach it are evaluated lazily in optimistic order and packed by an
exact cover search. Beyond, greedy: the best group, then the best of the GPUs left, and so on.
"""

from __future__ import annotations

import itertools
import math

from gputopo.analysis.recommend.problem import Problem, negated_key
from gputopo.analysis.recommend.result import GroupKey
from gputopo.analysis.recommend.ring import RingOracle
from gputopo.analysis.recommend.search import search_groups
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
        result = search_groups(local, k, must, 1)
        problem.ring_budget_hit = problem.ring_budget_hit or local.ring_budget_hit
        group = tuple(sorted(remaining_positions[i] for i in result.ranked[0][1]))
        chosen.append(group)
        left -= set(group)
        need -= set(group)
    return chosen


def _split_jobs_exact(problem: Problem, k: int, jobs: int, required: set[int]) -> list[tuple[int, ...]] | None:
    """The fairest split, evaluating rings lazily.

    A good split found fast (``_good_split``) sets a floor: the fairest split's worst group is at
    least as good as its worst, so only groups that may reach that floor are listed
    (``_groups_at_least``), each with an optimistic key (its ring bounded by the group's own
    ceiling; locality and total exact). Those are then evaluated exactly in optimistic order, in
    growing batches. Once a split is found whose worst group is at least as good as the optimistic
    key of every group not yet evaluated, no split using those could do better: it is optimal.
    Within the evaluated groups the worst group is maximised by ``_fairest_worst``; the split
    returned is the first packing of every group at least as good as its worst one, best first."""
    n = problem.n
    rings = RingOracle(problem.weight, problem.budget)
    good = _good_split(problem, rings, k, jobs, required)
    floor = min(problem.key(g) for g in good) if good else None
    optimistic = _groups_at_least(problem, rings, k, floor, (jobs - 1) * k)
    optimistic.sort(key=lambda item: (negated_key(item[0]), item[1]))
    evaluated: list[tuple[GroupKey, tuple[int, ...]]] = []
    done = 0
    batch = 64
    worst: GroupKey | None = None
    while True:
        upto = min(len(optimistic), done + batch)
        evaluated.extend(_exact(problem, rings, upper, g) for upper, g in optimistic[done:upto])
        done = upto
        bar = optimistic[done][0] if done < len(optimistic) else None
        usable = [(key, g) for key, g in evaluated if bar is None or key >= bar]
        if bar is None or _pack(_best_first(usable), n, k, jobs, required) is not None:
            worst = _fairest_worst(usable, n, k, jobs, required)
            break
        batch *= 2
    if worst is None:
        return None
    while done < len(optimistic) and optimistic[done][0] >= worst:  # every group that ties the worst
        evaluated.append(_exact(problem, rings, *optimistic[done]))
        done += 1
    return _pack(_best_first((key, g) for key, g in evaluated if key >= worst), n, k, jobs, required)


def _exact(problem: Problem, rings: RingOracle, upper: GroupKey, members: tuple[int, ...]) -> tuple[GroupKey, tuple[int, ...]]:
    """The group's key, from its optimistic key (whose locality and total are exact) and its ring's
    bottleneck (the problem's own, with the ring order, where the ring search hit its budget)."""
    bottleneck, complete = rings.bottleneck(members)
    if not complete:
        return problem.key(members), members
    return (bottleneck,) + tuple(upper[1:]), members


def _best_first(groups) -> list[tuple[int, ...]]:
    """The groups of ``(key, members)`` pairs, best key first (ties: lowest positions first)."""
    return [g for _, g in sorted(groups, key=lambda item: (negated_key(item[0]), item[1]))]


def _fairest_worst(
    usable: list[tuple[GroupKey, tuple[int, ...]]], n: int, k: int, jobs: int, required: set[int]
) -> GroupKey | None:
    """The best worst-group key of a packing of ``usable`` groups, or None: binary search on the
    lowest key allowed (a lower bar never makes a split impossible)."""
    ordered = sorted(usable, key=lambda item: (negated_key(item[0]), item[1]))
    distinct = sorted({key for key, _ in ordered}, reverse=True)
    best: GroupKey | None = None
    lo, hi = 0, len(distinct) - 1
    while lo <= hi:
        mid = (lo + hi) // 2
        if _pack([g for key, g in ordered if key >= distinct[mid]], n, k, jobs, required) is not None:
            best = distinct[mid]
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

    def enter(free: int, jobs_left: int, slack: int, via: int | None) -> bool | list:
        """True: packed; False: no packing from here; else the frame that tries the groups of the
        lowest free GPU, then leaving it out (``via``: the group that led here, None: a GPU left out)."""
        if jobs_left == 0:
            return not (free & required_mask)
        if (free, jobs_left) in dead:
            return False
        low_bit = free & -free
        if not low_bit:
            return False
        return [free, jobs_left, slack, by_lowest.get(low_bit.bit_length() - 1, ()), 0, low_bit, via, False]

    first = enter((1 << n) - 1, jobs, n - jobs * k, None)
    if first is True or first is False:
        return [] if first is True else None
    stack = [first]  # its own stack: as deep as there are jobs and GPUs left out, hundreds for --gpus 1
    while stack:
        frame = stack[-1]
        free, jobs_left, slack, options, at, low_bit, _, skipped = frame
        if at < len(options):
            frame[4] = at + 1
            idx = options[at]
            if masks[idx] & free != masks[idx]:
                continue
            child = enter(free & ~masks[idx], jobs_left - 1, slack, idx)
        elif not skipped and slack > 0 and not (low_bit & required_mask):
            frame[7] = True
            idx = None
            child = enter(free & ~low_bit, jobs_left, slack - 1, None)
        else:
            dead.add((free, jobs_left))
            stack.pop()
            continue
        if child is True:
            picked = [f[6] for f in stack[1:] if f[6] is not None] + ([idx] if idx is not None else [])
            return [groups[i] for i in picked]
        if child is not False:
            stack.append(child)
    return None


def _good_split(problem: Problem, rings: RingOracle, k: int, jobs: int, required: set[int]) -> list[tuple[int, ...]] | None:
    """A split found fast, to set the floor: each job grown greedily from the GPUs left (from the
    required ones still unused, else from the start that grows the best group), then GPUs swapped
    between the worst group and the others (or the unused GPUs) while that makes the worst better.
    None where it cannot cover the required GPUs (the exact search then lists every group)."""
    left = set(range(problem.n))
    need = set(required)
    groups: list[tuple[int, ...]] = []
    for _ in range(jobs):
        must = sorted(need)[:k]
        starts = [must] if must else [[i] for i in sorted(left)]
        grown = [_grow(problem, k, left, start) for start in starts]
        group = max(grown, key=lambda g: (problem.key(g), [-i for i in g]))
        groups.append(group)
        left -= set(group)
        need -= set(group)
    if need:
        return None
    _improve_worst(problem, rings, groups, left, required)
    return groups


def _grow(problem: Problem, k: int, left: set[int], start: list[int]) -> tuple[int, ...]:
    """``start`` plus the GPUs of ``left`` whose slowest link into the group is fastest (then the
    most bandwidth into it), one at a time, up to k."""
    w = problem.weight
    group = list(start)
    candidates = set(left) - set(group)
    while len(group) < k:
        best = max(candidates, key=lambda c: (min(w[c][g] for g in group), sum(w[c][g] for g in group), -c))
        group.append(best)
        candidates.discard(best)
    return tuple(sorted(group))


def _improve_worst(problem: Problem, rings: RingOracle, groups: list[tuple[int, ...]], unused: set[int], required: set[int]) -> None:
    """Swap one GPU of the worst group with one of another group or an unused one (never leaving a
    required GPU unused) while both groups then beat the worst; first improvement, in place."""
    keys = [problem.key(g) for g in groups]
    for _ in range(4 * len(groups) * len(groups[0])):
        worst = min(range(len(groups)), key=lambda j: keys[j])
        bar = keys[worst]
        if not _swap_once(problem, rings, groups, keys, worst, bar, unused, required):
            return


def _swap_once(
    problem: Problem, rings: RingOracle, groups: list[tuple[int, ...]], keys: list[GroupKey], worst: int, bar: GroupKey,
    unused: set[int], required: set[int],
) -> bool:
    """One improving swap out of the worst group, if there is one (see ``_improve_worst``)."""
    mine = groups[worst]
    partners: list[int | None] = [j for j in range(len(groups)) if j != worst] + [None]
    for j in partners:
        theirs = groups[j] if j is not None else tuple(sorted(unused))
        for a in mine:
            if j is None and a in required:
                continue
            for b in theirs:
                new_mine = tuple(sorted([x for x in mine if x != a] + [b]))
                if not _beats(problem, rings, new_mine, bar):
                    continue
                new_theirs = None
                if j is not None:
                    new_theirs = tuple(sorted([x for x in theirs if x != b] + [a]))
                    if not _beats(problem, rings, new_theirs, bar):
                        continue
                groups[worst] = new_mine
                keys[worst] = problem.key(new_mine)
                if j is None:
                    unused.discard(b)
                    unused.add(a)
                else:
                    groups[j] = new_theirs
                    keys[j] = problem.key(new_theirs)
                return True
    return False


def _beats(problem: Problem, rings: RingOracle, members: tuple[int, ...], bar: GroupKey) -> bool:
    """Whether the group's key is better than ``bar``, asking only whether its ring reaches the speed
    needed (cheaper than the best ring); a ring search the budget stopped counts as no."""
    rest = problem.locality_and_total(members)
    need = bar[0] if rest > tuple(bar[1:]) else bar[0] + 1
    reaches, complete = rings.reaches(members, need)
    return reaches and complete


def _groups_at_least(
    problem: Problem, rings: RingOracle, k: int, floor: GroupKey | None, others: int = 0
) -> list[tuple[GroupKey, tuple[int, ...]]]:
    """Every group of k positions whose key may reach ``floor`` (every group where it is None), each
    with an optimistic key: its ring bounded by ``ring_ceiling``, locality and total exact.

    Lists them depth-first in position order, cutting a branch when a chosen GPU has fewer than two
    links (one for a pair) at least ``floor``'s bottleneck to the GPUs chosen or still to come, or,
    where no ring can pass that bottleneck, when the hosts and NUMA nodes used and the most total
    bandwidth it can still reach cannot match the floor. A group is left out, too, when the GPUs
    outside it cannot hold ``others`` more GPUs with two such links each among themselves (the
    other jobs' groups): no split with a worst group reaching the floor holds it.

    Long because it is the search's inner kernel: the walk and its two prunings close over the same
    bit masks; split apart they would pass a dozen values on every call of the hot path."""
    n, w = problem.n, problem.weight
    out: list[tuple[GroupKey, tuple[int, ...]]] = []
    if floor is None:
        for g in itertools.combinations(range(n), k):
            out.append(((rings.ceiling(g),) + problem.locality_and_total(g), g))
        return out
    links_needed = 0 if k == 1 else 1 if k == 2 else 2
    at_floor = [_mask(j for j in range(n) if j != i and w[i][j] >= floor[0]) for i in range(n)]
    above = [_mask(j for j in range(n) if j != i and w[i][j] > floor[0]) for i in range(n)]
    eligible = _core(at_floor, links_needed, (1 << n) - 1)
    later = [eligible & ~((1 << i) - 1) for i in range(n + 1)]
    rest_floor = tuple(floor[1:])
    top_weight = problem.max_weight
    host_id, domain_id = problem.host_id, problem.domain_id
    chosen: list[int] = []

    def rest_hopeless(start: int, total: int) -> bool:
        """Whether the hosts and NUMA nodes used, and the most total bandwidth the group can still
        reach, fall short of the floor's (only asked where no ring can pass its bottleneck).
        Optimistic: the key's locality is never below the NUMA node count."""
        r = k - len(chosen)
        if r:
            pool = sorted((sum(w[u][c] for c in chosen) for u in range(start, n) if later[start] >> u & 1), reverse=True)
            total += sum(pool[:r]) + r * (r - 1) // 2 * top_weight
        hosts = len({host_id[i] for i in chosen})
        domains = len({domain_id[i] for i in chosen})
        return (-hosts, -domains, total) < rest_floor

    def walk(start: int, mask: int, total: int) -> None:
        avail = mask | later[start]
        passes = True
        for v in chosen:
            if (at_floor[v] & avail).bit_count() < links_needed:
                return  # no ring reaches the floor's bottleneck
            if passes and (above[v] & avail).bit_count() < links_needed:
                passes = False
        if not passes and rest_hopeless(start, total):
            return
        if len(chosen) == k:
            if others and _core(at_floor, links_needed, eligible & ~mask).bit_count() < others:
                return
            members = tuple(chosen)
            key = (rings.ceiling(members) if passes else floor[0],) + problem.locality_and_total(members)
            if key >= floor:
                out.append((key, members))
            return
        r = k - len(chosen)
        rest = later[start]
        if rest.bit_count() < r:
            return
        while rest:
            bit = rest & -rest
            rest ^= bit
            i = bit.bit_length() - 1
            chosen.append(i)
            row = w[i]
            walk(i + 1, mask | bit, total + sum(row[c] for c in chosen[:-1]))
            chosen.pop()

    walk(0, 0, 0)
    return out


def _mask(positions) -> int:
    bits = 0
    for p in positions:
        bits |= 1 << p
    return bits


def _core(adjacency: list[int], degree: int, alive: int) -> int:
    """The positions left after repeatedly dropping those with fewer than ``degree`` neighbours
    among the others left (no group whose ring needs those links can hold them)."""
    changed = True
    while changed:
        changed = False
        rest = alive
        while rest:
            bit = rest & -rest
            rest ^= bit
            if (adjacency[bit.bit_length() - 1] & alive).bit_count() < degree:
                alive &= ~bit
                changed = True
    return alive
