"""The best ring through a set of GPUs: a bandwidth matrix in, a ring order out.

NCCL's all-reduce is a ring where every GPU sends to the next at once, so a ring is as fast as its
slowest hop; the best ring through a set is the bottleneck Hamiltonian cycle. Pure integers: this
module knows nothing of topologies.

A ring at least ``t`` fast is a Hamiltonian cycle in the *threshold graph* of the pairs at least
``t`` fast. That graph only loses edges as ``t`` grows, so the best ring is found by climbing: every
cycle found at a threshold is as fast as its slowest hop, which may be well above the threshold, so
the next try starts just above that; the first threshold without a cycle ends the climb. Only that
last try has to search exhaustively.
"""

from __future__ import annotations

from typing import Sequence

from gputopo.analysis.recommend.budget import Budget

RING_STEP_BUDGET = 50_000  # DFS steps per ring search before a ring is reported as best found
INF = 10**15  # the "bottleneck" of one GPU: nothing to send, so never the slowest


def best_ring(members: Sequence[int], weight: Sequence[Sequence[int]],
              work: Budget | None = None) -> tuple[int, list[int], bool]:
    """The ring (Hamiltonian cycle) through ``members`` whose slowest hop is fastest.

    Climbs the thresholds (see the module note) to the fastest one with a cycle; the order returned
    is the cycle the depth-first search finds at exactly that threshold, so it does not depend on how
    the climb went. Returns ``(slowest hop, order, complete)``; ``complete`` is False when the step
    budget ran out on some threshold (the ring is then the best found). Its steps count in ``work``.
    """
    k = len(members)
    if k == 1:
        return INF, list(members), True
    if k == 2:
        return weight[members[0]][members[1]], list(members), True
    if k == 3:
        a, b, c = members
        return min(weight[a][b], weight[b][c], weight[a][c]), list(members), True
    rows = [[weight[a][b] for b in members] for a in members]
    if work is not None:
        work.spend(k * k)  # the rows, and sorting them for the ceiling
    lowest, ceiling = _lowest_and_ceiling(rows, k)
    if lowest == ceiling:  # every pair is at least that fast (no ring beats a GPU's 2nd-fastest link)
        return lowest, [members[x] for x in range(k)], True
    thresholds = sorted({x for r in rows for x in r if lowest < x <= ceiling})
    # Any order is a ring at least ``lowest`` fast (every pair is); the identity order may be faster.
    bottleneck = min(rows[x][(x + 1) % k] for x in range(k))
    found_at, found_order = None, None  # the threshold of the last cycle found, and the cycle
    complete = True
    for threshold in thresholds:
        if threshold <= bottleneck:
            continue
        order, finished = _cycle_at(rows, k, threshold, work)
        if order is None:
            complete = finished
            break
        bottleneck = min(rows[x][y] for x, y in zip(order, order[1:] + order[:1]))
        found_at, found_order = threshold, order
    if found_at != bottleneck:  # the cycle the search finds at the answer's own threshold
        order, finished = _cycle_at(rows, k, bottleneck, work)
        if order is None:  # only a budget stop: keep the cycle that showed the answer
            complete = False
            order = found_order if found_order is not None else list(range(k))
        found_order = order
    return bottleneck, [members[x] for x in found_order], complete


def ring_reaches(members: Sequence[int], weight: Sequence[Sequence[int]], threshold: int,
                 work: Budget | None = None) -> tuple[bool, bool]:
    """Whether some ring through ``members`` has no hop slower than ``threshold``: ``(reaches,
    complete)``; ``complete`` is False when the step budget stopped the search (then unknown)."""
    k = len(members)
    if k <= 3:
        return best_ring(members, weight, work)[0] >= threshold, True
    rows = [[weight[a][b] for b in members] for a in members]
    if work is not None:
        work.spend(k * k)  # the rows, and sorting them for the ceiling
    lowest, ceiling = _lowest_and_ceiling(rows, k)
    if threshold <= lowest:
        return True, True
    if threshold > ceiling:
        return False, True
    order, finished = _cycle_at(rows, k, threshold, work)
    return order is not None, finished


def ring_bottleneck(members: Sequence[int], weight: Sequence[Sequence[int]],
                    work: Budget | None = None) -> tuple[int, bool]:
    """The slowest hop of the best ring through ``members``, without the order: ``(bottleneck,
    complete)`` as ``best_ring`` gives them, found with fewer searches (the ceiling is tried first:
    most sets reach it)."""
    k = len(members)
    if k <= 3:
        return best_ring(members, weight, work)[0], True
    rows = [[weight[a][b] for b in members] for a in members]
    if work is not None:
        work.spend(k * k)  # the rows, and sorting them for the ceiling
    lowest, ceiling = _lowest_and_ceiling(rows, k)
    if lowest == ceiling:
        return lowest, True
    order, finished = _cycle_at(rows, k, ceiling, work)
    if order is not None:
        return ceiling, True
    if not finished:
        return best_ring(members, weight, work)[0], False
    bottleneck = min(rows[x][(x + 1) % k] for x in range(k))
    for threshold in sorted({x for r in rows for x in r if bottleneck < x < ceiling}):
        if threshold <= bottleneck:
            continue
        order, finished = _cycle_at(rows, k, threshold, work)
        if order is None:
            return bottleneck, finished
        bottleneck = min(rows[x][y] for x, y in zip(order, order[1:] + order[:1]))
    return bottleneck, True


