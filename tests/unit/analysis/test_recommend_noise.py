"""recommend over measured matrices, as properties (hypothesis): renaming the GPUs renames the answer,
and figures moved by less than the noise a measurement has do not move the answer out of the best
groups' class (docs/recommend.md, "Measured figures within their noise")."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from gputopo.analysis.expect.measured import DEFAULT_NOISE
from gputopo.analysis.recommend import recommend
from gputopo.analysis.recommend.budget import Budget
from gputopo.analysis.recommend.problem import CENTI, Problem
from gputopo.analysis.recommend.ring import best_ring
from gputopo.model import Gpu, Measurement, Topology, make_link

# A few link speeds far apart, each measured with a jitter: clusters as real measurements make them,
# and chains of figures closer than the noise across a cluster's edge.
SPEEDS = [6.0, 12.0, 22.0, 45.0, 48.0]


@st.composite
def measured_boxes(draw: st.DrawFn) -> tuple[dict[tuple[int, int], float], list[int], int]:
    """Every pair of 3-7 GPUs measured: ``(figures, NUMA node per GPU, group size)``."""
    n = draw(st.integers(3, 7))
    figures = {}
    for a, b in itertools.combinations(range(n), 2):
        speed = draw(st.sampled_from(SPEEDS))
        figures[(a, b)] = round(speed * draw(st.floats(0.92, 1.08)), 2)
    numa = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    return figures, numa, draw(st.integers(2, n - 1))


def _box(figures: dict[tuple[int, int], float], numa: list[int], renamed: list[int] | None = None) -> Topology:
    """The box with GPU ``i`` called ``renamed[i]`` (the identity where None)."""
    n = len(numa)
    name = renamed if renamed is not None else list(range(n))
    gpus = [Gpu(index=name[i], numa_node=numa[i], pci_bus_id=f"0000:{name[i] + 1:02x}:00.0") for i in range(n)]
    links = []
    for (a, b), gbps in figures.items():
        x, y = sorted((name[a], name[b]))
        link = make_link(x, y, "PIX", p2p_read="ok", p2p_write="ok")
        link.measured = Measurement(gbps, gbps, method="bench-p2p")
        links.append(link)
    return Topology(gpus=sorted(gpus, key=lambda g: g.index), links=sorted(links, key=lambda lk: (lk.a, lk.b)),
                    source="test")


def _key(topology: Topology, gpus: list[int]) -> tuple[int, ...]:
    problem = Problem.from_topology(topology, topology.gpu_indices)
    return problem.key(tuple(sorted(problem.pos[g] for g in gpus)))


@settings(max_examples=60, deadline=None)
@given(measured_boxes(), st.randoms(use_true_random=False))
def test_renaming_the_gpus_renames_the_answer(box, rng):
    """The best group of a renamed box is the renamed best group, up to groups of equal worth (among
    those the lowest numbers go first, and renaming changes which numbers are lowest)."""
    figures, numa, k = box
    renamed = list(range(len(numa)))
    rng.shuffle(renamed)
    original, other = _box(figures, numa), _box(figures, numa, renamed)
    best = recommend(original, k, alternatives=0).best
    best_renamed = recommend(other, k, alternatives=0).best
    assert best_renamed.key == best.key
    assert _key(other, [renamed[g] for g in best.gpus]) == best_renamed.key
    assert best_renamed.bottleneck_gbps is not None and best.bottleneck_gbps is not None


def _raw_bottleneck(figures: dict[tuple[int, int], float], n: int, group: tuple[int, ...]) -> int:
    """The slowest hop of the best ring through ``group`` over the figures themselves (centi-GB/s)."""
    weight = [[0] * n for _ in range(n)]
    for (a, b), gbps in figures.items():
        weight[a][b] = weight[b][a] = round(gbps * CENTI)
    return best_ring(group, weight, Budget())[0]


@settings(max_examples=60, deadline=None)
@given(measured_boxes(), st.lists(st.floats(-0.999, 0.999), min_size=21, max_size=21),
       st.floats(0.0, DEFAULT_NOISE * 0.98))
def test_figures_moved_within_the_noise_keep_the_answer_in_the_best_class(box, shifts, spread):
    """Each figure moved by a share ``d`` under the noise ``e`` (``spread``): the group then chosen is
    worth, by the first figures, at least the best ring's ``(1 - e)(1 - d)/(1 + d)``: within the noise
    of the best, but for the move itself. (Exactly "within the noise of the best" cannot hold: a move
    of nearly the noise can bring a slower group within the noise of the best, where its locality
    wins.) Its own figures, as moved, are within the noise of the best moved ring."""
    figures, numa, k = box
    n = len(numa)
    moved = {pair: round(gbps * (1 + spread * shift), 2) for (pair, gbps), shift in zip(figures.items(), shifts)}
    groups = list(itertools.combinations(range(n), k))
    best_before = max(_raw_bottleneck(figures, n, g) for g in groups)
    best_after = max(_raw_bottleneck(moved, n, g) for g in groups)
    chosen = tuple(recommend(_box(moved, numa), k, alternatives=0).best.gpus)
    margin = (1 - DEFAULT_NOISE) * (1 - spread) / (1 + spread)
    assert _raw_bottleneck(figures, n, chosen) >= best_before * margin - 2  # (figures rounded to centi-GB/s)
    assert _raw_bottleneck(moved, n, chosen) >= best_after * (1 - DEFAULT_NOISE) - 1
