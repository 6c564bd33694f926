"""recommend.jobs: --jobs N as N disjoint groups, the worst one as good as possible."""

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from linktable import cube_mesh_8
from recommend_oracles import random_topology

from gputopo.analysis.recommend import Problem, recommend


def test_jobs_split_dgx1_into_fair_disjoint_groups():
    topo = cube_mesh_8()
    rec = recommend(topo, 4, jobs=2)
    assert [set(g.gpus) for g in rec.jobs] == [{0, 1, 2, 3}, {4, 5, 6, 7}]
    pairs = recommend(topo, 2, jobs=4)
    used = [g for job in pairs.jobs for g in job.gpus]
    assert sorted(used) == list(range(8))
    assert all(job.bottleneck.startswith("NV2") for job in pairs.jobs)  # DGX-1 has a perfect NV2 matching
    assert pairs.jobs_proven_optimal


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), shape=st.sampled_from([(2, 2), (2, 3), (3, 2)]), require_one=st.booleans())
def test_jobs_worst_group_matches_brute_force(seed, shape, require_one):
    k, jobs = shape
    topo = random_topology(7, seed)
    require = [seed % 7] if require_one else []
    rec = recommend(topo, k, jobs=jobs, require=require)
    problem = Problem.from_topology(topo, topo.gpu_indices)
    used = [g for job in rec.jobs for g in job.gpus]
    assert len(set(used)) == k * jobs and set(require) <= set(used)
    got = min(problem.key(tuple(problem.pos[g] for g in job.gpus)) for job in rec.jobs)
    best = None
    for groups in itertools.combinations(itertools.combinations(range(7), k), jobs):
        members = [g for group in groups for g in group]
        if len(set(members)) < len(members) or not set(require) <= set(members):
            continue
        worst = min(problem.key(g) for g in groups)
        best = worst if best is None or worst > best else best
    assert got == best
    assert rec.jobs_proven_optimal


def _brute_force_split(problem, k, jobs, require):
    """Every split's worst key, the best one; and every group's key (the slow way)."""
    keys = {g: problem.key(g) for g in itertools.combinations(range(problem.n), k)}
    best = None
    for groups in itertools.combinations(keys, jobs):
        members = [g for group in groups for g in group]
        if len(set(members)) < len(members) or not set(require) <= set(members):
            continue
        worst = min(keys[g] for g in groups)
        best = worst if best is None or worst > best else best
    return best, keys


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    shape=st.sampled_from([(4, 2, 8), (2, 4, 8), (3, 3, 9), (3, 2, 8), (2, 3, 8)]),
    few_words=st.booleans(),
    require_one=st.booleans(),
)
def test_jobs_fairest_split_is_the_first_packing_of_the_groups_at_least_its_worst(seed, shape, few_words, require_one):
    """The split starts from a good split's floor and lists only groups that may reach it and leave
    room for the other jobs; the answer is still the fairest, and exactly the first packing (lowest
    GPU first, best groups first) of every group at least as good as its worst."""
    from gputopo.analysis.recommend.jobs import _pack, split_jobs

    k, jobs, n = shape
    topo = random_topology(n, seed, ["NV2", "PIX", "SYS"] if few_words else None)
    problem = Problem.from_topology(topo, topo.gpu_indices)
    require = {seed % n} if require_one else set()
    groups, exact, _ = split_jobs(problem, k, jobs, require)
    assert exact
    best, keys = _brute_force_split(problem, k, jobs, require)
    assert min(problem.key(g) for g in groups) == best
    at_least = sorted((g for g in keys if keys[g] >= best), key=lambda g: (tuple(-x for x in keys[g]), g))
    assert groups == _pack(at_least, n, k, jobs, require)


def test_a_split_into_hundreds_of_jobs_needs_no_recursion_as_deep_as_the_jobs():
    import inspect
    import sys

    from gputopo.analysis.recommend import Problem
    from gputopo.analysis.recommend.jobs import split_jobs

    n = 600
    weight = [[0 if a == b else 100 + (a + b) % 7 for b in range(n)] for a in range(n)]
    problem = Problem(list(range(n)), weight, [0] * n, [0] * n)
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 120)  # far below 600 frames
    try:
        groups, exact, _ = split_jobs(problem, 1, n - 10, {3})
    finally:
        sys.setrecursionlimit(saved)
    assert exact and len(groups) == n - 10 and (3,) in groups
    assert len({g for g in groups}) == n - 10
