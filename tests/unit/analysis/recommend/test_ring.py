"""recommend.ring: the best ring (bottleneck Hamiltonian cycle) through a set of GPUs."""

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from linktable import cube_mesh_8

from gputopo.analysis.recommend import INF, Problem, best_ring
from gputopo.analysis.recommend.ring import RingOracle, ring_bottleneck, ring_ceiling, ring_reaches


def test_best_ring_on_the_dgx1_nv2_cycle():
    problem = Problem.from_topology(cube_mesh_8(), list(range(8)))
    bottleneck, order, complete = best_ring(tuple(range(8)), problem.weight)
    assert complete and bottleneck == 4000  # every DGX-1 GPU has two NV2 links forming one 8-cycle
    assert sorted(order) == list(range(8))
    hops = list(zip(order, order[1:] + order[:1]))
    assert min(problem.weight[a][b] for a, b in hops) == 4000


def test_best_ring_is_a_matrix_in_order_out_function():
    """Four GPUs where the identity order crosses the slow pairs: the best ring avoids both."""
    slow, fast = 100, 900
    weight = [
        [0, slow, fast, fast],
        [slow, 0, fast, fast],
        [fast, fast, 0, slow],
        [fast, fast, slow, 0],
    ]
    bottleneck, order, complete = best_ring((0, 1, 2, 3), weight)
    assert complete and bottleneck == fast
    hops = list(zip(order, order[1:] + order[:1]))
    assert all(weight[a][b] == fast for a, b in hops)
    # Small sets need no search: one GPU never limits, a pair is its link, a triangle its slowest side.
    assert best_ring((2,), weight)[0] == INF
    assert best_ring((0, 1), weight) == (slow, [0, 1], True)
    assert best_ring((0, 1, 2), weight) == (slow, [0, 1, 2], True)


def _brute_force_bottleneck(members, weight):
    first, rest = members[0], members[1:]
    return max(
        min(weight[a][b] for a, b in zip((first,) + perm, perm + (first,)))
        for perm in itertools.permutations(rest)
    )


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    n=st.integers(4, 8),
    speeds=st.lists(st.sampled_from([100, 616, 1232, 2000, 4000, 8000]), min_size=1, max_size=4, unique=True),
)
def test_ring_searches_agree_with_brute_force(data, n, speeds):
    """The climb (``best_ring``), the yes/no question (``ring_reaches``), the value alone
    (``ring_bottleneck``) and the bitmask oracle all agree with every ring order tried."""
    weight = [[0] * n for _ in range(n)]
    for a in range(n):
        for b in range(a + 1, n):
            weight[a][b] = weight[b][a] = data.draw(st.sampled_from(speeds))
    members = tuple(sorted(data.draw(st.lists(st.integers(0, n - 1), min_size=4, max_size=n, unique=True))))
    want = _brute_force_bottleneck(members, weight)
    bottleneck, order, complete = best_ring(members, weight)
    assert complete and bottleneck == want and sorted(order) == list(members)
    assert min(weight[a][b] for a, b in zip(order, order[1:] + order[:1])) == want
    assert ring_bottleneck(members, weight) == (want, True)
    assert ring_ceiling(members, weight) >= want
    oracle = RingOracle(weight)
    assert oracle.bottleneck(members) == (want, True)
    assert oracle.ceiling(members) == ring_ceiling(members, weight)
    for threshold in speeds:
        assert ring_reaches(members, weight, threshold) == (want >= threshold, True)
        assert oracle.reaches(members, threshold) == (want >= threshold, True)
