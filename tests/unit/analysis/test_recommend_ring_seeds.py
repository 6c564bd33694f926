"""The search's ring seeds: a random 72-GPU topology without symmetry has rings of 8 GPUs over its
fastest links, which greedy growth misses; the answer must find one."""

from __future__ import annotations

import random

from gputopo.analysis.recommend import recommend
from gputopo.analysis.recommend.problem import Problem
from gputopo.analysis.recommend.search import _ring_seeds, twin_classes
from gputopo.model import Gpu, Topology, make_link

WORDS = ["NV1", "NV2", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]


def random_topology(n: int, seed: int) -> Topology:
    """As benchmarks/recommend_speed.py makes them: mixed words, two NUMA nodes, 20% without P2P."""
    rng = random.Random(seed)
    gpus = [Gpu(index=i, numa_node=i * 2 // n, nvlink_version="2.0", pcie_gen_current=3, pcie_width_current=16)
            for i in range(n)]
    links = []
    for a in range(n):
        for b in range(a + 1, n):
            ok = rng.random() > 0.2
            links.append(make_link(a, b, rng.choice(WORDS), p2p_read="ok" if ok else "TNS", p2p_write="ok" if ok else "TNS"))
    return Topology(gpus=gpus, links=links, source="test")


def _is_ring(group: tuple[int, ...], w: list[list[int]], t: int) -> bool:
    """Whether some order of ``group`` is a cycle over links at least ``t`` (small groups: brute force
    over orders starting at the first member)."""
    from itertools import permutations

    first, rest = group[0], group[1:]
    return any(
        all(w[a][b] >= t for a, b in zip((first, *order), (*order, first)))
        for order in permutations(rest)
    )


def test_ring_seeds_are_rings_over_the_fastest_links_that_have_one() -> None:
    topo = random_topology(24, 5)
    problem = Problem.from_topology(topo, topo.gpu_indices)
    classes = twin_classes(problem, set())
    class_of = {i: ci for ci, members in enumerate(classes) for i in members}
    seeds = _ring_seeds(problem, 5, set(), classes, class_of)
    assert seeds
    fastest = max(max(row) for row in problem.weight)
    for seed in seeds:
        assert len(seed) == 5
        assert _is_ring(seed, problem.weight, fastest)


def test_random_72_gpus_best_group_rides_the_fastest_links() -> None:
    topo = random_topology(72, 999)
    rec = recommend(topo, 8)
    problem = Problem.from_topology(topo, topo.gpu_indices)
    fastest = max(max(row) for row in problem.weight)
    best = tuple(sorted(rec.groups[0].gpus))
    assert _is_ring(best, problem.weight, fastest)
