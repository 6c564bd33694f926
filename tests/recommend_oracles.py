"""Test oracles for ``gputopo.analysis.recommend``: brute force (every subset, every ring order) and
random topologies to run it on. Used by the tests and ``benchmarks/recommend_speed.py``.

Independent of the search (shares only the bandwidth figures of ``Problem``), so they can check that
the search is exact.
"""

from __future__ import annotations

import itertools
import random
from typing import Iterable

from gputopo.analysis.recommend import INF, GroupKey, Problem
from gputopo.model import Gpu, Topology, make_link

LINK_WORDS = ["NV1", "NV2", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]


def brute_force_best_key(topology: Topology, gpus: int, require: Iterable[int] = (), exclude: Iterable[int] = ()) -> GroupKey:
    """The best key over every group, found the slow way (every subset, every ring order)."""
    return brute_force_keys(topology, gpus, require, exclude)[0]


def brute_force_keys(
    topology: Topology, gpus: int, require: Iterable[int] = (), exclude: Iterable[int] = ()
) -> list[GroupKey]:
    """Every group's key, best first, found the slow way (see ``brute_force_best_key``)."""
    excluded = set(exclude)
    required = set(require)
    problem = Problem.from_topology(topology, [g for g in topology.gpu_indices if g not in excluded])
    w = problem.weight
    keys: list[GroupKey] = []
    for members in itertools.combinations(range(problem.n), gpus):
        if not required <= {problem.index[i] for i in members}:
            continue
        if gpus == 1:
            bottleneck = INF
        elif gpus == 2:
            bottleneck = w[members[0]][members[1]]
        else:
            first, rest = members[0], members[1:]
            bottleneck = max(
                min(w[a][b] for a, b in zip((first,) + perm, perm + (first,)))
                for perm in itertools.permutations(rest)
            )
        total = sum(w[a][b] for a, b in itertools.combinations(members, 2))
        key = (
            bottleneck,
            -len({problem.host_id[i] for i in members}),
            -problem.locality(members).encode(problem.locality_scaled),  # NUMA nodes; sockets first where known
            total,
        )
        keys.append(key)
    keys.sort(reverse=True)
    return keys


def random_topology(n: int, seed: int, words: list[str] | None = None, hosts: int = 1) -> Topology:
    """``n`` GPUs on two NUMA nodes (and ``hosts`` hosts) joined by random link words; one pair in
    five cannot peer."""
    rng = random.Random(seed)
    words = words or LINK_WORDS
    gpus = [
        Gpu(index=i, numa_node=rng.randrange(2), nvlink_version="2.0", pcie_gen_current=3, pcie_width_current=16,
            host=f"h{rng.randrange(hosts)}" if hosts > 1 else None)
        for i in range(n)
    ]
    links = []
    for a in range(n):
        for b in range(a + 1, n):
            word = rng.choice(words)
            ok = rng.random() > 0.2
            links.append(make_link(a, b, word, p2p_read="ok" if ok else "TNS", p2p_write="ok" if ok else "TNS"))
    return Topology(gpus=gpus, links=links, source="test")
