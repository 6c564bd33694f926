"""NVLink edges from where each GPU's links end: one edge per far end, GPU pairs once, NVSwitches by
bus id or as the one fabric node, nothing for ends this topology does not hold."""

from __future__ import annotations

from linktable import cube_mesh_8, nvswitch

from gputopo.model import Gpu, Topology
from gputopo.model.fabric import (
    BRIDGE,
    GPU,
    NVSWITCH,
    NVSWITCH_FABRIC,
    Fabric,
    FabricEdge,
    FabricNode,
)
from gputopo.sources.host.fabric_nvlink import (
    REMOTE_GPU,
    REMOTE_SWITCH,
    LinkEnd,
    add_nvlink_edges,
    add_pair_word_edges,
)


def _topology(*bus_ids: str | None) -> Topology:
    return Topology(gpus=[Gpu(index=i, pci_bus_id=bus) for i, bus in enumerate(bus_ids)])


def test_a_gpu_pair_is_one_edge_whose_count_is_the_larger_of_the_two_views():
    topo = _topology("0000:01:00.0", "0000:02:00.0")
    add_nvlink_edges(topo, {0: [LinkEnd(REMOTE_GPU, "0000:02:00.0")] * 2,
                            1: [LinkEnd(REMOTE_GPU, "0000:01:00.0")] * 2 + [LinkEnd(REMOTE_GPU, "0000:01:00.0", active=False)]})
    assert topo.fabric.edges == [FabricEdge("pci:0000:01:00.0", "pci:0000:02:00.0", "nvlink", count=3, active=2)]
    assert {node.kind for node in topo.fabric.nodes} == {GPU} and topo.fabric.nvlink_word(0, 1) == "NV2"


def test_switches_by_bus_id_or_the_fabric_node_and_ends_outside_the_topology_make_no_edge():
    topo = _topology("0000:01:00.0", None)
    add_nvlink_edges(topo, {
        0: [LinkEnd(REMOTE_SWITCH, "0000:c0:00.0"), LinkEnd(REMOTE_SWITCH, "0000:c0:00.0"),
            LinkEnd(REMOTE_GPU, "0000:99:00.0"), LinkEnd("cpu", None)],  # a GPU not listed; POWER9's CPU
        1: [LinkEnd(REMOTE_SWITCH, None, active=None, links=2), LinkEnd(REMOTE_SWITCH, "0000:00:00.0", active=None)],
    })
    fabric = topo.fabric
    assert {node.id: node.kind for node in fabric.nodes} == {
        "pci:0000:01:00.0": GPU, "pci:0000:c0:00.0": NVSWITCH, "gpu:1": GPU, NVSWITCH_FABRIC: NVSWITCH}
    assert fabric.edges == [FabricEdge("pci:0000:01:00.0", "pci:0000:c0:00.0", "nvlink", 2, 2),
                            FabricEdge("gpu:1", NVSWITCH_FABRIC, "nvlink", 3, None)]
    assert fabric.gpu_nvlinks(0, 1) == (2, True)


def test_edges_join_the_tree_a_source_already_read_and_hosts_repeating_bus_ids_keep_apart():
    topo = _topology("0000:01:00.0", "0000:01:00.0")  # two trays of one domain, one bus id
    topo.fabric = Fabric([FabricNode("pci:0000:01:00.0", GPU, parent="pci:0000:00:01.0", bdf="0000:01:00.0", gpu=0),
                          FabricNode("pci:0000:c0:00.0", BRIDGE, bdf="0000:c0:00.0")])
    add_nvlink_edges(topo, {0: [LinkEnd(REMOTE_SWITCH, "0000:c0:00.0")], 1: [LinkEnd(REMOTE_SWITCH, "0000:c0:00.0")]})
    assert topo.fabric.gpu_node(1).id == "gpu:1" and topo.fabric.node("pci:0000:c0:00.0").kind == NVSWITCH
    assert topo.fabric.gpu_node(0).parent == "pci:0000:00:01.0" and topo.fabric.nvlink_word(0, 1) == "NV1"


def test_no_nvlink_leaves_the_fabric_as_it_was():
    topo = _topology("0000:01:00.0")
    add_nvlink_edges(topo, {0: []})
    assert topo.fabric is None


def _placed(topo: Topology) -> Topology:
    """``topo`` with bus ids and a fabric holding its GPUs (as a gathered archive's sysfs gives)."""
    for gpu in topo.gpus:
        gpu.pci_bus_id = f"0000:{0x10 + gpu.index:02x}:00.0"
    topo.fabric = Fabric([FabricNode(f"pci:{g.pci_bus_id}", GPU, parent="numa:0", bdf=g.pci_bus_id, gpu=g.index)
                          for g in topo.gpus])
    return topo


def test_pair_words_on_a_tree_already_read_give_edges_that_give_the_words_back():
    mesh = _placed(cube_mesh_8())
    add_pair_word_edges(mesh)
    assert len(mesh.fabric.edges) == 16 and {e.active for e in mesh.fabric.edges} == {None}
    switched = _placed(nvswitch(8, "NV18", "4.0"))
    for other in range(8):
        if other != 5:
            switched.link(5, other).type, switched.link(5, other).nvlink_count = "NV16", 16  # two links down
    add_pair_word_edges(switched)
    assert len(switched.fabric.edges) == 8 and switched.fabric.nvswitch_links("pci:0000:15:00.0") == 16
    for topo in (mesh, switched):
        for link in topo.links:
            assert (topo.fabric.gpu_nvlinks(link.a, link.b) or (0, False)) == (link.nvlink_count, bool(link.nvswitch))


def test_pair_words_alone_or_that_cannot_tell_the_switch_make_no_edge():
    alone = nvswitch(4, "NV12", "3.0")
    add_pair_word_edges(alone)
    assert alone.fabric is None
    unknown = _placed(nvswitch(4, "NV12", "3.0"))
    for link in unknown.links:
        link.nvswitch = None  # nvidia-smi text that cannot tell NVSwitch from direct links
    add_pair_word_edges(unknown)
    assert unknown.fabric.edges == []
