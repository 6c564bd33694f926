"""recommend.search: the branch and bound is exact against brute force, and says when a node budget
stopped it."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recommend_oracles import brute_force_best_key, brute_force_keys, random_topology

from gputopo.analysis.recommend import EXACT_LIMIT, recommend


def test_search_beyond_the_exact_limit_says_when_it_is_not_proven(monkeypatch):
    import gputopo.analysis.recommend.search as module

    monkeypatch.setattr(module, "NODE_BUDGET", 3)
    topo = random_topology(EXACT_LIMIT + 4, seed=7)
    rec = recommend(topo, 5)
    assert not rec.proven_optimal
    assert "not proven optimal" in rec.search


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(2, 12),
    k=st.integers(1, 6),
    few_words=st.booleans(),
    hosts=st.integers(1, 2),
    require_one=st.booleans(),
    seeded=st.booleans(),
)
def test_search_matches_brute_force_on_random_topologies(seed, n, k, few_words, hosts, require_one, seeded):
    import gputopo.analysis.recommend.search as module

    k = min(k, n)
    # Few distinct link words make many interchangeable GPUs: exercises the twin-class shortcut.
    words = ["NV2", "SYS"] if few_words else None
    topo = random_topology(n, seed, words, hosts)
    require = [seed % n] if require_one else []
    # Without greedy seeds the branch and bound alone must find the optimum.
    saved = module.MAX_SEEDS
    module.MAX_SEEDS = saved if seeded else 0
    try:
        rec = recommend(topo, k, require=require)
    finally:
        module.MAX_SEEDS = saved
    assert rec.proven_optimal
    every_key = brute_force_keys(topo, k, require=require)
    assert rec.best.key == every_key[0]
    keys = [g.key for g in rec.groups]
    assert keys == sorted(keys, reverse=True)
    assert len({tuple(g.gpus) for g in rec.groups}) == len(rec.groups)
    if f"in {n} classes" in rec.search:  # no interchangeable GPUs: the runners-up are exact too
        assert keys == every_key[: len(keys)]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), k=st.integers(3, 4))
def test_search_matches_brute_force_at_the_exact_limit(seed, k):
    topo = random_topology(EXACT_LIMIT, seed)
    rec = recommend(topo, k)
    assert rec.proven_optimal and "exact" in rec.search
    assert rec.best.key == brute_force_best_key(topo, k)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 100_000), n=st.integers(4, 9), k=st.integers(1, 6), hosts=st.integers(1, 2))
def test_a_key_is_the_ring_then_the_rest(seed, n, k, hosts):
    """The search asks whether a group's ring reaches the bar before finding its best ring; that
    reads the rest of the key from ``locality_and_total``, so the key must be the ring, then that."""
    import itertools

    from gputopo.analysis.recommend import Problem

    topo = random_topology(n, seed, None, hosts)
    problem = Problem.from_topology(topo, topo.gpu_indices)
    for members in itertools.islice(itertools.combinations(range(n), min(k, n)), 20):
        assert problem.key(members) == (problem.ring(members)[0],) + tuple(problem.locality_and_total(members))
