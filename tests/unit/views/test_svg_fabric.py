"""The drawing's tree from the fabric graph (issue 30): where the topology has a fabric, each box is a
node of it (``data-fabric``) holding exactly the GPUs below that node (``data-gpus``, and in the
geometry); a link trained down is labelled where it is; without a fabric the switches are inferred
from PIX words as before and the drawing says so.

Fabrics come from real captures: the PCIe tree of an ``lspci -tv`` (tests/lspci_trees.py: two levels
of switches and a GPU board's own above two GPUs and a ConnectX-6) laid out as sysfs, and the gathered
archive of a real H200 virtual machine (its GPU on the host bridge, no root port)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from conftest import OWN_FIXTURES
from doctor_trees import (
    FakeHost,
    real_acs_controls,
    real_links,
    two_gpus_under_root_ports,
)
from lspci_trees import starship_topology
from walk_counting import WalkCountingList

from gputopo.model import Fabric, FabricNode, Gpu, Link, Nic, Topology
from gputopo.model.fabric import GPU, HOST_BRIDGE, NUMA, ROOT_PORT, SOCKET
from gputopo.sources.host.fabric_sysfs import sysfs_fabric
from gputopo.sources.registry import read_file
from gputopo.views.svg import render_svg
from gputopo.views.svg_fabric import FABRIC_CAPTION, INFERRED_CAPTION, link_hop

NS = "{http://www.w3.org/2000/svg}"
H200_GATHER = OWN_FIXTURES / "hardware" / "2026-11-26-h200-firecracker-run3" / "gather.tar.gz"
# The capture's tree, as the drawing must nest it: each drawn node and the GPUs inside it.
STARSHIP_BOXES = {
    "numa:0": [0, 1], "pci:0000:40:01.1": [0, 1],  # NUMA node, root port
    "pci:0000:43:00.0": [0, 1],  # the first switch: both GPUs and the NIC below its ports
    "pci:0000:46:00.0": [0], "pci:0000:48:00.0": [0],  # second-level switch, then the GPU board's own
    "pci:0000:4c:00.0": [1], "pci:0000:4e:00.0": [1],
}


def _starship(tmp_path, links=None, with_fabric=True) -> tuple[Topology, Fabric]:
    return starship_topology(tmp_path, links, with_fabric)


def _rect(element: ET.Element) -> tuple[float, float, float, float]:
    return tuple(float(element.attrib[k]) for k in ("x", "y", "width", "height"))  # type: ignore[return-value]


def _inside(inner, outer) -> bool:
    return (outer[0] <= inner[0] and inner[0] + inner[2] <= outer[0] + outer[2]
            and outer[1] <= inner[1] and inner[1] + inner[3] <= outer[1] + outer[3])


def _drawn(svg: str) -> tuple[dict, dict, dict, ET.Element]:
    """(fabric boxes: id -> (GPUs, rect, element), GPU rects, NIC rects, the root)."""
    root = ET.fromstring(svg)
    groups = list(root.iter(NS + "g"))
    boxes = {g.attrib["data-fabric"]: ([int(x) for x in g.attrib["data-gpus"].split(",") if x], _rect(g.find(NS + "rect")), g)
             for g in groups if "data-fabric" in g.attrib}
    gpus = {int(g.attrib["data-gpu"]): _rect(g.find(NS + "rect")) for g in groups if "data-gpu" in g.attrib}
    nics = {g.attrib["data-nic"]: _rect(g.find(NS + "rect")) for g in groups if "data-nic" in g.attrib}
    return boxes, gpus, nics, root


def _caption(root: ET.Element) -> ET.Element:
    (caption,) = [t for t in root.iter(NS + "text") if t.attrib.get("class") == "tree-source"]
    return caption


def test_two_levels_of_switches_are_drawn_as_the_capture_nests_them(tmp_path):
    topology, fabric = _starship(tmp_path)
    boxes, gpus, nics, root = _drawn(render_svg(topology))
    assert {node: found for node, (found, _, _) in boxes.items()} == STARSHIP_BOXES
    for node, (found, rect, group) in boxes.items():
        assert found == fabric.gpus_below(node)
        assert {g for g, box in gpus.items() if _inside(box, rect)} == set(found)  # the geometry says the same
    kinds = {node: group.attrib["class"] for node, (_, _, group) in boxes.items()}
    assert kinds["pci:0000:40:01.1"] == "box box-root"
    assert [n for n, k in kinds.items() if k == "box box-switch"] == [
        "pci:0000:43:00.0", "pci:0000:46:00.0", "pci:0000:48:00.0", "pci:0000:4c:00.0", "pci:0000:4e:00.0"]
    # The NIC where it sits: below the first switch's own port, beside the switches of the GPUs.
    holding_nic = {n for n, (_, rect, _) in boxes.items() if _inside(nics["mlx5_0"], rect)}
    assert holding_nic == {"numa:0", "pci:0000:40:01.1", "pci:0000:43:00.0"}
    caption = _caption(root)
    assert (caption.attrib["data-tree"], caption.find(NS + "title").tail) == ("fabric", FABRIC_CAPTION)


def test_a_fault_on_a_pair_outlines_the_switch_where_its_path_meets_however_deep_its_gpus_sit(tmp_path):
    """doctor's ACS problem on GPUs 0 and 1, each two switches below the first: the pair's path turns
    (or, with ACS, fails to turn) at the first switch, which holds neither GPU directly: that switch is
    outlined, and not the inner ones, which each hold one GPU of the pair."""
    topology, _ = _starship(tmp_path)
    topology.link(0, 1).health = ["acs"]
    boxes, _, _, _ = _drawn(render_svg(topology))
    at_fault = {node for node, (_, _, group) in boxes.items() if "fault" in group.attrib["class"].split()}
    assert at_fault == {"pci:0000:43:00.0"}
    assert "GPU 0 - GPU 1: acs" in boxes["pci:0000:43:00.0"][2].find(NS + "title").text


def test_pix_words_alone_draw_no_switch_where_the_fabric_shows_five(tmp_path):
    """The two GPUs are PXB to each other and to the NIC: from those words nothing says which
    switches there are, so the inferred drawing has none, and says its switches are inferred."""
    topology, _ = _starship(tmp_path, with_fabric=False)
    assert {lk.type for lk in topology.links} == {nl.type for nl in topology.nic_links} == {"PXB"}
    svg = render_svg(topology)
    boxes, _, _, root = _drawn(svg)
    assert boxes == {} and "box-switch" not in svg and "box-root" not in svg
    caption = _caption(root)
    assert (caption.attrib["data-tree"], caption.find(NS + "title").tail) == ("inferred", INFERRED_CAPTION)
    assert "no PCIe tree" in caption.find(NS + "title").text


def test_a_link_trained_down_is_labelled_on_what_sits_below_it(tmp_path):
    links = real_links()  # the RTX 3090's reading (2.5GT/s x8 of 16GT/s x16) and a root port's
    topology, _ = _starship(tmp_path, {"0000:50:00.0": links["gpu-x8"], "0000:46:00.0": links["bridge-x8"]})
    boxes, _, _, root = _drawn(render_svg(topology))
    hops = {g.attrib.get("data-fabric") or "gpu " + g.attrib["data-gpu"]: g.attrib["data-hop"]
            for g in root.iter(NS + "g") if "data-hop" in g.attrib}
    assert hops == {"pci:0000:46:00.0": "x8 of x16 · 2.5 of 16 GT/s", "gpu 1": "x8 of x16 · 2.5 of 16 GT/s"}
    switch = boxes["pci:0000:46:00.0"][2]
    assert switch.find(NS + "rect").attrib["stroke"] == "#e8710a"
    assert "PCIe link 44:01.0 - 46:00.0 trained to x8 of x16" in switch.find(NS + "title").text
    legend = "".join(root.find(f"{NS}g[@class='legend']").itertext())
    assert "trained below what both its ends can do" in legend


def test_a_links_best_is_the_lower_of_its_two_ends():
    port = FabricNode("pci:0000:40:01.1", ROOT_PORT, bdf="0000:40:01.1", link_gts_current=16.0, link_gts_max=16.0,
                      link_width_current=8, link_width_max=16)
    card_x8 = FabricNode("pci:0000:41:00.0", GPU, bdf="0000:41:00.0", gpu=0, link_gts_current=16.0, link_gts_max=16.0,
                         link_width_current=8, link_width_max=8)
    assert link_hop(card_x8, port) is None  # an x8 card in an x16 slot: its link at its best
    card_x16 = FabricNode("pci:0000:41:00.0", GPU, gpu=0, link_width_max=16)  # (its current read at the port)
    assert link_hop(card_x16, port).words == "x8 of x16" and link_hop(card_x16, port).narrow
    idle = FabricNode("gpu:0", GPU, gpu=0, link_gts_current=2.5, link_gts_max=16.0, link_width_current=16, link_width_max=16)
    hop = link_hop(idle, None)
    assert (hop.words, hop.narrow) == ("2.5 of 16 GT/s", False) and "idle" in hop.detail
    empty = FabricNode("gpu:0", GPU, gpu=0, link_width_current=0, link_width_max=16)  # x0: no link trained
    assert link_hop(empty, None) is None


def test_a_real_gathered_archive_draws_its_gpu_on_the_host_bridge():
    """The H200 virtual machine's GPU sits on the host bridge (no root port): drawn straight in its
    NUMA node, with no root port box made up."""
    topology = read_file(str(H200_GATHER))
    assert topology.fabric is not None
    boxes, gpus, _, root = _drawn(render_svg(topology))
    assert {node: found for node, (found, _, _) in boxes.items()} == {"numa:0": [0]}
    assert _inside(gpus[0], boxes["numa:0"][1])
    assert _caption(root).attrib["data-tree"] == "fabric"


def _two_socket_fabric() -> Fabric:
    fabric = Fabric()
    for socket, numas in ((0, (0, 1)), (1, (2,))):
        fabric.add(FabricNode(f"socket:{socket}", SOCKET))
        for numa in numas:
            fabric.add(FabricNode(f"numa:{numa}", NUMA, parent=f"socket:{socket}", numa_node=numa))
            bus = f"{0x40 * numa:02x}"
            fabric.add(FabricNode(f"host:pci0000:{bus}", HOST_BRIDGE, parent=f"numa:{numa}", numa_node=numa))
            port = f"0000:{bus}:01.1"
            fabric.add(FabricNode(f"pci:{port}", ROOT_PORT, parent=f"host:pci0000:{bus}", bdf=port))
            fabric.add(FabricNode(f"pci:0000:{int(bus, 16) + 1:02x}:00.0", GPU, parent=f"pci:{port}",
                                  bdf=f"0000:{int(bus, 16) + 1:02x}:00.0", gpu=numa))
    return fabric


def test_a_socket_is_a_box_where_it_holds_several_numa_nodes():
    topology = Topology(source="test", gpus=[Gpu(index=k) for k in range(3)],
                        links=[Link(0, 1, "NODE"), Link(0, 2, "SYS"), Link(1, 2, "SYS")], fabric=_two_socket_fabric())
    boxes, _, _, _ = _drawn(render_svg(topology))
    assert {node: found for node, (found, _, _) in boxes.items() if not node.startswith("pci:")} == {
        "socket:0": [0, 1], "numa:0": [0], "numa:1": [1], "numa:2": [2]}  # socket 1: its one node says it
    assert boxes["numa:2"][2].find(NS + "text").text.startswith("socket 1 › NUMA node 2")


def test_a_fabric_that_misses_a_gpu_or_loops_is_not_drawn(tmp_path):
    topology, fabric = _starship(tmp_path)
    fabric.nodes = [node for node in fabric.nodes if node.gpu != 1]
    boxes, _, _, root = _drawn(render_svg(topology))
    assert boxes == {} and _caption(root).attrib["data-tree"] == "inferred"
    assert "places 1 of the 2 GPUs" in _caption(root).find(NS + "title").text
    looped = _two_socket_fabric()
    looped.node("socket:1").parent = "pci:0000:81:00.0"  # socket 1 below its own GPU
    topology = Topology(source="test", gpus=[Gpu(index=k) for k in range(3)], fabric=looped)
    boxes, gpus, _, root = _drawn(render_svg(topology))
    assert sorted(gpus) == [0, 1, 2] and _caption(root).attrib["data-tree"] == "inferred"


def test_names_in_a_hostile_snapshots_fabric_are_text():
    fabric = _two_socket_fabric()
    odd = '<script>alert(1)</script>"&'
    fabric.nodes.append(FabricNode(f"pci:{odd}", GPU, parent="pci:0000:40:01.1", bdf=odd, gpu=3,
                                   link_width_current=1, link_width_max=16))
    fabric.nodes.append(FabricNode(f"pci:{odd}x", ROOT_PORT, parent=f"host:{odd}", bdf=odd))
    fabric.nodes.append(FabricNode(f"host:{odd}", HOST_BRIDGE, parent="numa:2"))
    fabric.node("pci:0000:81:00.0").parent = f"pci:{odd}x"
    topology = Topology(source="test", gpus=[Gpu(index=k) for k in (0, 1, 2, 3)], fabric=fabric)
    svg = render_svg(topology)
    root = ET.fromstring(svg)
    assert not any(e.tag.endswith("script") for e in root.iter())
    boxes, gpus, _, _ = _drawn(svg)
    assert f"pci:{odd}x" in boxes and boxes[f"pci:{odd}x"][0] == [2] and sorted(gpus) == [0, 1, 2, 3]
    hop = next(g for g in root.iter(NS + "g") if g.attrib.get("data-gpu") == "3")
    assert hop.attrib["data-hop"] == "x1 of x16" and odd in hop.find(NS + "title").text


def test_a_nic_the_tree_lacks_sits_in_its_nearest_gpus_numa_node(tmp_path):
    topology, fabric = _starship(tmp_path)
    fabric.nodes = [node for node in fabric.nodes if node.kind != "nic"]
    boxes, _, nics, _ = _drawn(render_svg(topology))
    assert {n for n, (_, rect, _) in boxes.items() if _inside(nics["mlx5_0"], rect)} == {"numa:0"}


def test_a_tree_deeper_than_any_machines_is_not_drawn():
    """(A snapshot's fabric is input: a chain of bridges as long as it likes would nest as many boxes.)"""
    fabric = _two_socket_fabric()
    parent = "pci:0000:40:01.1"
    for k in range(200):
        parent = fabric.add(FabricNode(f"pci:chain{k}", "bridge", parent=parent, bdf=f"chain{k}")).id
    fabric.node("pci:0000:41:00.0").parent = parent
    topology = Topology(source="test", gpus=[Gpu(index=k) for k in range(3)], fabric=fabric)
    _, gpus, _, root = _drawn(render_svg(topology))
    assert sorted(gpus) == [0, 1, 2] and "levels deep" in _caption(root).find(NS + "title").text


def test_a_gpu_alone_on_its_root_port_is_in_that_ports_box(tmp_path):
    """Two GPUs each below its own root port (where NVIDIA/nccl#2079's GPUs were: doctor_trees),
    the second's link trained at x8 of x16 (a real RTX 3090 reading)."""
    two_gpus_under_root_ports(tmp_path, real_acs_controls()["off"], gpu_link=None)
    host = FakeHost(tmp_path)
    host.device(["pci0000:60", "0000:60:01.1", "0000:61:00.0"], gpu=True, link=real_links()["gpu-x8"])
    gpus = [Gpu(index=0, pci_bus_id="0000:41:00.0", numa_node=0, socket=0),
            Gpu(index=1, pci_bus_id="0000:61:00.0", numa_node=0, socket=0)]
    topology = Topology(source="test", gpus=gpus, links=[Link(0, 1, "NODE")], fabric=sysfs_fabric(gpus, [], tmp_path))
    boxes, _, _, root = _drawn(render_svg(topology))
    assert {node: found for node, (found, _, _) in boxes.items()} == {
        "numa:0": [0, 1], "pci:0000:40:01.1": [0], "pci:0000:60:01.1": [1]}
    assert {g.attrib["data-gpu"]: g.attrib.get("data-hop") for g in root.iter(NS + "g") if "data-gpu" in g.attrib} == {
        "0": None, "1": "x8 of x16 · 2.5 of 16 GT/s"}


def test_a_nic_in_a_loop_of_the_tree_is_still_drawn(tmp_path):
    topology, fabric = _starship(tmp_path)
    fabric.node("pci:0000:44:00.0").parent = "pci:0000:45:00.0"  # the NIC's port below the NIC itself
    _, _, nics, root = _drawn(render_svg(topology))
    assert list(nics) == ["mlx5_0"] and _caption(root).attrib["data-tree"] == "fabric"


class _CountedNodes(WalkCountingList):
    """A fabric's node list that counts the walks over it."""


def test_many_numa_nodes_cost_one_walk_of_the_fabric_not_one_each():
    """(A snapshot's fabric is input: each NUMA node's box walked the whole fabric to find its GPUs,
    so 2,000 NICs each in its own NUMA node beside 40,000 other nodes took 7 s, 64 MiB of them hours.)"""
    fabric = _two_socket_fabric()
    nics = []
    for k in range(300):
        fabric.add(FabricNode(f"numa:{k + 10}", NUMA, numa_node=k + 10))
        fabric.add(FabricNode(f"host:{k}", HOST_BRIDGE, parent=f"numa:{k + 10}"))
        fabric.add(FabricNode(f"pci:nic{k}", "nic", parent=f"host:{k}", nic=f"n{k}"))
        nics.append(Nic(name=f"n{k}"))
    fabric.nodes = _CountedNodes(fabric.nodes)
    topology = Topology(source="test", gpus=[Gpu(index=k) for k in range(3)], nics=nics, fabric=fabric)
    boxes, gpus, drawn_nics, root = _drawn(render_svg(topology))
    assert _caption(root).attrib["data-tree"] == "fabric" and len(drawn_nics) == 300 and sorted(gpus) == [0, 1, 2]
    assert boxes["numa:0"][0] == [0] and boxes["numa:10"][0] == []
    assert _CountedNodes.walks < 50


def test_socket_ids_of_odd_digits_are_drawn_not_a_traceback():
    """(A snapshot's socket node ``socket:`` + 5,000 digits, or ``socket:²``, made ``int`` raise while
    the boxes were sorted: report and --svg ended in a ValueError traceback.)"""
    for odd in ("1" * 5000, "\u00b2"):
        fabric = _two_socket_fabric()
        fabric.nodes = [FabricNode(f"socket:{odd}", SOCKET) if n.id == "socket:1" else n for n in fabric.nodes]
        for node in fabric.nodes:
            if node.parent == "socket:1":
                node.parent = f"socket:{odd}"
        topology = Topology(source="test", gpus=[Gpu(index=k) for k in range(3)], fabric=Fabric(fabric.nodes))
        _, gpus, _, root = _drawn(render_svg(topology))
        assert sorted(gpus) == [0, 1, 2] and _caption(root).attrib["data-tree"] == "fabric"
