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

    from gputopo.analysis.recommend import recommend
    from gputopo.sources import TopologyRequest, resolve
    from gputopo.views.recommend import ring_summary

    log = next((OWN_FIXTURES / "corpus" / "tf_logs").glob("absl_created_device_4gpu_a100_sxm4*"))
    rec = recommend(resolve(TopologyRequest(tf_log=str(log))), 2)
    assert not rec.interchangeable and "the same bandwidth" not in rec.best.reason
    assert "does not say how the GPUs are connected" in rec.best.reason
    assert "not known" in ring_summary(rec.best) and "assumed" in ring_summary(rec.best)


def test_hops_that_round_alike_say_what_differs_not_twelve_against_twelve():
    """A real 4-GPU box (NVIDIA/nccl#667): a PIX pair and a PXB pair, both ~12 GB/s once rounded. The
    reason says the estimate charges a little for the extra bridges, not "~12 against ~12"."""
    paste = REPO / "tests/fixtures/corpus/topo/nccl667_4gpu_pxb_pair_pix_pair_sys_two_numa_no_legend.txt"
    result = recommend(resolve(TopologyRequest(from_files=[str(paste)])), 2)
    reason = result.best.reason
    assert "~12 GB/s (PIX) against ~12 GB/s" not in reason
    assert "(PIX) is estimated a little faster than {0,1}'s (PXB), both ~12 GB/s" in reason
    assert "cost for each PCIe bridge" in reason


@pytest.mark.parametrize(("measured", "best", "says"), [
    ((0, 1), [0, 1], "its slowest ring hop (PXB, measured) is a little faster than {2,3}'s (PIX, estimated)"),
    ((2, 3), [2, 3], "its slowest ring hop (PIX, measured) is a little faster than {0,1}'s (PXB, estimated)"),
])
def test_hops_that_round_alike_with_one_measured_do_not_call_the_estimate_measured(measured, best, says):
    """The same box with one pair measured near the other's estimate: "measured a little faster" would
    call an estimated hop measured, or compare a measurement with a figure nobody measured."""
    from gputopo.model.parts import Measurement

    paste = REPO / "tests/fixtures/corpus/topo/nccl667_4gpu_pxb_pair_pix_pair_sys_two_numa_no_legend.txt"
    topology = resolve(TopologyRequest(from_files=[str(paste)]))
    gbps = 12.4 if measured == (0, 1) else 12.0
    topology.link(*measured).measured = Measurement(a_to_b_gbps=gbps, b_to_a_gbps=gbps, method="bench-p2p",
                                                    p2p_enabled=True)
    result = recommend(topology, 2)
    assert result.best.gpus == best and says in result.best.reason
    assert "measured a little faster" not in result.best.reason
