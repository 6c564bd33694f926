"""train.launch.launchers, ``gputopo train --launcher slurm|tf-config --plan plan.json``: applying this
task's entry, TF_CONFIG, the dry run; bad input is one line and exit 2. Reading the plan is
test_plan_file.py, Slurm's task variables test_slurm.py (both here); the real Slurm run is
tests/system/test_slurm.py, the TensorFlow runs tests/system/test_train_launchers.py."""

from __future__ import annotations

import json

import pytest

from cluster_plans import cluster_plan, slurm_env, write_plan
from gputopo.errors import InputError
from gputopo.train.launch.launchers import tf_config_entry, tf_config_task
from gputopo.train.launch.plan_file import host_launch_plan, load_cluster_plan
from gputopo.train.launch.slurm import SLURM_VARIABLES


def one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputopo: error: "), result.stderr
    return lines[0]


# -- applying an entry ---------------------------------------------------------------------------


def test_an_entry_gives_its_child_the_cuda_and_nccl_environment_and_numactl(plan_path):
    entry = load_cluster_plan(plan_path).hosts[1]
    plan = host_launch_plan(entry, plan_path, cpu_devices=None, numactl_path="/usr/bin/numactl")
    assert (plan.device_kind, plan.replicas, plan.gpus, plan.numa_node) == ("GPU", 4, [4, 5, 6, 7], 1)
    assert plan.numactl == ["/usr/bin/numactl", "--cpunodebind=1", "--membind=1"]
    assert plan.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "4,5,6,7",
                        "NCCL_SOCKET_IFNAME": "ens1f0", "NCCL_IB_HCA": "=mlx5_3"}  # fmt: skip
    assert host_launch_plan(entry, plan_path, None, numactl_path=None).numactl == []  # not installed: no binding


def test_on_logical_cpu_devices_the_gpus_are_hidden_and_the_nccl_environment_kept(plan_path):
    entry = load_cluster_plan(plan_path).hosts[0]
    plan = host_launch_plan(entry, plan_path, cpu_devices=1, numactl_path="/usr/bin/numactl")
    assert (plan.device_kind, plan.replicas, plan.numactl) == ("CPU", 1, [])
    assert plan.env["CUDA_VISIBLE_DEVICES"] == "" and plan.env["NCCL_IB_HCA"] == "=mlx5_0,mlx5_1"
    assert "on node1 the plan runs on GPUs 0,1,2,3 (CUDA_VISIBLE_DEVICES=0,1,2,3) under numactl --cpunodebind=0" in plan.notes[0]


# -- TF_CONFIG from an operator ------------------------------------------------------------------


def test_tf_config_gives_the_workers_and_this_tasks_index(plan_path):
    workers = ["w0:2222", "w1:2222"]
    assert tf_config_task(json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": 1}})) == (workers, 1)
    with_chief = {"cluster": {"chief": ["c:2222"], "worker": workers}, "task": {"type": "worker", "index": 0}}
    assert tf_config_task(json.dumps(with_chief)) == (["c:2222", *workers], 1)
    assert tf_config_entry(load_cluster_plan(plan_path), 1).host == "node2"
    with pytest.raises(InputError, match=r"^TF_CONFIG task 5 is not in .*plan.json \(its task indices: 0, 1\)$"):
        tf_config_entry(load_cluster_plan(plan_path), 5)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("{cluster: 1}", r"^TF_CONFIG is not JSON \("),
        ("", r"^--launcher tf-config: TF_CONFIG is not set"),
        ('{"cluster": {"worker": ["a:1"], "ps": ["b:2"]}, "task": {"type": "worker", "index": 0}}', r"has a 'ps' task"),
        ('{"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 3}}', r"task worker 3 is not in its cluster"),
        ('{"cluster": {"worker": ["a:1"]}}', r"^TF_CONFIG task is missing$"),
    ],
)
def test_bad_tf_config_is_one_line(text, message):
    with pytest.raises(InputError, match=message):
        tf_config_task(text)


def test_dry_run_needs_no_slurm_and_shows_every_task(cli, plan_path, monkeypatch):
    for name in SLURM_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    result = cli("train", "--launcher", "slurm", "--plan", plan_path, "--dry-run", "--json", "--port", "2300")
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    assert [t["process"]["label"] for t in shown["tasks"]] == [
        "worker 0 on node1, SLURM_LOCALID 0 (node1:2300)", "worker 1 on node2, SLURM_LOCALID 0 (node2:2300)"]
    second = shown["tasks"][1]
    assert second["plan"]["env"]["NCCL_IB_HCA"] == "=mlx5_3" and second["plan"]["gpus"] == [4, 5, 6, 7]
    command = second["process"]["command"]
    assert command[command.index("--workers") + 1] == "node1:2300,node2:2300"
    assert command[command.index("--task-index") + 1] == "1"
    assert "#SBATCH --ntasks-per-node=1" in shown["sbatch"] and "#SBATCH --exclusive" in shown["sbatch"]


