"""recommend.explain: the reasons for the ranking, from the groups' keys and slowest hops."""

import pytest
from conftest import REPO
from linktable import table_machine, two_socket_4

from gputopo.analysis.recommend import recommend
from gputopo.sources import TopologyRequest, resolve


@pytest.mark.parametrize(
    ("machine", "k", "beats"),
    [("cube-mesh-8", 4, "better than {0,3,4,7}: same slowest hop, but on one NUMA node instead of 2"),
     ("two-socket-4", 2, "better than {0,2}: its slowest ring hop is ~12 GB/s (PIX) against ~6.2 GB/s (SYS)")],
)
def test_a_best_group_that_ties_also_says_what_it_beats(machine, k, beats):
    """'as good as the runner-up' alone does not say why the pick is good."""
    reason = recommend(table_machine(machine), k).best.reason
    assert reason.startswith("as good as ") and "lower GPU numbers" in reason
    assert beats in reason


def test_reasons_name_the_slowest_hops_link_word_from_the_hop_itself():
    """The word in brackets is the slowest hop's label, measured or not, never parsed from prose."""
    from gputopo.analysis.recommend import GroupAdvice, RingHop
    from gputopo.analysis.recommend.explain import why_better

    fast_hop = RingHop(0, 1, "NV2", 40.0, "measured", "NV2")
    slow_hop = RingHop(0, 2, "UNKNOWN", 6.2, "estimated", "TF:no-P2P")
    fast = GroupAdvice(gpus=[0, 1], key=(4000, -1, -1, 4000), slowest_hop=fast_hop)
    slow = GroupAdvice(gpus=[0, 2], key=(620, -1, -1, 620), slowest_hop=slow_hop)
    assert why_better(fast, slow) == "its slowest ring hop is ~40 GB/s (NV2) against ~6.2 GB/s (TF:no-P2P) for {0,2}"
    assert why_better(fast, slow, name_worse=False).endswith("(TF:no-P2P)")
    best = recommend(two_socket_4(), 2).best
    assert best.slowest_hop is not None and best.bottleneck.startswith(best.slowest_hop.label + " between")
    assert "slowest_hop" not in best.to_dict()  # JSON unchanged: the hop is already in "hops"


def test_links_the_source_does_not_name_are_not_called_alike():
    """Review 2 (high): a TF log alone (no link types) got "every pair has the same bandwidth: any
    group is as good" and a made-up hop figure stated as fact, for NVLinked A100s."""
    from conftest import OWN_FIXTURES

    from gputopo.sources import TopologyRequest, resolve
    from gputopo.views.recommend import ring_summary

    log = next((OWN_FIXTURES / "corpus" / "tf_logs").glob("absl_created_device_4gpu_a100_sxm4*"))
    rec = recommend(resolve(TopologyRequest(tf_log=str(log))), 2)
    assert not rec.interchangeable and "the same bandwidth" not in rec.best.reason
    assert "does not say how the GPUs are connected" in rec.best.reason
    assert "not known" in ring_summary(rec.best) and "assumed" in ring_summary(rec.best)


def test_a_pcie_only_matrix_says_its_figures_leave_nvlink_out():
    """JUWELS Booster's `topo -mp`: NV4-meshed A100s read SYS; the ranking is PCIe's and says so."""
    from conftest import OWN_FIXTURES

    paste = OWN_FIXTURES / "corpus" / "topo" / "juwels_booster_4xa100_topo_mp_shell_comment_4nic_nps4.txt"
    rec = recommend(resolve(TopologyRequest(from_files=(str(paste),))), 2)
    assert any("`nvidia-smi topo -mp` (PCIe paths only)" in note for note in rec.notes)
    assert "pairs NVLink joins peer whatever their word" in rec.best.cross_device_ops_reason  # SYS's guess hedged


def test_hops_that_round_alike_say_what_differs_not_twelve_against_twelve():
    """A real 4-GPU box (NVIDIA/nccl#667): a PIX pair and a PXB pair, both ~12 GB/s once rounded. The
    reason says the estimate charges a little for the extra bridges, not "~12 against ~12"."""
    paste = REPO / "tests/fixtures/corpus/topo/nccl667_4gpu_pxb_pair_pix_pair_sys_two_numa_no_legend.txt"
    result = recommend(resolve(TopologyRequest(from_files=[str(paste)])), 2)
    reason = result.best.reason
    assert "~12 GB/s (PIX) against ~12 GB/s" not in reason
    assert "(PIX) is estimated a little faster than {0,1}'s (PXB), both ~12 GB/s" in reason
    assert "cost for each PCIe bridge" in reason


@pytest.mark.parametrize(("measured", "gbps"), [((0, 1), 12.4), ((2, 3), 12.0)])
def test_hops_that_round_alike_with_one_measured_tie_within_the_noise(measured, gbps):
    """The same box with one pair measured near the other's estimate (12.3 GB/s): "measured a little
    faster" would call an estimated hop measured, and a measurement within its noise of an estimate
    does not tell which is faster (issue 32): the two rank as equal, and the lower GPU numbers go first."""
    from gputopo.model.parts import Measurement

    paste = REPO / "tests/fixtures/corpus/topo/nccl667_4gpu_pxb_pair_pix_pair_sys_two_numa_no_legend.txt"
    topology = resolve(TopologyRequest(from_files=[str(paste)]))
    topology.link(*measured).measured = Measurement(a_to_b_gbps=gbps, b_to_a_gbps=gbps, method="bench-p2p",
                                                    p2p_enabled=True)
    result = recommend(topology, 2)
    first, second = result.groups[:2]
    assert first.gpus == [0, 1] and second.gpus == [2, 3] and first.key == second.key
    assert first.reason.startswith("as good as {2,3} in everything the source shows, their slowest hops (~")
    assert "within the ~5% a measurement varies" in first.reason
    assert "faster" not in first.reason
    assert gbps in {hop.gbps for hop in first.hops + second.hops}  # the figure shown is the one measured


