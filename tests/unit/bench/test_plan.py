"""bench-p2p --quick's classes on real captures, what it infers, and --concurrent's rounds (no TF)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gputopo.analysis.place.pair_classes import pair_classes
from gputopo.bench.plan import fill_inferred, full_plan, matchings, quick_plan
from gputopo.bench.results import BenchDevice, BenchResult, PairResult, gbps_stat
from gputopo.sources import TopologyRequest, resolve

TESTS = Path(__file__).resolve().parents[2]
DGX1 = TESTS / "fixtures" / "shared" / "topo" / "dgx1_v100_8gpu_mlx5.txt"
DGX_H100 = TESTS / "fixtures" / "corpus" / "topo" / "h100_8gpu_nv18_compact_spacing.txt"


def _ordered(indices):
    return {(a, b) for a in indices for b in indices if a != b}


def _check_plan(topology, plan):
    """Every ordered pair is measured or inferred from a measured pair of its own class; every GPU
    is in a measured pair; one measured pair at least per class."""
    indices = topology.gpu_indices
    assert set(plan.measured) | set(plan.inferred) == _ordered(indices)
    assert not set(plan.measured) & set(plan.inferred)
    key_of = {pair: cls.key for cls in pair_classes(topology, indices) for pair in cls.pairs}
    for (a, b), source in plan.inferred.items():
        assert source in plan.measured
        assert key_of[(min(a, b), max(a, b))] == key_of[(min(source), max(source))]
    assert {g for pair in plan.measured for g in pair} == set(indices)
    measured_keys = {key_of[(min(p), max(p))] for p in plan.measured}
    assert measured_keys == set(key_of.values())


def test_dgx1_capture_has_nv1_nv2_and_sys_classes():
    topology = resolve(TopologyRequest(from_files=(str(DGX1),)))
    classes = pair_classes(topology, topology.gpu_indices)
    assert {cls.key.link_type for cls in classes} == {"NV1", "NV2", "SYS"}
    assert sum(len(cls.pairs) for cls in classes) == 28
    # SYS pairs sit on different NUMA nodes; the NVLinked ones are split by their NUMA relation.
    assert all(cls.key.same_numa is False for cls in classes if cls.key.link_type == "SYS")
    plan = quick_plan(topology.gpu_indices, topology)
    _check_plan(topology, plan)
    assert len(plan.measured) < 56 // 3


def test_dgx_h100_capture_has_one_nvswitch_class_per_numa_relation():
    topology = resolve(TopologyRequest(from_files=(str(DGX_H100),)))
    classes = pair_classes(topology, topology.gpu_indices)
    assert len(classes) == 2
    assert {cls.key.link_type for cls in classes} == {"NV18"}
    assert {cls.key.same_numa for cls in classes} == {True, False}
    assert sorted(len(cls.pairs) for cls in classes) == [12, 16]  # 2 x C(4,2) within, 4 x 4 across
    plan = quick_plan(topology.gpu_indices, topology)
    _check_plan(topology, plan)
    assert len(plan.measured) <= 2 + 8 // 2 + 1


def test_without_a_topology_every_pair_is_one_class_and_every_device_is_measured():
    plan = quick_plan([0, 1, 2, 3, 4], None)
    assert len(plan.classes) == 1
    assert {g for pair in plan.measured for g in pair} == {0, 1, 2, 3, 4}
    assert set(plan.measured) | set(plan.inferred) == _ordered(range(5))


def test_inferred_figures_are_marked_and_come_from_their_class():
    topology = resolve(TopologyRequest(from_files=(str(DGX_H100),)))
    plan = quick_plan(topology.gpu_indices, topology)
    result = BenchResult("GPU", [BenchDevice(g, f"/device:GPU:{g}") for g in topology.gpu_indices], "Identity",
                         "/device:CPU:0", [1000], 4, 1, 0)
    for k, (a, b) in enumerate(plan.measured):
        pair = result.pair(a, b)
        pair.point(1000).uni_gbps = gbps_stat(1000, [1e-6 * (k + 1)])
        pair.bytes_checked = True
    fill_inferred(result, plan)
    data = result.to_dict()
    by_pair = {(p["src"], p["dst"]): p for p in data["pairs"]}
    assert len(by_pair) == 56
    for key, pair in by_pair.items():
        if key in plan.measured:
            assert pair["measured"] is True and pair["inferred_from"] is None
        else:
            assert pair["measured"] is False
            assert tuple(pair["inferred_from"]) == plan.inferred[key]
            assert pair["gbps"] == by_pair[plan.inferred[key]]["gbps"]
    assert data["quick"] is True and len(data["pair_classes"]) == 2


def test_full_plan_measures_every_ordered_pair():
    assert set(full_plan([0, 1, 2]).measured) == _ordered([0, 1, 2])


@pytest.mark.parametrize("n", [2, 3, 4, 7, 8])
def test_matchings_are_disjoint_and_cover_every_pair_once(n):
    rounds = matchings(list(range(n)))
    pairs = [tuple(sorted(p)) for r in rounds for p in r]
    assert sorted(pairs) == sorted((a, b) for a in range(n) for b in range(a + 1, n))
    for r in rounds:
        devices = [g for pair in r for g in pair]
        assert len(devices) == len(set(devices)) and len(r) == n // 2


def test_a_mismatch_is_an_error_finding_naming_the_pair_and_the_likely_causes():
    result = BenchResult("GPU", [BenchDevice(0, "a"), BenchDevice(1, "b")], "Identity", "/device:CPU:0", [8], 4, 1, 0)
    result.pairs[(0, 1)] = PairResult(0, 1, bytes_mismatch=True)
    (finding,) = result.findings()
    assert finding.severity == "error" and finding.code == "p2p-bytes-mismatch"
    assert "0 -> 1" in finding.message and finding.gpus == [0, 1]
    assert "IOMMU" in finding.fix and "ACS" in finding.fix
