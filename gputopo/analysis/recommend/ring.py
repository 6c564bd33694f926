"""The best ring through a set of GPUs: a bandwidth matrix in, a ring order out.

NCCL's all-reduce is a ring where every GPU sends to the next at once, so a ring is as fast as its
slowest hop; the best ring through a set is the bottleneck Hamiltonian cycle. Pure integers: this
module knows nothing of topologies.
"""

from __future__ import annotations

from typing import Sequence

RING_STEP_BUDGET = 50_000  # DFS steps per ring search before a ring is reported as best found
INF = 10**15  # the "bottleneck" of one GPU: nothing to send, so never the slowest


def best_ring(members: Sequence[int], weight: Sequence[Sequence[int]]) -> tuple[int, list[int], bool]:
    """The ring (Hamiltonian cycle) through ``members`` whose slowest hop is fastest.

    Tries thresholds from the fastest pair bandwidth down: at each, keeps only the pairs at least that
    fast and looks for a cycle through all members (depth-first, remembering dead ends). The first
    threshold with a cycle is the answer. Returns ``(slowest hop, order, complete)``; ``complete`` is
    False when the step budget ran out on some threshold (the ring is then the best found).
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
    lowest = min(min(r[y] for y in range(k) if y != x) for x, r in enumerate(rows))
    # No ring beats any GPU's second-fastest link inside the group; start there.
    ceiling = min(sorted((r[y] for y in range(k) if y != x), reverse=True)[1] for x, r in enumerate(rows))
    if lowest == ceiling:  # every GPU can reach that speed over any ring: the identity order works
        order = _ring_at_least(rows, k, lowest)
        if order is not None:
            return lowest, [members[x] for x in order], True
    thresholds = sorted({x for r in rows for x in r if lowest <= x <= ceiling}, reverse=True)
    complete = True
    for threshold in thresholds:
        adjacency = [0] * k
        for x in range(k):
            row = rows[x]
            bits = 0
            for y in range(k):
                if x != y and row[y] >= threshold:
                    bits |= 1 << y
            adjacency[x] = bits
        if any(bin(bits).count("1") < 2 for bits in adjacency):
            continue
        order, finished = _hamiltonian_cycle(adjacency, k, RING_STEP_BUDGET)
        if not finished:
            complete = False
        if order is not None:
            return threshold, [members[x] for x in order], complete
    # The complete graph at the lowest threshold always has a cycle; only a budget stop gets here.
    return thresholds[-1], list(members), False


def _ring_at_least(rows: list[list[int]], k: int, threshold: int) -> list[int] | None:
    """The identity order if every hop of it is at least ``threshold`` (true when all pairs are)."""
    if all(rows[x][(x + 1) % k] >= threshold for x in range(k)):
        return list(range(k))
    return None


def _hamiltonian_cycle(adjacency: list[int], k: int, budget: int) -> tuple[list[int] | None, bool]:
    """A Hamiltonian cycle in the graph given as neighbour bitmasks, from vertex 0.

    Returns ``(order or None, finished)``; ``finished`` is False if the budget stopped the search."""
    full = (1 << k) - 1
    dead: set[tuple[int, int]] = set()
    path = [0]
    steps = 0

    def extend(mask: int, last: int) -> bool:
        nonlocal steps
        steps += 1
        if steps > budget:
            raise _BudgetSpent
        if mask == full:
            return bool(adjacency[last] & 1)
        if (mask, last) in dead:
            return False
        options = adjacency[last] & ~mask
        # Fewest onward choices first (Warnsdorff): dead ends show up early.
        choices = []
        while options:
            bit = options & -options
            options ^= bit
            nxt = bit.bit_length() - 1
            choices.append((bin(adjacency[nxt] & ~mask).count("1"), nxt))
        choices.sort()
        for _, nxt in choices:
            path.append(nxt)
            if extend(mask | (1 << nxt), nxt):
                return True
            path.pop()
        dead.add((mask, last))
        return False

    try:
        found = extend(1, 0)
    except _BudgetSpent:
        return None, False
    return (list(path) if found else None), True


class _BudgetSpent(Exception):
    pass
