"""recommend.jobs: --jobs N as N disjoint groups, the worst one as good as possible."""

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recommend_oracles import random_topology

from gputopo.analysis.recommend import Problem, recommend
from gputopo.sources.reference import load_reference


def test_jobs_split_dgx1_into_fair_disjoint_groups():
    topo = load_reference("dgx1")
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
