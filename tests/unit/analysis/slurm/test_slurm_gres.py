"""gres.conf per node: Slurm's device order, File= by minor number, Links= NVLink/NVSwitch-aware."""

import pytest
from linktable import CUBE_MESH_8, PCIE_8, cube_mesh_8, link_table, nvl72, nvswitch, pcie_8

from gputopo.analysis.slurm.slurm_gres import gres_node, gres_nodes, slurm_order
from gputopo.errors import InputError


def node_of(topology, **kwargs):
    (node,) = gres_nodes([topology], **kwargs)
    return node


def test_links_are_the_nvlink_counts_of_the_cube_mesh():
    node = node_of(cube_mesh_8())
    rows = [row.split() for row in CUBE_MESH_8.strip().splitlines()]
    for a, line in enumerate(node.gpus):
        assert line.links == [-1 if a == b else int(rows[a][b][2:]) if rows[a][b].startswith("NV") else 0
                              for b in range(8)]
    assert not node.nvswitch


def test_nvswitch_gives_every_peer_the_nvlink_count_and_says_autodetect_would_not():
    node = node_of(nvswitch(8, "NV18"))
    assert node.nvswitch
    assert node.gpus[3].links == [18, 18, 18, -1, 18, 18, 18, 18]
    assert any("AutoDetect=nvml would see 0" in note for note in node.notes)


def test_devices_in_pci_bus_order_and_links_in_that_order():
    # GPU 0 sits on the higher bus: Slurm's device 0 is GPU 1.
    topology = link_table("X NV2 PIX\nNV2 X PIX\nPIX PIX X",
                          gpu={"pci_bus_id": ["0000:81:00.0", "0000:01:00.0", "0000:41:00.0"]})
    ordered, by_bus = slurm_order(topology.gpus)
    assert [g.index for g in ordered] == [1, 2, 0] and by_bus
    node = node_of(topology)
    assert [line.index for line in node.gpus] == [1, 2, 0]
    assert node.gpus[0].links == [-1, 0, 2]  # GPU 1: itself, GPU 2 (PIX, no weight), GPU 0 (NV2)


def test_unknown_bus_ids_keep_the_index_order_and_say_so():
    topology = link_table("X PIX\nPIX X", gpu={"pci_bus_id": [None, "0000:01:00.0"]})
    node = node_of(topology)
    assert [line.index for line in node.gpus] == [0, 1]
    assert any("index order" in note for note in node.notes)


def test_file_uses_the_minor_number_where_known_else_the_index_and_says_so():
    known = node_of(link_table("X PIX\nPIX X", gpu={"minor_number": [3, 1]}))
    assert [(line.minor, line.minor_known) for line in known.gpus] == [(3, True), (1, True)]
    assert not any("minor" in note for note in known.notes)
    unknown = node_of(pcie_8())
    assert [line.minor for line in unknown.gpus] == list(range(8))
    assert any("assumes N is the GPU's index" in note for note in unknown.notes)


def test_pcie_switch_siblings_get_the_weight_only_when_asked():
    assert node_of(pcie_8()).gpus[0].links == [-1, 0, 0, 0, 0, 0, 0, 0]
    weighted = node_of(pcie_8(), pcie_weight=1).gpus[0].links
    rows = [row.split() for row in PCIE_8.strip().splitlines()]
    assert weighted == [-1 if b == 0 else 1 if rows[0][b] in ("PIX", "PXB") else 0 for b in range(8)]


def test_an_nvlink_pair_under_one_switch_keeps_its_nvlink_count():
    topology = link_table("X NV4\nNV4 X", pcie="X PIX\nPIX X")
    assert node_of(topology, pcie_weight=7).gpus[0].links == [-1, 4]


def test_type_from_the_gpu_name_and_cores_from_the_affinity():
    node = node_of(cube_mesh_8(name="Tesla V100-SXM2-16GB", cpus=["0-19,40-59"] * 4 + ["20-39,60-79"] * 4))
    assert {line.type for line in node.gpus} == {"tesla_v100-sxm2-16gb"}
    assert node.gpus[0].cores == list(range(20)) and node.gpus[7].cores == list(range(20, 40))


def test_unknown_pairs_are_zero_and_said():
    topology = link_table("X UNKNOWN\nUNKNOWN X")
    node = node_of(topology)
    assert node.gpus[0].links == [-1, 0]
    assert any("does not say how some GPU pairs are linked" in note for note in node.notes)


def test_a_rack_is_one_node_per_tray_each_with_its_own_links():
    nodes = gres_nodes([nvl72(trays=3)])
    assert [node.node for node in nodes] == ["tray00", "tray01", "tray02"]
    assert all(len(node.gpus) == 4 and node.gpus[0].links == [-1, 18, 18, 18] for node in nodes)


def test_a_host_name_that_is_not_a_slurm_node_name_is_refused():
    topology = pcie_8()
    with pytest.raises(InputError, match="not a Slurm node name"):
        gres_node(topology, "node1 Name=gpu", topology.gpus)
