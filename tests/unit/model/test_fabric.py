"""The fabric graph: containment, the GPUs under a hop, and the pair words derived from the tree."""

from __future__ import annotations

import time

from gputopo.model import Topology
from gputopo.model.fabric import (
    BRIDGE,
    GPU,
    HOST_BRIDGE,
    MAX_FABRIC_DEPTH,
    NUMA,
    NVLINK,
    NVSWITCH,
    NVSWITCH_FABRIC,
    ROOT_PORT,
    Fabric,
    FabricEdge,
    FabricNode,
)


def _server() -> Fabric:
    """Two NUMA nodes; under node 0 one host bridge, a root port, a PLX switch (up, two down) with
    GPU 0 and 1, and a second root port with GPU 2; under node 1 GPU 3 on its own host bridge."""
    f = Fabric()
    f.add(FabricNode("numa:0", NUMA, numa_node=0))
    f.add(FabricNode("numa:1", NUMA, numa_node=1))
    f.add(FabricNode("host:pci0000:00", HOST_BRIDGE, parent="numa:0"))
    f.add(FabricNode("pci:0000:00:01.0", ROOT_PORT, parent="host:pci0000:00", link_width_current=16, link_width_max=16))
    f.add(FabricNode("pci:0000:01:00.0", BRIDGE, parent="pci:0000:00:01.0", link_width_current=8, link_width_max=16))
    f.add(FabricNode("pci:0000:02:08.0", BRIDGE, parent="pci:0000:01:00.0"))
    f.add(FabricNode("pci:0000:02:10.0", BRIDGE, parent="pci:0000:01:00.0"))
    f.add(FabricNode("pci:0000:03:00.0", GPU, parent="pci:0000:02:08.0", gpu=0))
    f.add(FabricNode("pci:0000:04:00.0", GPU, parent="pci:0000:02:10.0", gpu=1))
    f.add(FabricNode("pci:0000:00:03.0", ROOT_PORT, parent="host:pci0000:00"))
    f.add(FabricNode("pci:0000:05:00.0", GPU, parent="pci:0000:00:03.0", gpu=2))
    f.add(FabricNode("host:pci0000:80", HOST_BRIDGE, parent="numa:1"))
    f.add(FabricNode("pci:0000:80:01.0", ROOT_PORT, parent="host:pci0000:80"))
    f.add(FabricNode("pci:0000:81:00.0", GPU, parent="pci:0000:80:01.0", gpu=3))
    f.edges.append(FabricEdge("pci:0000:03:00.0", "pci:0000:04:00.0", "nvlink", count=2))
    return f


def test_pair_words_are_derived_from_where_two_gpus_meet():
    f = _server()
    gpu = {n.gpu: n.id for n in f.nodes if n.kind == GPU}
    assert f.path_word(gpu[0], gpu[1]) == "PIX"  # one switch between them
    assert f.path_word(gpu[0], gpu[2]) == "PHB"  # two root ports of one host bridge
    assert f.path_word(gpu[0], gpu[3]) == "SYS"  # NUMA nodes apart
    assert f.nvlink_count(gpu[0], gpu[1]) == 2 and f.nvlink_count(gpu[0], gpu[2]) == 0


def test_a_hop_names_every_gpu_whose_traffic_crosses_it():
    f = _server()
    assert f.gpus_below("pci:0000:01:00.0") == [0, 1]  # the switch's x8 uplink carries both
    assert f.gpus_below("host:pci0000:00") == [0, 1, 2] and f.gpus_below("numa:1") == [3]
    assert [n.id for n in f.ancestors("pci:0000:03:00.0")][:2] == ["pci:0000:02:08.0", "pci:0000:01:00.0"]


def test_unknown_places_give_no_word_and_a_loop_ends():
    f = _server()
    f.add(FabricNode("gpu:9", GPU, gpu=9))  # a GPU whose place the source does not give
    assert f.path_word("gpu:9", "pci:0000:03:00.0") is None
    f.add(FabricNode("x", BRIDGE, parent="y"))
    f.add(FabricNode("y", BRIDGE, parent="x"))
    assert len(f.ancestors("x")) <= len(f.nodes) + 1 and f.pci_path("x") is None


def test_add_fills_in_a_known_node_without_replacing_what_it_says():
    f = Fabric()
    f.add(FabricNode("pci:0000:01:00.0", BRIDGE, link_width_current=8))
    f.add(FabricNode("pci:0000:01:00.0", BRIDGE, link_width_current=16, acs_control=0x1D))
    (node,) = f.nodes
    assert node.link_width_current == 8 and node.acs_control == 0x1D


def test_a_snapshot_carries_the_fabric_and_an_old_one_reads_without_it():
    topo = Topology(fabric=_server())
    again = Topology.from_dict(topo.to_dict())
    assert again.fabric is not None and again.fabric.gpus_below("pci:0000:01:00.0") == [0, 1]
    assert again.fabric.edges == topo.fabric.edges
    old = topo.to_dict()
    del old["fabric"]
    assert Topology.from_dict(old).fabric is None