def _measured_box(figures, numa):
    """A PCIe box of len(numa) GPUs, every pair measured (bench-p2p, no spread): ``figures[(a, b)]``."""
    from linktable import link_table

    from gputopo.model.parts import Measurement

    n = len(numa)
    rows = [["X" if i == j else "PIX" for j in range(n)] for i in range(n)]
    topology = link_table(rows, numa=numa)
    for (a, b), gbps in figures.items():
        topology.link(a, b).measured = Measurement(a_to_b_gbps=gbps, b_to_a_gbps=gbps, method="bench-p2p")
    return topology


def test_a_faster_measurement_within_the_noise_loses_to_locality():
    """Issue 32: 45.2 against 44.9 GB/s measured is no difference; the pair on one NUMA node wins, and
    the reason says the figures are within the noise, not that one is faster."""
    topology = _measured_box({(0, 1): 44.9, (0, 2): 45.2, (0, 3): 20.0, (1, 2): 20.0, (1, 3): 20.0, (2, 3): 20.0},
                             numa=[0, 0, 1, 1])
    result = recommend(topology, 2)
    best, runner_up = result.groups[:2]
    assert best.gpus == [0, 1] and runner_up.gpus == [0, 2]
    assert best.bottleneck_gbps == 44.9 and runner_up.bottleneck_gbps == 45.2
    assert best.reason == ("slowest hop within the ~5% a measurement varies of {0,2}'s (~44.9 and ~45.2 GB/s), but "
                           "on one NUMA node instead of 2, keeping the input pipeline next to the GPUs")
    assert any("rank as equal" in note and "~5%" in note for note in result.notes)
    assert result.to_dict()["measurement_noise"] == {"bench-p2p": 0.05}


def test_measurements_beyond_the_noise_still_rank_by_speed():
    topology = _measured_box({(0, 1): 40.0, (0, 2): 45.2, (0, 3): 20.0, (1, 2): 20.0, (1, 3): 20.0, (2, 3): 20.0},
                             numa=[0, 0, 1, 1])
    best = recommend(topology, 2).best
    assert best.gpus == [0, 2] and best.reason.startswith("its slowest ring hop is ~45 GB/s (PIX) against ~40 GB/s")


def test_totals_within_the_noise_are_not_called_more_link_bandwidth():
    """Four GPUs on one NUMA node, every pair measured within 5% of the fastest: no group is "more
    link bandwidth (45 against 45 GB/s)" than another; they tie, and the reasons say why."""
    figures = {(0, 1): 45.0, (0, 2): 45.3, (1, 2): 44.8, (0, 3): 44.1, (1, 3): 45.0, (2, 3): 43.9}
    result = recommend(_measured_box(figures, numa=[0, 0, 0, 0]), 3)
    assert all("more link bandwidth" not in g.reason and "faster" not in g.reason for g in result.groups)
    assert result.best.reason == "every pair measured within the noise of the others: any group of this size is as good"
    assert result.interchangeable and result.best.gpus == [0, 1, 2]
    assert any(note.startswith("Every pair's figure is within the noise of the measured ones, ~5%") for note in result.notes)


def test_a_box_measured_alone_whose_pairs_all_measure_alike_is_called_so():
    """A p2pBandwidthLatencyTest matrix alone names no link; every pair measured within 5% of the
    others is not "the source does not say how the GPUs are connected"."""
    from gputopo.views.recommend import ring_summary

    paste = REPO / "tests/fixtures/corpus/p2pbw/mleng_h100_8gpu_p2p_writes_only.txt"
    result = recommend(resolve(TopologyRequest(from_files=[str(paste)])), 2)
    assert result.interchangeable
    assert result.best.reason == "every pair measured within the noise of the others: any group of this size is as good"
    assert "measured ~" in ring_summary(result.best) and "assumed" not in ring_summary(result.best)
    assert not any("does not tell the links apart" in note for note in result.notes)


def test_a_tf_log_alone_says_a_group_wins_by_its_pairs_tf_says_cannot_peer():
    """A cut TF 1.x log (denied pairs only): every estimate ties, and the tie-break is the pairs TF
    says cannot peer; the reason names that, not a bandwidth difference that rounds to nothing."""
    from gputopo.sources.tf.tflog import parse_tf_log, topology_from_tf_view

    pairs = [(1, 5), (1, 6), (1, 7), (2, 4), (2, 5), (2, 6), (2, 7), (3, 4), (3, 5)]
    text = "".join(f"I tensorflow/core/common_runtime/gpu/gpu_device.cc:847] Peer access not supported between "
                   f"device ordinals {a} and {b}\n" for a, b in pairs)
    groups = recommend(topology_from_tf_view(parse_tf_log(text, "cut.log")), 4).groups
    assert groups[0].gpus == [4, 5, 6, 7]
    assert "no pair TensorFlow says cannot peer against 1" in groups[0].reason
    assert all("37.0 against 37.0" not in g.reason for g in groups)
