"""recommend.weights: the pair figures made once per class of pair (kind of link, kinds of its two
GPUs) are the figures each pair gets on its own, measured and unhealthy pairs included."""

from __future__ import annotations

import random

import pytest
from linktable import cube_mesh_8, nvl72, pcie_8, two_socket_4

from gputopo.analysis.recommend.problem import LinkLookup, Problem
from gputopo.analysis.recommend.weights import (
    _by_class,
    _pair_by_pair,
    figure,
    pair_weights,
)
from gputopo.errors import InputError
from gputopo.model import Gpu, Measurement, Topology, make_link
from gputopo.sources.reference import MACHINES, load_reference

WORDS = ["NV1", "NV2", "NV4", "NV12", "PIX", "PXB", "PHB", "NODE", "SYS", "UNKNOWN"]


def _random(n: int, seed: int) -> Topology:
    rng = random.Random(seed)
    names = ["NVIDIA RTX A6000", "NVIDIA A100", None]  # a GA102 card among others: its own estimate
    gpus = [Gpu(index=i, name=rng.choice(names), numa_node=i % 2, nvlink_version=rng.choice(["2.0", "3.0", None]),
                pcie_gen_current=rng.choice([3, 4, None]), pcie_width_current=16, host=f"h{i // 6}") for i in range(n)]
    links = []
    for a in range(n):
        for b in range(a + 1, n):
            word = rng.choice(WORDS)
            p2p = rng.choice(["ok", "TNS", None])
            link = make_link(a, b, word, p2p_read=p2p, p2p_write=p2p, nvswitch=rng.choice([False, None, True]))
            if rng.random() < 0.05:
                link.measured = Measurement(a_to_b_gbps=rng.uniform(1, 90), b_to_a_gbps=rng.uniform(1, 90), method="nvbandwidth")
            if rng.random() < 0.05:
                link.health = ["acs"]
            links.append(link)
    return Topology(gpus=gpus, links=links, source="test")


def _both(topology: Topology, index: list[int]):
    gpus = {g.index: g for g in topology.gpus}
    return (_by_class(topology, index, LinkLookup(topology), gpus),
            _pair_by_pair(topology, index, topology.link_map(), gpus))


@pytest.mark.parametrize("name", sorted(MACHINES))
def test_reference_machines_get_the_figures_of_each_pair(name):
    topology = load_reference(name)
    fast, slow = _both(topology, topology.gpu_indices)
    assert fast.weight == slow.weight and fast.measured_pairs == slow.measured_pairs
    for a, b in topology.pairs():
        assert fast.basis[(a, b)] == slow.basis[(a, b)] == fast.basis[(b, a)]


@pytest.mark.parametrize("seed", range(6))
def test_random_topologies_with_measured_and_unhealthy_pairs_get_the_figures_of_each_pair(seed):
    topology = _random(14, seed)
    index = [g for g in topology.gpu_indices if g % 5 != seed % 5]  # some GPUs excluded, in another order
    index.reverse()
    fast, slow = _both(topology, index)
    assert fast.weight == slow.weight and fast.measured_pairs == slow.measured_pairs > 0
    assert all(fast.basis[pair] == slow.basis[pair] for pair in slow.basis)


@pytest.mark.parametrize("seed", range(3))
def test_every_gpu_in_another_order_gets_the_figures_of_each_pair(seed):
    """The matrix set in whole columns (every GPU ranked, one link per pair) is the one set pair by pair."""
    topology = _random(13, seed)
    index = topology.gpu_indices[::-1]
    fast, slow = _both(topology, index)
    assert fast.weight == slow.weight and fast.measured_pairs == slow.measured_pairs > 0


def test_a_pair_the_topology_does_not_link_is_refused_in_either_way():
    topology = two_socket_4()
    topology.links = [link for link in topology.links if (link.a, link.b) != (1, 3)]
    message = "the topology has no link between GPU 1 and GPU 3; cannot rank groups"
    for weigh in (_by_class, _pair_by_pair):
        with pytest.raises(InputError, match=message):
            weigh(topology, topology.gpu_indices, LinkLookup(topology), {g.index: g for g in topology.gpus})