# -- the CLI: bad input is one line, exit 2 ------------------------------------------------------


def test_a_missing_slurm_variable_is_one_line_exit_2(cli, plan_path, monkeypatch):
    for name, value in slurm_env("node1", 0, 0).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SLURM_PROCID")
    line = one_line_error(cli("train", "--launcher", "slurm", "--plan", plan_path, "--cpu-devices", "1"))
    assert line.startswith("gputopo: error: SLURM_PROCID is not set")


def test_a_task_whose_host_is_not_in_the_plan_is_one_line_exit_2(cli, plan_path, monkeypatch):
    for name, value in slurm_env("node3", 1, 0, "node[1,3]").items():
        monkeypatch.setenv(name, value)
    line = one_line_error(cli("train", "--launcher", "slurm", "--plan", plan_path, "--cpu-devices", "1"))
    assert line == f"gputopo: error: task 1 runs on node3, which is not in {plan_path} (hosts: node1, node2)"


def test_a_plan_with_a_wrong_schema_is_one_line_exit_2(cli, tmp_path):
    path = write_plan(tmp_path / "plan.json", {**cluster_plan(["a", "b"]), "schema": "gputopo.cluster-plan/9"})
    line = one_line_error(cli("train", "--launcher", "tf-config", "--plan", path))
    assert "schema is \"gputopo.cluster-plan/9\", not 'gputopo.cluster-plan/1'" in line


def test_tf_config_that_is_not_json_is_one_line_exit_2(cli, plan_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", "{'cluster': ")
    line = one_line_error(cli("train", "--launcher", "tf-config", "--plan", plan_path, "--cpu-devices", "1"))
    assert "TF_CONFIG" in line and "not JSON" in line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--launcher", "slurm"], "--launcher slurm needs --plan plan.json"),
        (["--launcher", "pbs", "--plan", "PLAN"], "unknown launcher 'pbs'; choose one of: slurm, tf-config"),
        (["--launcher", "slurm", "--plan", "PLAN", "--gpus", "2"], "takes the GPUs and the cluster from --plan; leave out --gpus"),
        (["--launcher", "slurm", "--plan", "PLAN", "--strategy", "parameter-server"], "trains --strategy multi-worker"),
    ],
)
def test_launcher_options_that_cannot_work_are_one_line_exit_2(cli, plan_path, args, message):
    line = one_line_error(cli("train", *[plan_path if a == "PLAN" else a for a in args], "--dry-run"))
    assert message in line


# -- a real two-worker run under TF_CONFIG (as a Kubernetes operator starts it) ------------------


def test_the_plan_that_recommend_saves_is_what_the_launcher_reads(cli, tmp_path):
    for host, machine in (("node1", "dgx1"), ("node2", "pcie-8gpu")):
        result = cli("scan", "--machine", machine, "--host", host, "--save", str(tmp_path / f"{host}.json"))
        assert result.exit_code == 0, result.output
    plan_path = str(tmp_path / "plan.json")
    result = cli("recommend", "--from", str(tmp_path / "node1.json"), "--from", str(tmp_path / "node2.json"),
                 "--gpus", "4", "--save", plan_path)  # fmt: skip
    assert result.exit_code == 0, result.output
    plan = load_cluster_plan(plan_path)
    assert plan.host_names == ["node1", "node2"] and [len(e.gpus) for e in plan.hosts] == [2, 2]
    result = cli("train", "--launcher", "slurm", "--plan", plan_path, "--dry-run", "--json", "--batch-size", "8")
    assert result.exit_code == 0, result.output
    tasks = json.loads(result.stdout)["tasks"]
    for task, entry in zip(tasks, plan.hosts):
        assert task["entry"]["host"] == entry.host
        assert task["process"]["env"]["CUDA_VISIBLE_DEVICES"] == entry.cuda_visible_devices
        assert {k: v for k, v in task["process"]["env"].items() if k.startswith("NCCL_")} == {
            k: v for k, v in entry.env.items() if k.startswith("NCCL_")}
