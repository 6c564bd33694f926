"""What the NV# pattern of `nvidia-smi topo -m` text proves about NVSwitch (true / false / unknown)."""

from __future__ import annotations

from gputopo.sources.smi.smi_text import parse_topo_matrix


def _matrix(rows: list[list[str]]) -> str:
    n = len(rows)
    head = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\n"
    return head + "".join(f"GPU{i}\t" + "\t".join(" X " if i == j else w for j, w in enumerate(row)) + "\t0-7\n"
                          for i, row in enumerate(rows))


def test_a_board_whose_gpu_lacks_nvlink_is_still_a_switch_fabric_for_the_others():
    """HGX B200 with GPU2's NVLinks down (vllm#16336): NV18 to five peers is 90 links, only a switch gives that."""
    rows = [["NV18" if 2 not in (i, j) else ("NODE" if max(i, j) < 4 else "SYS") for j in range(8)] for i in range(8)]
    topology = parse_topo_matrix(_matrix(rows), "b200")
    assert {link.nvswitch for link in topology.links if link.is_nvlink} == {True}
    assert topology.link(2, 3).type == "NODE" and not topology.link(2, 3).is_nvlink


def test_pairs_with_a_switchs_link_count_and_pcie_between_them_are_unknown():
    """NV12 between 0-1 and NV10 between 2-3, NODE across: bridged pairs or two-GPU partitions of a switch."""
    rows = [["X", "NV12", "NODE", "NODE"], ["NV12", "X", "NODE", "NODE"],
            ["NODE", "NODE", "X", "NV10"], ["NODE", "NODE", "NV10", "X"]]
    topology = parse_topo_matrix(_matrix(rows), "pairs")
    assert {link.nvswitch for link in topology.links if link.is_nvlink} == {None}


def test_a_bridge_pair_beside_pcie_gpus_is_still_direct():
    rows = [["X", "NV4", "PHB"], ["NV4", "X", "PHB"], ["PHB", "PHB", "X"]]
    topology = parse_topo_matrix(_matrix(rows), "bridge")
    assert topology.link(0, 1).nvswitch is False


def test_three_gpus_with_nv12_to_each_other_exceed_one_gpus_links():
    rows = [["X", "NV12", "NV12"], ["NV12", "X", "NV12"], ["NV12", "NV12", "X"]]
    assert parse_topo_matrix(_matrix(rows), "three").link(0, 1).nvswitch is True