def ring_ceiling(members: Sequence[int], weight: Sequence[Sequence[int]]) -> int:
    """A bound no ring through ``members`` beats, cheaply: the least, over members, of each one's
    second-fastest link inside the set (a ring uses two links per GPU); exact up to three GPUs."""
    k = len(members)
    if k <= 3:
        return best_ring(members, weight)[0]
    return _lowest_and_ceiling([[weight[a][b] for b in members] for a in members], k)[1]


def _lowest_and_ceiling(rows: list[list[int]], k: int) -> tuple[int, int]:
    """The slowest pair, and the fastest any ring can be: every GPU's 2nd-fastest link, the least."""
    lowest = INF
    ceiling = INF
    for x, r in enumerate(rows):
        links = sorted(r[:x] + r[x + 1 :])
        if links[0] < lowest:
            lowest = links[0]
        if links[-2] < ceiling:
            ceiling = links[-2]
    return lowest, ceiling


def _cycle_at(rows: list[list[int]], k: int, threshold: int, work: Budget | None = None) -> tuple[list[int] | None, bool]:
    """A Hamiltonian cycle (positions ``0..k-1``) using only pairs at least ``threshold`` fast, or
    None; and whether the search finished within the budget."""
    if work is not None:
        work.spend(k * k)
    adjacency = []
    for x in range(k):
        row = rows[x]
        bits = 0
        for y in range(k):
            if x != y and row[y] >= threshold:
                bits |= 1 << y
        if bits.bit_count() < 2:  # a GPU with fewer than two such links cannot be on the ring
            return None, True
        adjacency.append(bits)
    return _cycle_search(adjacency, 0, (1 << k) - 1, RING_STEP_BUDGET, work)


class RingOracle:
    """``ring_bottleneck``, ``ring_reaches`` and ``ring_ceiling`` for many sets of one matrix, faster:
    the threshold graphs are kept as neighbour bitmasks over the whole matrix, so a set's graph is
    its members' masks cut to the set, and the cycle search runs on the matrix's own positions."""

    def __init__(self, weight: Sequence[Sequence[int]], work: Budget | None = None):
        self.weight = weight
        self.work = work
        self.n = n = len(weight)
        # Each position's neighbours, fastest first: a set's ceiling reads the first two inside it.
        self.by_speed = [sorted((j for j in range(n) if j != i), key=lambda j: -weight[i][j]) for i in range(n)]
        self._masks: dict[int, list[int]] = {}

    def masks_at(self, threshold: int) -> list[int]:
        """Per position, the bitmask of positions it has a link at least ``threshold`` fast to."""
        masks = self._masks.get(threshold)
        if masks is None:
            w = self.weight
            if self.work is not None:
                self.work.spend(self.n * self.n)
            masks = []
            for i in range(self.n):
                bits = 0
                row = w[i]
                for j in range(self.n):
                    if j != i and row[j] >= threshold:
                        bits |= 1 << j
                masks.append(bits)
            self._masks[threshold] = masks
        return masks

    def ceiling(self, members: Sequence[int]) -> int:
        """As ``ring_ceiling``."""
        if len(members) <= 3:
            return ring_ceiling(members, self.weight)
        inside = set(members)
        w = self.weight
        ceiling = INF
        for v in members:
            seen = 0
            for j in self.by_speed[v]:
                if j in inside:
                    seen += 1
                    if seen == 2:
                        if w[v][j] < ceiling:
                            ceiling = w[v][j]
                        break
        return ceiling

    def reaches(self, members: Sequence[int], threshold: int) -> tuple[bool, bool]:
        """As ``ring_reaches``."""
        if len(members) <= 3:
            return ring_reaches(members, self.weight, threshold, self.work)
        if threshold > self.ceiling(members):
            return False, True
        return self._cycle(members, threshold)

    def bottleneck(self, members: Sequence[int]) -> tuple[int, bool]:
        """As ``ring_bottleneck``: the ceiling if a ring reaches it, else the climb below it."""
        k = len(members)
        if k <= 3:
            return best_ring(members, self.weight, self.work)[0], True
        ceiling = self.ceiling(members)
        reached, finished = self._cycle(members, ceiling)
        if reached:
            return ceiling, True
        if not finished:
            return best_ring(members, self.weight, self.work)[0], False
        w = self.weight
        order = list(members)
        bottleneck = min(w[a][b] for a, b in zip(order, order[1:] + order[:1]))
        for threshold in sorted({w[a][b] for a in members for b in members if bottleneck < w[a][b] < ceiling}):
            if threshold <= bottleneck:
                continue
            cycle, finished = self._cycle_order(members, threshold)
            if cycle is None:
                return bottleneck, finished
            bottleneck = min(w[a][b] for a, b in zip(cycle, cycle[1:] + cycle[:1]))
        return bottleneck, True

    def _cycle(self, members: Sequence[int], threshold: int) -> tuple[bool, bool]:
        cycle, finished = self._cycle_order(members, threshold)
        return cycle is not None, finished

    def _cycle_order(self, members: Sequence[int], threshold: int) -> tuple[list[int] | None, bool]:
        masks = self.masks_at(threshold)
        full = 0
        for v in members:
            full |= 1 << v
        adjacency = [0] * self.n
        for v in members:
            bits = masks[v] & full
            if bits.bit_count() < 2:
                return None, True
            adjacency[v] = bits
        return _cycle_search(adjacency, min(members), full, RING_STEP_BUDGET, self.work)