def _switched(n: int, links: int = 18) -> Fabric:
    """``n`` GPUs known by index, each with ``links`` NVLinks to the one NVSwitch fabric node (a
    GB200 NVL72-style domain where the switches are not told apart)."""
    f = Fabric()
    f.add(FabricNode(NVSWITCH_FABRIC, NVSWITCH))
    for i in range(n):
        f.add(FabricNode(f"gpu:{i}", GPU, gpu=i))
        f.edges.append(FabricEdge(f"gpu:{i}", NVSWITCH_FABRIC, NVLINK, count=links, active=links))
    return f


def test_pairs_through_nvswitch_get_the_fewer_of_their_switch_links_as_nccl_counts_them():
    f = _switched(4)
    f.edges[1] = FabricEdge("gpu:1", NVSWITCH_FABRIC, NVLINK, count=18, active=16)  # two links down
    assert f.nvlink_count("gpu:0", "gpu:1") == 16 and f.nvlink_count("gpu:0", "gpu:2") == 18
    assert f.gpu_nvlinks(0, 1) == (16, True) and f.nvlink_word(2, 3) == "NV18"
    assert f.nvswitch_links("gpu:1") == 16 and f.nvswitches_of("gpu:1") == [NVSWITCH_FABRIC]
    assert f.gpu_nvlinks(0, 9) is None and f.nvlink_word(0, 9) is None
    f.edges.append(FabricEdge("gpu:2", "gpu:3", NVLINK, count=4))  # direct links win over the switch path
    assert f.gpu_nvlinks(2, 3) == (4, False) and f.gpu_nvlinks(3, 2) == (4, False)


def test_several_switches_add_up_and_a_pcie_only_gpu_has_no_nvlink_word():
    f = _server()
    for k in range(3):
        f.add(FabricNode(f"pci:0000:c{k}:00.0", NVSWITCH, bdf=f"0000:c{k}:00.0"))
        for gpu in ("pci:0000:03:00.0", "pci:0000:05:00.0"):
            f.edges.append(FabricEdge(gpu, f"pci:0000:c{k}:00.0", NVLINK, count=2, active=None))
    assert f.gpu_nvlinks(0, 2) == (6, True) and f.gpu_nvlinks(0, 1) == (2, False)
    assert f.nvlink_word(1, 2) is None and f.gpu_nvlinks(3, 0) == (0, False)


def test_a_576_gpu_domain_is_577_nodes_and_576_edges_and_round_trips():
    f = _switched(576)
    assert (len(f.nodes), len(f.edges)) == (577, 576)
    assert f.nvlink_word(0, 575) == "NV18" and f.gpu_node(575).id == "gpu:575"
    again = Topology.from_dict(Topology(fabric=f).to_dict()).fabric
    assert again == f and again.nvlink_word(17, 300) == "NV18"


def test_a_loop_of_parents_ends_where_it_closes_whatever_else_the_fabric_holds():
    """(A snapshot's fabric is input: a loop of two bridges beside 100,000 other nodes walked the loop
    100,001 times for every GPU or NIC below it, so 4,000 NICs under one loop took minutes.)"""
    f = _server()
    f.add(FabricNode("x", BRIDGE, parent="y"))
    f.add(FabricNode("y", BRIDGE, parent="x"))
    f.add(FabricNode("leaf", GPU, parent="x", gpu=7))
    f.nodes += [FabricNode(f"filler{k}", BRIDGE) for k in range(100_000)]
    assert [n.id for n in f.ancestors("leaf")] == ["x", "y"] and f.pci_path("leaf") is None
    assert [n.id for n in f.ancestors("x")] == ["y"]


def test_a_chain_of_parents_deeper_than_any_machines_is_cut():
    f = Fabric()
    f.add(FabricNode("b0", BRIDGE))
    for k in range(1, 100_000):
        f.add(FabricNode(f"b{k}", BRIDGE, parent=f"b{k - 1}"))
    assert len(f.ancestors("b99999")) == MAX_FABRIC_DEPTH + 1  # deeper than any tree: past the cut


def test_adding_nodes_one_by_one_is_linear():
    """(Each ``add`` rebuilt the whole id lookup: an NCCL XML of 20,000 ``<pci>`` elements took 19 s,
    its 4 MB limit's 160,000 about half an hour.)"""
    f = Fabric()
    started = time.perf_counter()
    for k in range(200_000):
        f.add(FabricNode(f"pci:{k}", BRIDGE))
    f.add(FabricNode("pci:5", BRIDGE, link_width_current=4))
    assert time.perf_counter() - started < 10 and len(f.nodes) == 200_000
    assert f.node("pci:5").link_width_current == 4 and f.node("pci:199999") is f.nodes[-1]


def test_looking_gpus_up_between_adds_is_linear():
    """(Each node added made the next ``gpu_node`` rebuild its lookup: an NCCL XML whose GPU's
    ``<nvlink>`` elements alternate a new switch and a GPU, 1.9 MB of them, took 5 s in
    ``add_nvlink_edges``, growing as the square.)"""
    f = Fabric([FabricNode("gpu:0", GPU, gpu=0)])
    started = time.perf_counter()
    for k in range(100_000):
        f.add(FabricNode(f"pci:{k}", NVSWITCH))
        assert f.gpu_node(0).id == "gpu:0"
    f.add(FabricNode("gpu:1", GPU, gpu=1))
    f.add(FabricNode("gpu:1b", GPU, gpu=1))  # a second node of one GPU: the first is its node
    assert f.gpu_node(1).id == "gpu:1" and time.perf_counter() - started < 10