def test_a_rack_is_figured_per_class_and_the_problem_says_so():
    topology = nvl72()
    problem = Problem.from_topology(topology, topology.gpu_indices)
    assert isinstance(problem.links, LinkLookup) and problem.uniform
    link = topology.link(0, 5)
    assert problem.weight[0][5] == figure(link, topology.gpu(0), topology.gpu(5), 18)[0]


def test_the_figures_of_small_machines_come_out_as_before():
    for topology in (cube_mesh_8(), pcie_8(), two_socket_4()):
        gpus = {g.index: g for g in topology.gpus}
        weights = pair_weights(topology, topology.gpu_indices, LinkLookup(topology), gpus, 0)
        assert weights.weight == _pair_by_pair(topology, topology.gpu_indices, topology.link_map(), gpus).weight


def test_measured_figures_closer_than_their_noise_rank_by_one_figure():
    """Classes from the fastest down, each within the noise of its fastest figure; an estimate (exact)
    gives its class its figure, and two estimates never share a class."""
    from gputopo.analysis.recommend.weights import ranking_figures

    assert ranking_figures({4520: 0.05, 4490: 0.05, 4000: 0.05}, set()) == {4520: 4520, 4490: 4520, 4000: 4000}
    assert ranking_figures({4520: 0.05}, {4490}) == {4520: 4490}  # a measurement near an estimate ties it
    assert ranking_figures({4400: 0.05}, {4500, 4450}) == {4400: 4450}
    assert ranking_figures({4520: 0.0, 4490: 0.0}, set()) == {4520: 4520, 4490: 4490}  # no noise: exact
    # a chain: 5000 anchors [4750, 5000]; 4740 starts the next class
    assert ranking_figures({5000: 0.05, 4760: 0.05, 4740: 0.05}, set()) == {5000: 5000, 4760: 5000, 4740: 4740}


def test_the_search_sees_the_class_figures_and_keeps_the_measured_ones():
    topology = two_socket_4()
    topology.link(0, 1).measured = Measurement(45.2, 45.2, method="bench-p2p")
    topology.link(2, 3).measured = Measurement(44.9, 44.9, method="bench-p2p")
    for weigh in (_by_class, _pair_by_pair):
        weights = weigh(topology, topology.gpu_indices, topology.link_map(), {g.index: g for g in topology.gpus})
        assert weights.weight[0][1] == weights.weight[2][3] == 4520
        assert weights.measured[(3, 2)] == (4490, 0.05) and weights.measured_pairs == 2


def _node_box(settings=None):
    """Four Gen4 GPUs of one NUMA node: pairs 0,1 and 2,3 behind PCIe switches, NODE between them."""
    from linktable import GEN4_X16, link_table

    from gputopo.model import NcclView

    table = [["X", "PIX", "NODE", "NODE"], ["PIX", "X", "NODE", "NODE"], ["NODE", "NODE", "X", "PIX"],
             ["NODE", "NODE", "PIX", "X"]]
    topo = link_table(table, numa=0, gpu=GEN4_X16)
    if settings is not None:
        topo.nccl = NcclView(settings=settings)
    return topo


def test_a_node_pair_is_figured_as_nccl_connects_it_by_default_through_host_memory():
    """NCCL's default P2P level stops at PXB: a NODE hop of the ring is an SHM hop, so the pair's
    figure is what copies through host memory get, not P2P's; an NCCL log that sets
    NCCL_P2P_LEVEL=SYS makes it P2P again."""
    from gputopo.analysis.expect.bandwidth import estimate_link

    topo = _node_box()
    node, pix = topo.link(0, 2), topo.link(0, 1)
    p2p_node = round(estimate_link(node, topo.gpu(0), topo.gpu(2)).gbps * 100)
    by_default = Problem.from_topology(topo, [0, 1, 2, 3])
    assert by_default.weight[0][2] < p2p_node and by_default.weight[0][1] == round(estimate_link(pix, topo.gpu(0), topo.gpu(1)).gbps * 100)
    level_sys = Problem.from_topology(_node_box({"NCCL_P2P_LEVEL": "SYS"}), [0, 1, 2, 3])
    assert level_sys.weight[0][2] == p2p_node