def _cycle_search(adjacency: list[int], start: int, full: int, budget: int,
                  work: Budget | None = None) -> tuple[list[int] | None, bool]:
    """A Hamiltonian cycle through the positions in ``full`` (neighbour bitmasks by position), from
    ``start``.

    Depth-first, the neighbour with fewest onward choices first (Warnsdorff), remembering dead ends.
    A partial path is abandoned as soon as some GPU not on it has fewer than two neighbours it could
    still use (the GPUs off the path and the path's two ends): that only cuts branches without a
    cycle, so the cycle found is the one the plain search finds first.
    The walk keeps its own stack (a ring of hundreds of GPUs is as deep), ``budget`` steps at most,
    and counts each step in ``work`` (one per GPU it looks at), stopping where ``work`` runs out.
    Returns ``(order or None, finished)``; ``finished`` is False if a budget stopped the search."""
    dead: set[tuple[int, int]] = set()
    path = [start]
    steps = 0
    spent = 0
    allowed = work.left if work is not None else None
    start_bit = 1 << start

    def visit(mask: int, last: int) -> bool | list[int]:
        """True: the path closes the cycle; False: a dead end; else the next GPUs to try, in order."""
        nonlocal steps, spent
        steps += 1
        unvisited = full & ~mask
        spent += 1 + unvisited.bit_count()
        if steps > budget or (allowed is not None and spent > allowed):
            raise _BudgetSpent
        if mask == full:
            return bool(adjacency[last] & start_bit)
        if (mask, last) in dead:
            return False
        if not adjacency[start] & unvisited:
            dead.add((mask, last))
            return False
        usable = unvisited | (1 << last) | start_bit
        rest = unvisited
        while rest:
            bit = rest & -rest
            rest ^= bit
            if (adjacency[bit.bit_length() - 1] & usable).bit_count() < 2:
                dead.add((mask, last))
                return False
        options = adjacency[last] & unvisited
        choices = []
        while options:
            bit = options & -options
            options ^= bit
            nxt = bit.bit_length() - 1
            choices.append(((adjacency[nxt] & unvisited).bit_count(), nxt))
        choices.sort()
        return [nxt for _, nxt in choices]

    try:
        found = _walk_cycle(visit, path, start_bit, dead)
    except _BudgetSpent:
        if work is not None:
            work.spend(spent)
            if work.exhausted:
                work.stop()
        return None, False
    if work is not None:
        work.spend(spent)
    return (list(path) if found else None), True


def _walk_cycle(visit, path: list[int], start_bit: int, dead: set[tuple[int, int]]) -> bool:
    """The depth-first walk of ``_cycle_search`` on an explicit stack, in the order the recursive
    walk takes: each frame is a partial path's mask, its last GPU, its choices and the next one."""
    first = visit(start_bit, path[0])
    if first is True or first is False:
        return first
    stack: list[list] = [[start_bit, path[0], first, 0]]
    while stack:
        frame = stack[-1]
        mask, last, choices, at = frame
        if at == len(choices):
            dead.add((mask, last))
            stack.pop()
            if stack:
                path.pop()
            continue
        frame[3] = at + 1
        nxt = choices[at]
        path.append(nxt)
        child_mask = mask | (1 << nxt)
        answer = visit(child_mask, nxt)
        if answer is True:
            return True
        if answer is False:
            path.pop()
            continue
        stack.append([child_mask, nxt, answer, 0])
    return False


class _BudgetSpent(Exception):
    pass
