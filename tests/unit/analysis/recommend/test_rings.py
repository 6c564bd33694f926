"""recommend.rings: where the rings of the fastest links settle the ask, the groups listed are the
exact best (against brute force), and where they cannot, nothing is claimed."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recommend_oracles import brute_force_keys, random_topology

from gputopo.analysis.recommend import Problem
from gputopo.analysis.recommend import search as search_module
from gputopo.analysis.recommend.rings import fastest_ring_groups
from gputopo.analysis.recommend.search import search_groups
from gputopo.model import Gpu, Topology, make_link


def _as_written(group):
    return tuple(group)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(8, 11), k=st.integers(3, 5), keep=st.integers(1, 3),
       words=st.sampled_from([None, ["NV4", "NV2", "SYS"], ["NV2", "PIX", "SYS"]]))
def test_listed_groups_are_the_exact_best(seed, n, k, keep, words):
    k = min(k, n)
    topology = random_topology(n, seed, words)
    problem = Problem.from_topology(topology, topology.gpu_indices)
    listed = fastest_ring_groups(problem, k, set(), keep, _as_written)
    if listed is None:
        return
    assert [key for key, _ in listed] == brute_force_keys(topology, k)[:keep]
    assert all(problem.key(group) == key for key, group in listed)


def test_the_search_hands_a_long_walk_to_the_listing_and_says_so(monkeypatch):
    monkeypatch.setattr(search_module, "WALK_BEFORE_RINGS", 1)
    monkeypatch.setattr(search_module, "EXACT_LIMIT", 4)  # (12 GPUs: a "long" walk)
    topology = random_topology(12, 0)
    problem = Problem.from_topology(topology, topology.gpu_indices)
    result = search_groups(problem, 3, set(), 2)
    assert result.exhausted and result.listed
    assert [key for key, _ in result.ranked] == brute_force_keys(topology, 3)[:2]


def test_nothing_is_settled_where_no_numa_node_holds_enough_gpus():
    gpus = [Gpu(index=i, numa_node=i % 3, nvlink_version="2.0") for i in range(6)]
    links = [make_link(a, b, "NV2") for a in range(6) for b in range(a + 1, 6)]
    problem = Problem.from_topology(Topology(gpus=gpus, links=links, source="test"), list(range(6)))
    assert fastest_ring_groups(problem, 3, set(), 1, _as_written) is None  # two GPUs per NUMA node


def test_the_listing_gives_up_past_its_budget():
    topology = random_topology(10, 1, ["NV2"])  # every pair alike: rings everywhere
    problem = Problem.from_topology(topology, topology.gpu_indices)
    assert fastest_ring_groups(problem, 4, set(), 1, _as_written, budget=5) is None
