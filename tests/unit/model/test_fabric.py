"""The fabric graph: containment, the GPUs under a hop, and the pair words derived from the tree."""

from __future__ import annotations

from gputopo.model import Topology
from gputopo.model.fabric import BRIDGE, GPU, HOST_BRIDGE, NUMA, ROOT_PORT, Fabric, FabricEdge, FabricNode


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
