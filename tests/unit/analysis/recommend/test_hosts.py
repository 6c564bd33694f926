"""The multi-host plan (gputopo.cluster-plan/1): the same group on every host, the NIC each GPU
should use (read off real multi-NIC captures by hand), NCCL_IB_HCA, TF_CONFIG with worker 0 as the
chief, the env and slurm formats, --save, and every bad ask in one line (exit 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, SHARED_FIXTURES, assert_one_error_line
from linktable import CUBE_MESH_8_NICS, NVSWITCH_8_NICS, cube_mesh_8, nvswitch, two_socket_4

from gputopo.analysis.recommend.hosts import DEFAULT_PORT, PLAN_SCHEMA, check_split, plan_hosts
from gputopo.errors import InputError
from gputopo.sources import TopologyRequest, resolve
from gputopo.views.cluster_plan import format_plan_env, format_plan_slurm

CORPUS = OWN_FIXTURES / "corpus" / "topo"
H100_9NIC = str(CORPUS / "h100_8gpu_nv18_9nic_bond_ansi_escape_stripped.txt")  # NIC Legend: NICk -> mlx5_1k
H100_12NIC = str(CORPUS / "dgx_h100_8gpu_nv18_12nic_truncated_after_nic5.txt")  # no legend: NIC0..NIC11
DGX1_TEXT = str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt")  # one mlx5_0: PIX to GPUs 2,3

CONTRACT_HOST_KEYS = ["host", "task_index", "gpus", "cuda_visible_devices", "numactl", "nics", "env", "tf_config",
                      "warnings", "host_gpus"]  # host_gpus added later (the sbatch script asks for every GPU)


TABLES = {
    "cube-mesh-8": lambda host: cube_mesh_8(nics=CUBE_MESH_8_NICS, host=host),
    "nvswitch-8": lambda host: nvswitch(8, nics=NVSWITCH_8_NICS, host=host),
    "two-socket-4": lambda host: two_socket_4(host=host),
}


def topo(path_or_table: str, host: str):
    if path_or_table.endswith(".txt"):
        return resolve(TopologyRequest(from_files=(path_or_table,), host=host))
    return TABLES[path_or_table](host)


def nic_of_each_gpu(host_plan: dict) -> dict[int, tuple[str, str]]:
    return {g: (nic["name"], nic["path"]) for nic in host_plan["nics"] for g in nic["gpus"]}


# --- the plan ------------------------------------------------------------------------------------


def test_two_h100_hosts_every_gpu_on_its_own_pxb_nic():
    plan = plan_hosts([topo(H100_9NIC, "node1"), topo(H100_12NIC, "node2")], gpus=16).to_dict()
    assert plan["schema"] == PLAN_SCHEMA == "gputopo.cluster-plan/1"
    assert plan["gpus"] == 16 and plan["gpus_per_host"] == 8
    node1, node2 = plan["hosts"]
    assert list(node1) == CONTRACT_HOST_KEYS
    assert nic_of_each_gpu(node1) == {g: (f"mlx5_1{g}", "PXB") for g in range(8)}  # the bond (NIC8) is never chosen
    assert node1["env"] == {
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7",
        "NCCL_IB_HCA": "=mlx5_10,mlx5_11,mlx5_12,mlx5_13,mlx5_14,mlx5_15,mlx5_16,mlx5_17",
    }
    # The 12-NIC capture is cut before its legend: the NICs' RDMA names are not known.
    assert nic_of_each_gpu(node2) == {g: (name, "PXB") for g, name in enumerate(
        ["NIC0", "NIC3", "NIC4", "NIC5", "NIC6", "NIC9", "NIC10", "NIC11"])}
    assert "NCCL_IB_HCA" not in node2["env"]
    assert any("NCCL_IB_HCA is not set" in w and "NIC0" in w for w in node2["warnings"])
    # Neither text names network interfaces: no NCCL_SOCKET_IFNAME, with a note.
    assert all("NCCL_SOCKET_IFNAME" not in h["env"] for h in plan["hosts"])
    assert all(any("NCCL_SOCKET_IFNAME is not set" in w for w in h["warnings"]) for h in plan["hosts"])
    assert node1["numactl"] == [] and node1["nics"][0]["netdev"] is None


def test_tf_config_worker_zero_is_the_chief_in_the_order_given():
    hosts = [topo("nvswitch-8", name) for name in ("b-node", "a-node", "c-node")]
    plan = plan_hosts(hosts, gpus=6, port=23456).to_dict()
    workers = ["b-node:23456", "a-node:23456", "c-node:23456"]
    for index, host in enumerate(plan["hosts"]):
        assert host["task_index"] == index
        assert host["tf_config"] == {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
    assert "worker 0 (b-node) is the chief" in plan["reason"]
    assert plan_hosts(hosts, gpus=3).port == DEFAULT_PORT == 12345


def test_dgx1_four_mlx5_one_per_gpu_pair():
    plan = plan_hosts([topo("cube-mesh-8", "n1"), topo("cube-mesh-8", "n2")], gpus=8).to_dict()
    for host in plan["hosts"]:
        assert host["gpus"] == [0, 1, 2, 3] and host["cuda_visible_devices"] == "0,1,2,3"
        assert host["numactl"] == ["numactl", "--cpunodebind=0", "--membind=0"]
        assert nic_of_each_gpu(host) == {0: ("mlx5_0", "PIX"), 1: ("mlx5_0", "PIX"), 2: ("mlx5_1", "PIX"),
                                         3: ("mlx5_1", "PIX")}
        assert host["env"]["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"
        assert not any("GPUDirect" in w for w in host["warnings"])


def test_dgx1_text_one_mlx5_pix_node_and_sys():
    """The shared DGX-1 capture: mlx5_0 is PIX to GPUs 2,3, NODE to 0,1 and SYS to 4-7."""
    plan = plan_hosts([topo(DGX1_TEXT, "n1"), topo(DGX1_TEXT, "n2")], gpus=16).to_dict()
    host = plan["hosts"][0]
    assert nic_of_each_gpu(host) == {0: ("mlx5_0", "NODE"), 1: ("mlx5_0", "NODE"), 2: ("mlx5_0", "PIX"),
                                     3: ("mlx5_0", "PIX"), 4: ("mlx5_0", "SYS"), 5: ("mlx5_0", "SYS"),
                                     6: ("mlx5_0", "SYS"), 7: ("mlx5_0", "SYS")}
    assert host["env"]["NCCL_IB_HCA"] == "=mlx5_0"
    sys_warning = next(w for w in host["warnings"] if "SYS" in w)
    assert sys_warning.startswith("GPUs 4,5,6,7 reach their nearest NIC only through SYS") and "GPUDirect RDMA is lost" in sys_warning
    assert any(w.startswith("GPUs 0,1 reach their nearest NIC through the CPU's host bridge") for w in host["warnings"])


def test_netdevs_give_nccl_socket_ifname():
    hosts = [topo("cube-mesh-8", "n1"), topo("cube-mesh-8", "n2")]
    for host in hosts:
        for k, nic in enumerate(host.nics):
            nic.netdev = f"ib{k}"
    plan = plan_hosts(hosts, gpus=4).to_dict()
    host = plan["hosts"][0]
    assert host["gpus"] == [0, 3]
    assert host["env"]["NCCL_SOCKET_IFNAME"] == "=ib0,ib1"
    assert host["nics"] == [{"name": "mlx5_0", "netdev": "ib0", "path": "PIX", "gpus": [0]},
                            {"name": "mlx5_1", "netdev": "ib1", "path": "PIX", "gpus": [3]}]
    assert not any("NCCL_SOCKET_IFNAME" in w for w in host["warnings"])


def test_a_host_whose_best_group_differs_is_warned_about():
    plan = plan_hosts([topo("nvswitch-8", "h100"), topo("cube-mesh-8", "v100")], gpus=8)
    assert any("differs from h100's" in w for w in plan.hosts[1].warnings)


def test_hosts_without_nics_have_no_nccl_ib_hca():
    plan = plan_hosts([topo("two-socket-4", "a"), topo("two-socket-4", "b")], gpus=4).to_dict()
    for host in plan["hosts"]:
        assert set(host["env"]) == {"CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES"}
        assert host["nics"] == [] and any("no NIC is shown" in w for w in host["warnings"])


# --- bad asks -----------------------------------------------------------------------------------


@pytest.mark.parametrize("names, counts, gpus, per_host, fragment", [
    (["a", "b"], [8, 8], 15, None, "--gpus 15 does not split evenly over 2 hosts"),
    (["a", "b"], [8, 8], 16, 4, "--gpus-per-host 4 x 2 hosts is 8, not --gpus 16"),
    (["a", "b"], [8, 4], 16, None, "the hosts have different GPU counts (a: 8, b: 4)"),
    (["a", "a"], [8, 8], 16, None, "host a is given twice"),
    (["a"], [8], 8, None, "two or more hosts"),
    (["a", "b"], [4, 4], 16, None, "a has 4 GPUs, fewer than the 8 per host"),
    (["a", "b"], [8, 8], 0, None, "--gpus must be at least 1"),
])
def test_bad_splits(names, counts, gpus, per_host, fragment):
    with pytest.raises(InputError) as info:
        check_split(names, counts, gpus, per_host)
    assert fragment in str(info.value)


def test_different_gpu_counts_are_fine_where_the_group_fits_every_host():
    plan = plan_hosts([topo("cube-mesh-8", "big"), topo("two-socket-4", "small")], gpus=4)
    assert plan.gpus_per_host == 2 and [len(h.gpus) for h in plan.hosts] == [2, 2]


# --- the CLI ------------------------------------------------------------------------------------


@pytest.fixture
def snapshots(cli, tmp_path):
    paths = []
    for name, source in (("node1", ["--from", H100_9NIC]), ("node2", ["--from", H100_12NIC])):
        path = str(tmp_path / f"{name}.json")
        assert cli("scan", *source, "--host", name, "--save", path, "--json").exit_code == 0
        paths.append(path)
    return paths


def from_args(paths):
    return [arg for path in paths for arg in ("--from", path)]


def test_cli_json_and_save(cli, snapshots, tmp_path):
    plan_path = tmp_path / "plan.json"
    result = cli("recommend", *from_args(snapshots), "--gpus", "8", "--json", "--save", str(plan_path))
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # "saved plan.json" goes to standard error
    assert data == json.loads(plan_path.read_text())
    assert list(data) == ["schema", "gpus", "gpus_per_host", "hosts", "reason"]
    assert [h["host"] for h in data["hosts"]] == ["node1", "node2"]
    assert data["hosts"][0]["env"]["NCCL_IB_HCA"] == "=mlx5_10,mlx5_11,mlx5_12,mlx5_13"
    assert data["hosts"][0]["numactl"] == ["numactl", "--cpunodebind=0", "--membind=0"]


def test_cli_env_one_block_per_host(cli, snapshots):
    result = cli("recommend", *from_args(snapshots), "--gpus", "16", "--format", "env")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    first, second = lines.index("# node1 (worker 0, the chief): GPUs 0,1,2,3,4,5,6,7"), lines.index("# node2 (worker 1): GPUs 0,1,2,3,4,5,6,7")
    block = lines[first:second]
    assert "export CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in block
    assert "export NCCL_IB_HCA==mlx5_10,mlx5_11,mlx5_12,mlx5_13,mlx5_14,mlx5_15,mlx5_16,mlx5_17" in block
    tf_config = next(line for line in block if line.startswith("export TF_CONFIG="))
    assert json.loads(tf_config.split("=", 1)[1].strip("'"))["task"] == {"type": "worker", "index": 0}


def test_cli_slurm_script(cli, snapshots, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = cli("recommend", *from_args(snapshots), "--gpus", "8", "--format", "slurm", "--save", "my plan.json")
    assert result.exit_code == 0, result.output
    script = result.stdout  # "saved my plan.json" goes to standard error
    assert script.startswith("#!/bin/bash\n")
    for line in ("#SBATCH --nodes=2", "#SBATCH --ntasks-per-node=1", "#SBATCH --gpus-per-node=8",
                 "#SBATCH --nodelist=node1,node2"):
        assert line in script.splitlines()
    assert "srun --kill-on-bad-exit=1 gputopo train --launcher slurm --plan 'my plan.json' \"$@\"" in script
    assert "Save the plan next to this script" in script
    assert json.loads(Path("my plan.json").read_text())["gpus_per_host"] == 4


def test_slurm_script_without_save_names_plan_json():
    plan = plan_hosts([topo("cube-mesh-8", "n1"), topo("cube-mesh-8", "n2")], gpus=16)
    script = format_plan_slurm(plan)
    assert "--plan plan.json" in script and "#SBATCH --gpus-per-node=8" in script
    assert "# node1" not in format_plan_env(plan) and "# n1 (worker 0, the chief)" in format_plan_env(plan)


def test_cli_text(cli, snapshots):
    result = cli("recommend", *from_args(snapshots), "--gpus", "16")
    assert result.exit_code == 0, result.output
    assert "2 hosts x 8 GPUs = 16 GPUs" in result.output and "the chief" in result.output


@pytest.mark.parametrize("extra, fragment", [
    (["--gpus", "15"], "does not split evenly over 2 hosts"),
    (["--gpus", "16", "--gpus-per-host", "4"], "--gpus-per-host 4 x 2 hosts is 8, not --gpus 16"),
    (["--gpus", "16", "--format", "python"], "--format with several --from must be one of"),
    (["--gpus", "16", "--jobs", "2"], "--jobs is for one host"),
    (["--gpus", "16", "--require", "0"], "--require is for one host"),
    (["--gpus", "16", "--host", "x"], "--host is for one host"),
    (["--gpus", "16", "--port", "70000"], "--port must be a TCP port"),
])
def test_cli_bad_asks_are_one_line(cli, snapshots, extra, fragment):
    line = assert_one_error_line(cli("recommend", *from_args(snapshots), *extra))
    assert fragment in line


def test_cli_same_host_twice_and_different_counts(cli, snapshots, tmp_path):
    # the same host twice is one host (its files merged), not a two-host plan
    line = assert_one_error_line(cli("recommend", "--from", snapshots[0], "--from", snapshots[0], "--gpus", "16"))
    assert "has only 8" in line
    small = str(tmp_path / "small.json")
    assert cli("scan", "--machine", "two-socket-4gpu", "--host", "small", "--save", small, "--json").exit_code == 0
    line = assert_one_error_line(cli("recommend", "--from", snapshots[0], "--from", small, "--gpus", "16"))
    assert "different GPU counts (node1: 8, small: 4)" in line


@pytest.mark.parametrize("extra", [["--gpus-per-host", "4"], ["--port", "1234"], ["--save", "p.json"],
                                   ["--format", "slurm"]])
def test_plan_options_need_several_hosts(cli, extra):
    line = assert_one_error_line(cli("recommend", "--machine", "dgx1", "--gpus", "4", *extra))
    assert "multi-host plan" in line
