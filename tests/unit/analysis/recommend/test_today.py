"""What a group gets today beside the healthy state it ranks on: which pairs are broken (measured,
inferred), which a doctor finding covers but the measurement clears, when NCCL_P2P_DISABLE=1 helps,
and how ties of the healthy ranking are ordered by today (review 4)."""

from __future__ import annotations

import pytest
from linktable import link_table

from gputopo.analysis.recommend import recommend
from gputopo.analysis.recommend.problem import Problem
from gputopo.analysis.recommend.today import group_today, pair_today
from gputopo.model import Measurement

PIX_NODE_4 = [["X", "PIX", "NODE", "NODE"], ["PIX", "X", "NODE", "NODE"], ["NODE", "NODE", "X", "PIX"],
              ["NODE", "NODE", "PIX", "X"]]


def _measure(topo, a, b, on, off):
    topo.link(a, b).measured = Measurement(a_to_b_gbps=on, b_to_a_gbps=on, method="p2pBandwidthLatencyTest",
                                           test="P2P=Enabled", p2p_enabled=True, p2p_off_a_to_b_gbps=off,
                                           p2p_off_b_to_a_gbps=off)


def box(iommu: bool = True, healthy_23: bool = True):
    """Four V100 PCIe on one NUMA node, pairs 0,1 and 2,3 behind switches: 0-1 copies at 2.37 GB/s with
    P2P against 9.88 staged; 2-3 at 12.92 against 9.91 (P2P works); doctor found the IOMMU translating
    for every pair (``iommu``) where asked."""
    topo = link_table(PIX_NODE_4, numa=0, name="Tesla V100-PCIE-16GB")
    _measure(topo, 0, 1, 2.37, 9.88)
    if healthy_23:
        _measure(topo, 2, 3, 12.92, 9.91)
    if iommu:
        for link in topo.links:
            link.health = ["iommu"]
    return topo


def test_a_pair_measured_copying_with_p2p_as_fast_as_staged_is_not_broken_whatever_doctor_says():
    problem = Problem.from_topology(box(), [0, 1, 2, 3])
    healthy = pair_today(problem, 2, 3)
    assert healthy.broken is None and healthy.cleared == ("iommu",) and healthy.p2p_gbps == pytest.approx(12.92)
    assert pair_today(problem, 0, 1).broken == "measured"
    inferred = pair_today(problem, 0, 2)  # not measured, under the IOMMU finding
    assert inferred.broken == "inferred"


def test_within_the_noise_is_as_fast():
    topo = box(iommu=True, healthy_23=False)
    _measure(topo, 2, 3, 9.6, 9.91)  # 3% slower than staged: within the 5% a measurement varies
    problem = Problem.from_topology(topo, [0, 1, 2, 3])
    assert pair_today(problem, 2, 3).broken is None and pair_today(problem, 2, 3).cleared == ("iommu",)


def test_the_best_pair_measured_healthy_gets_no_p2p_off_and_says_why():
    best = recommend(box(), 2, require=[2, 3]).best
    assert best.p2p_broken_pairs == [] and best.p2p_cleared_pairs == [(2, 3)]
    assert "NCCL_P2P_DISABLE" not in best.env and not best.p2p_disable_advised
    assert best.allreduce_busbw_until_fixed_gbps is None and all(h.until_fixed_gbps is None for h in best.hops)
    assert "until P2P is fixed" not in best.cross_device_ops_reason


def test_p2p_off_where_it_makes_the_group_faster_said_per_group():
    rec = recommend(box(), 2, require=[0, 1])
    best = rec.best
    assert best.p2p_broken_pairs == [(0, 1)] and best.p2p_disable_advised and best.env["NCCL_P2P_DISABLE"] == "1"
    assert best.allreduce_busbw_until_fixed_gbps == pytest.approx(9.88)


def test_an_unmeasured_pair_under_an_iommu_finding_is_likely_broken_and_said_to_be_inferred():
    best = recommend(box(healthy_23=False), 2, require=[2, 3]).best
    assert best.p2p_inferred_pairs == [(2, 3)] and best.p2p_disable_advised
    assert "likely broken (inferred" in best.p2p_caveat


def test_broken_pairs_nccl_takes_with_p2p_count_even_off_the_ring():
    """NCCL knows nothing of the fault: its own rings may copy over the broken PIX pair 0-1 even where the
    ring described avoids it, so the four GPUs get NCCL_P2P_DISABLE=1; the NODE pairs go through host
    memory at NCCL's default level either way."""
    problem = Problem.from_topology(box(), [0, 1, 2, 3])
    today = group_today(problem, [0, 1, 2, 3], [0, 2, 1, 3])
    assert today.p2p_risk == [(0, 1)] and today.disable_advised
    assert today.as_is_gbps == pytest.approx(2.37) and today.staged_gbps > 7  # (estimated: nothing staged measured on them)


def test_a_tie_of_the_healthy_state_goes_to_the_group_that_works_better_today():
    """0-1 ranks on its estimate once fixed (12.3, within the noise of 2-3's 12.92 measured): the healthy
    state ties them, and 2-3 works today while 0-1 copies at 2.4 GB/s."""
    rec = recommend(box(iommu=False), 2, alternatives=1)
    assert [g.gpus for g in rec.groups] == [[2, 3], [0, 1]]
    assert "as good as" not in rec.groups[0].reason and "works better today" in rec.groups[0].reason
    assert rec.groups[0].key == rec.groups[1].key  # a tie of the healthy ranking, decided by today
    assert recommend(box(iommu=False), 2, alternatives=0).best.gpus == [2, 3]


def test_a_tie_goes_to_the_group_without_a_gpu_whose_memory_was_held():
    topo = link_table(PIX_NODE_4, numa=0, name="Tesla V100-PCIE-16GB")
    assert recommend(topo, 2).best.gpus == [0, 1]
    rec = recommend(topo, 2, held={1: "TensorFlow got 1800 MB of 10481 (a past state)"})
    assert rec.best.gpus == [2, 3] and "may not be free" in rec.best.reason
    assert any("GPU 1 may be busy" in note and "past state" in note for note in rec.notes)
    kept = recommend(topo, 2, require=[1], held={1: "a past state"})
    assert 1 in kept.best.gpus and any("kept in the best group" in note for note in kept.notes)
