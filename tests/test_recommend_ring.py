"""recommend.ring: the best ring (bottleneck Hamiltonian cycle) through a set of GPUs."""

from gputopo.analysis.recommend import INF, Problem, best_ring
from gputopo.sources.reference import load_reference


def test_best_ring_on_the_dgx1_nv2_cycle():
    problem = Problem.from_topology(load_reference("dgx1"), list(range(8)))
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
