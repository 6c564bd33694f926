"""The go-gpuallocator best-effort port, and where the bottleneck view beats its score sum."""

import pytest
from conftest import SHARED_FIXTURES
from linktable import cube_mesh_8, table_machine

from gputopo.analysis.recommend import gpuallocator
from gputopo.analysis.recommend import Problem, recommend
from gputopo.errors import InputError
from gputopo.model import make_link
from gputopo.sources import TopologyRequest, resolve


def test_pair_scores_follow_the_published_table():
    assert gpuallocator.pair_score(make_link(0, 1, "SYS")) == 10
    assert gpuallocator.pair_score(make_link(0, 1, "PIX")) == 50
    assert gpuallocator.pair_score(make_link(0, 1, "NV2", pcie_path="SYS")) == 210
    assert gpuallocator.pair_score(make_link(0, 1, "NV12", pcie_path="PXB")) == 1240


def test_pair_scores_count_up_to_eighteen_nvlinks():
    """go-gpuallocator scores up to eighteen NVLinks since commit b7e889c "Extend policy to 18 NVLinks"
    (Nov 2023): an H100/B200 NV18 pair earns 1800 plus its PCIe points."""
    assert gpuallocator.pair_score(make_link(0, 1, "NV18", pcie_path="NODE")) == 1820
    assert gpuallocator.pair_score(make_link(0, 1, "NV13", pcie_path="SYS")) == 1310
    assert gpuallocator.pair_score(make_link(0, 1, "NV18")) == 1800  # NVSwitch text: no PCIe word


def test_a_pair_said_to_have_more_than_eighteen_nvlinks_counts_as_eighteen():
    """The Go link counter (internal/links/device.go GetNVLink) has no step past EighteenNVLINKLinks
    and NVML lists at most NVLINK_MAX_LINKS = 18 links per GPU: more counts as eighteen, not as none."""
    assert gpuallocator.NVLINK_MAX_SCORED_LINKS == 18
    assert gpuallocator.pair_score(make_link(0, 1, "NV20", pcie_path="NODE")) == 1820


@pytest.mark.parametrize("n, size, expected", [(4, 2, 3), (6, 2, 15), (6, 3, 10), (8, 4, 35), (5, 2, 15)])
def test_partitions_are_complete_and_never_repeat(n, size, expected):
    partitions = list(gpuallocator.iterate_partitions(list(range(n)), size))
    assert len(partitions) == expected
    canonical = {frozenset(frozenset(s) for s in p) for p in partitions}
    assert len(canonical) == expected
    for p in partitions:
        assert sorted(g for s in p for g in s if g is not None) == list(range(n))


def test_allocator_on_dgx1_quads_and_required_gpus():
    topo = cube_mesh_8()
    assert set(gpuallocator.allocate(topo, 4)) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    assert 6 in gpuallocator.allocate(topo, 2, required=[6])
    assert gpuallocator.allocate(topo, 9) == []


def test_allocator_refuses_large_domains():
    with pytest.raises(InputError):
        gpuallocator.allocate(table_machine("nvswitch-16-nv6"), 4)


@pytest.mark.parametrize("source", ["table", "fixture"])
def test_bottleneck_view_beats_the_score_sum_on_dgx1_five_gpus(source):
    """Five GPUs of a DGX-1: the score sum takes a socket's quad plus GPU 4, whose only NVLink into
    that quad goes to GPU 0, so any ring must cross SYS (~6 GB/s); the bottleneck view finds a five-GPU
    ring over NVLink only (~20 GB/s)."""
    if source == "table":
        topo = cube_mesh_8()
    else:
        topo = resolve(TopologyRequest(from_files=(str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"),)))
    theirs = gpuallocator.allocate(topo, 5)
    ours = recommend(topo, 5).best
    problem = Problem.from_topology(topo, topo.gpu_indices)
    their_bottleneck, _ = problem.ring(tuple(problem.pos[g] for g in theirs))
    assert their_bottleneck / 100 < 10  # SYS hop
    assert ours.bottleneck_gbps >= 3 * their_bottleneck / 100
    assert all(h.link_type.startswith("NV") for h in ours.hops)
    # ... even though the score sum prefers theirs.
    assert gpuallocator.set_score(topo, theirs) > gpuallocator.set_score(topo, ours.gpus)


@pytest.mark.parametrize("machine", ["cube-mesh-8", "nvswitch-8-nv18", "pcie-8", "two-socket-4", "nvswitch-8-nv12"])
def test_where_both_agree_the_ring_bottleneck_is_the_same(machine):
    topo = table_machine(machine)
    problem = Problem.from_topology(topo, topo.gpu_indices)
    for k in (2, 4):
        if k > len(topo.gpus):
            continue
        theirs = gpuallocator.allocate(topo, k)
        ours = recommend(topo, k).best
        their_key = problem.key(tuple(problem.pos[g] for g in theirs))
        assert ours.key >= their_key  # never worse than the score sum
