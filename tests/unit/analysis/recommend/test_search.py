"""recommend.search: the branch and bound is exact against brute force, and says when the work budget
stopped it; no recursion grows with the group."""

import inspect
import random
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recommend_oracles import brute_force_best_key, brute_force_keys, random_topology

from gputopo.analysis.recommend import EXACT_LIMIT, MAX_ALTERNATIVES, WORK_BUDGET, Budget, Problem, best_ring, recommend
from gputopo.analysis.recommend.search import MAX_SEEDS, search_groups
from gputopo.errors import InputError


def test_a_search_the_budget_stops_says_it_is_the_best_found_not_proven():
    topo = random_topology(EXACT_LIMIT + 4, seed=7)
    rec = recommend(topo, 5, budget=Budget(2_000))
    assert not rec.proven_optimal and rec.search_stopped
    assert "search stopped after" in rec.search and "best found, not proven" in rec.search
    assert rec.notes[0].startswith("search stopped after") and rec.search_steps >= 2_000
    data = rec.to_dict()
    assert data["search_stopped"] is True and data["search_budget"] == 2_000 and data["search_steps"] == rec.search_steps


def test_the_default_budget_leaves_a_small_search_exact_and_counts_its_steps():
    rec = recommend(random_topology(EXACT_LIMIT, seed=3), 6)
    assert rec.proven_optimal and not rec.search_stopped
    assert 0 < rec.search_steps < WORK_BUDGET // 5 and rec.search_budget == WORK_BUDGET


def _hard_problem(n: int, seed: int = 1) -> Problem:
    """``n`` positions, every pair a random one of five figures, on two NUMA nodes: no twins."""
    rng = random.Random(seed)
    weight = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            weight[a][b] = weight[b][a] = rng.choice([100, 200, 400, 800, 1600])
    return Problem(list(range(n)), weight, [0] * n, [2 * i // n for i in range(n)])


def test_a_group_of_600_gpus_needs_no_recursion_as_deep_as_the_group():
    problem = _hard_problem(600)
    problem.budget = Budget(300_000)
    saved = sys.getrecursionlimit()
    sys.setrecursionlimit(len(inspect.stack()) + 120)  # far below 600 frames
    try:
        result = search_groups(problem, 590, set(), 3)
        bottleneck, order, _ = best_ring(tuple(range(600)), problem.weight, Budget(300_000))
    finally:
        sys.setrecursionlimit(saved)
    assert result.ranked and all(len(group) == 590 for _, group in result.ranked)
    assert sorted(order) == list(range(600)) and bottleneck > 0
    assert problem.budget.stopped and not result.exhausted


def test_the_budget_bounds_the_whole_search_not_its_nodes():
    """Issue 36: each node could start ring searches of 50,000 steps; now every step counts."""
    problem = _hard_problem(64)
    problem.budget = Budget(100_000)
    search_groups(problem, 56, set(), 101)
    assert problem.budget.stopped
    # Past the budget, only the seed groups' keys are still worked out (each a few passes over its pairs),
    # never a ring search: before issue 36 this search spent millions of ring steps.
    assert problem.budget.spent < 100_000 + 2 * MAX_SEEDS * 4 * 56 * 56


def test_alternatives_are_capped_with_one_clear_error():
    topo = random_topology(8, seed=1)
    assert len(recommend(topo, 2, alternatives=MAX_ALTERNATIVES).groups) == 28  # every pair of 8 GPUs
    with pytest.raises(InputError, match=f"--alternatives must be from 0 to {MAX_ALTERNATIVES}"):
        recommend(topo, 2, alternatives=MAX_ALTERNATIVES + 1)


def test_alternatives_the_budget_cannot_describe_are_left_out_and_said():
    topo = random_topology(EXACT_LIMIT, seed=5)
    full = recommend(topo, 8, alternatives=20)
    assert len(full.groups) == 21
    cut = recommend(topo, 8, alternatives=20, budget=Budget(full.search_steps - 20 * 100 * 64))
    assert 1 <= len(cut.groups) < 21
    assert [g.gpus for g in cut.groups] == [g.gpus for g in full.groups[: len(cut.groups)]]
    assert any("found but not described: the work budget ran out" in note for note in cut.notes)


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
    if "wired alike" not in rec.search:  # no interchangeable GPUs: the runners-up are exact too
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
