"""Hostile plans, Slurm variables and TF_CONFIG: one line each, never a traceback, never a command
of their own (issue 20, items 1 and 6)."""

from __future__ import annotations

import json

import pytest

from cluster_plans import cluster_plan, write_plan
from gputopo.errors import InputError
from gputopo.train.workers import check_tf_config_env, parse_address
from gputopo.train.config import TrainConfig
from gputopo.train.launch.plan_file import load_cluster_plan
from gputopo.train.launch.slurm import hostlist_count, slurm_launch, slurm_task


def _env(**changes: str) -> dict[str, str]:
    env = {"SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURMD_NODENAME": "node1", "SLURM_STEP_NUM_TASKS": "2",
           "SLURM_STEP_NODELIST": "node[1-2]", "SLURM_STEP_TASKS_PER_NODE": "1(x2)"}
    env.update(changes)
    return env


def _plan(tmp_path, change) -> str:
    plan = cluster_plan(["node1", "node2"])
    change(plan)
    return write_plan(tmp_path / "plan.json", plan)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p["hosts"][0].update(host="node1\ntouch /tmp/owned"), r"hosts\[0\]\.host: control character '\\n'"),
        (lambda p: p["hosts"][0]["env"].update({"A=1 touch x;B": "v"}), r"is not a variable name"),
        (lambda p: p["hosts"][0]["env"].update({"X\n": "v"}), r"env key: control character"),
        (lambda p: p["hosts"][0]["env"].update(NCCL_IB_HCA="=mlx5_0\n; touch x"), r"env\.NCCL_IB_HCA: control character"),
        (lambda p: p["hosts"][0].update(numactl=["numactl", "--cpunodebind=0", "sh", "-c", "id"]),
         r"numactl\[2\] must be --cpunodebind=N"),
        (lambda p: p["hosts"][0].update(numactl=["sh", "-c", "id"]), r"numactl\[0\] must be \"numactl\""),
        (lambda p: p["hosts"][0].update(numactl=["numactl", "--cpunodebind=²"]), r"numactl\[1\] must be"),
        (lambda p: p["hosts"][0].update(cuda_visible_devices="0\n1"), r"cuda_visible_devices: control character"),
    ],
)
def test_a_plan_that_would_run_a_command_is_refused_at_the_door(tmp_path, change, message):
    with pytest.raises(InputError, match=message):
        load_cluster_plan(_plan(tmp_path, change))


def test_a_plan_nested_too_deeply_is_one_line(tmp_path):
    path = tmp_path / "plan.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(InputError, match="nested too deeply"):
        load_cluster_plan(str(path))


def test_port_65535_with_two_tasks_on_a_node_is_refused(tmp_path):
    plan = cluster_plan(["node1", "node2"])
    plan["hosts"][1]["host"] = "node1"  # two tasks on node1: ports P and P+1
    path = write_plan(tmp_path / "plan.json", plan)
    with pytest.raises(InputError, match="a TCP port is at most 65535"):
        slurm_launch(load_cluster_plan(path), TrainConfig(cpu_devices=1), 65535, True, None, {})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"SLURM_LOCALID": "²"}, "SLURM_LOCALID is '²', not a number"),
        ({"SLURM_PROCID": "9" * 5000}, "SLURM_PROCID is"),
        ({"SLURM_STEP_NODELIST": "node[1-100000000]"}, "more than 65536 nodes: refused before expanding"),
        ({"SLURM_STEP_NODELIST": "node[1-2"}, "is not a Slurm list"),
        ({"SLURM_STEP_TASKS_PER_NODE": "1(x100000000)"}, "more than 65536 nodes"),
        ({"SLURMD_NODENAME": "node1\x1b[2J"}, "SLURMD_NODENAME: control character"),
    ],
)
def test_hostile_slurm_variables_are_one_line_before_tensorflow_sees_them(changes, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[").replace("(", r"\(")):
        slurm_task(_env(**changes))


def test_host_lists_are_counted_without_expanding():
    assert hostlist_count("node[1-4,7],gpu[01-02]x,login") == 8
    assert hostlist_count("n[1-100000000]") > 65536  # at once: nothing is expanded


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"cluster": 5}', "cluster must be an object"),
        ('{"cluster": {"worker": [1, 2]}}', "cluster.worker must be a list of host:port strings"),
        ('{"task": {"type": "worker", "index": "0"}}', "task.index must be a task number"),
        ('{"task": []}', "task must be an object"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_tf_config_tensorflow_would_choke_on_is_one_line(text, message):
    with pytest.raises(InputError, match=message):
        check_tf_config_env({"TF_CONFIG": text})


def test_a_good_tf_config_passes():
    check_tf_config_env({"TF_CONFIG": json.dumps({"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}})})


@pytest.mark.parametrize("address", ["host:²", "host:65536", "host:" + "9" * 5000, "host:-1"])
def test_addresses_take_ascii_ports_in_range_only(address):
    with pytest.raises(InputError, match="is not host:port"):
        parse_address(address)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (TrainConfig(seed=-1), "--seed must be from 0"),
        (TrainConfig(seed=2**40), "--seed must be from 0"),
        (TrainConfig(checkpoint_dir=""), "--checkpoint-dir is empty"),
        (TrainConfig(ps_workers=100_000), "at most 64 in-process servers"),
        (TrainConfig(cpu_devices=10**9), "--cpu-devices must be from 1"),
    ],
)
def test_train_options_out_of_range_are_refused(config, message):
    with pytest.raises(InputError, match=message):
        config.validate()
