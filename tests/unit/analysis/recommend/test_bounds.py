"""recommend.bounds: what a partial group can still become. ``beyond_reach`` only says "no group
grown from here ties or beats the bar" where brute force agrees; the 2-core peels only GPUs no such
group can hold."""

from __future__ import annotations

import itertools
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recommend_oracles import random_topology

from gputopo.analysis.recommend import Problem
from gputopo.analysis.recommend.bounds import Pools, core, places_needed
from gputopo.analysis.recommend.search import twin_classes


def test_the_2_core_peels_gpus_without_two_fast_links_and_says_when_a_chosen_one_has_none():
    fast = [{1, 2}, {0, 2}, {0, 1, 3}, {2}, set()]  # a triangle 0-1-2, 3 hangs off 2, 4 alone
    assert core([0], [1, 2, 3, 4], fast, 2) == [1, 2]
    assert core([3], [0, 1, 2], fast, 2) is None
    assert core([2], [3, 4], fast, 1) == [3]
    assert core([4], [0], fast, 0) == [0]


def test_places_needed_fills_the_used_places_first_then_the_largest():
    assert places_needed(3, {0: 2, 1: 4, 2: 1}, {0}) == 1
    assert places_needed(2, {0: 2, 1: 4}, {0}) == 0
    assert places_needed(7, {0: 2, 1: 4, 2: 1}, set()) == 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(5, 10), k=st.integers(2, 5), hosts=st.integers(1, 2))
def test_beyond_reach_never_drops_a_group_that_ties_or_beats_the_bar(seed, n, k, hosts):
    k = min(k, n)
    problem = Problem.from_topology(random_topology(n, seed, None, hosts), list(range(n)))
    classes = twin_classes(problem, set())
    pools = Pools(problem, classes, set())
    optimistic = pools.bound(problem, k)
    keys = {members: problem.key(members) for members in itertools.combinations(range(n), k)}
    rng = random.Random(seed)
    for _ in range(30):
        ci = rng.randrange(len(classes) + 1)
        before = [i for members in classes[:ci] for i in members]
        chosen = sorted(rng.sample(before, rng.randint(0, min(k, len(before)))))
        remaining = k - len(chosen)
        pool = pools.members_from(ci) if ci < len(classes) else []
        if remaining == 0 or len(pool) < remaining:
            continue
        bar = rng.choice(list(keys.values()))
        total = sum(problem.weight[a][b] for a, b in itertools.combinations(chosen, 2))
        bound = optimistic(chosen, remaining, ci, total)
        if bound <= bar or not pools.beyond_reach(problem, chosen, remaining, ci, total, bar, k, bound):
            continue
        for added in itertools.combinations(pool, remaining):
            assert keys[tuple(sorted(chosen + list(added)))] <= bar  # nothing here ties or beats the bar
