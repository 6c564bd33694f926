"""analysis.place.nics: each GPU's nearest NICs, on NIC columns written as nvidia-smi prints them and on
real multi-NIC captures read by hand."""

from __future__ import annotations

from conftest import OWN_FIXTURES
from linktable import CUBE_MESH_8_NICS, TWO_SOCKET_4, cube_mesh_8, link_table

from gputopo.analysis.place.nics import nearest_nics, nic_label
from gputopo.model import Nic
from gputopo.sources import TopologyRequest, resolve

CORPUS = OWN_FIXTURES / "corpus" / "topo"
H100_9NIC = str(CORPUS / "h100_8gpu_nv18_9nic_bond_ansi_escape_stripped.txt")
H100_12NIC = str(CORPUS / "dgx_h100_8gpu_nv18_12nic_truncated_after_nic5.txt")


def test_nearest_nics_read_from_the_captures():
    """Each GPU's NIC, read off the captures by hand: the one PXB cell in its row."""
    nine = resolve(TopologyRequest(from_files=(H100_9NIC,)))
    assert [(e.gpu, e.path, [n.rdma_name for n in e.nics]) for e in nearest_nics(nine)] == [
        (g, "PXB", [f"mlx5_1{g}"]) for g in range(8)]
    twelve = resolve(TopologyRequest(from_files=(H100_12NIC,)))
    assert [(e.path, [n.name for n in e.nics]) for e in nearest_nics(twelve)] == [
        ("PXB", [name]) for name in ("NIC0", "NIC3", "NIC4", "NIC5", "NIC6", "NIC9", "NIC10", "NIC11")]
    assert all(n.rdma_name is None for n in twelve.nics)  # no NIC Legend: the RDMA names are not shown


def test_the_best_path_wins_and_ties_keep_the_nic_order():
    topo = cube_mesh_8(nics=CUBE_MESH_8_NICS)
    found = nearest_nics(topo, [3, 4])
    assert [(e.gpu, e.path, [n.name for n in e.nics], e.near) for e in found] == [
        (3, "PIX", ["mlx5_1"], True), (4, "PIX", ["mlx5_2"], True)]
    both = link_table(TWO_SOCKET_4, nics="""
        mlx5_0 mlx5_1
        NODE   NODE
        NODE   NODE
        SYS    SYS
        SYS    SYS
    """)
    first = nearest_nics(both)[0]
    assert (first.path, [n.name for n in first.nics], first.near) == ("NODE", ["mlx5_0", "mlx5_1"], False)
    assert [e.path for e in nearest_nics(both)] == ["NODE", "NODE", "SYS", "SYS"]


def test_gpus_without_a_known_path_have_none():
    assert [(e.gpu, e.path, e.nics) for e in nearest_nics(link_table(TWO_SOCKET_4))] == [
        (g, None, []) for g in range(4)]


def test_nic_labels_name_the_rdma_device_where_it_differs():
    assert nic_label(Nic("mlx5_0")) == "mlx5_0"
    assert nic_label(Nic("NIC0", device="mlx5_10")) == "NIC0 (mlx5_10)"
    assert nic_label(Nic("NIC3")) == "NIC3"
