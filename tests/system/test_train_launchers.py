"""``gputopo train --launcher slurm|tf-config`` with TensorFlow: the cluster from TensorFlow's own
Slurm resolver, and two tasks under an operator's TF_CONFIG training together. The checks without
TensorFlow are tests/unit/train/launch/test_launchers.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from cluster_plans import cluster_plan, free_ports, slurm_env, write_plan

from gputopo.train.launch.slurm import slurm_task


@pytest.mark.tf
def test_the_cluster_comes_from_tensorflows_slurm_resolver_without_its_gpu_assignment(monkeypatch):
    from gputopo.train.launch.slurm import resolve_cluster

    # Slurm ranks node10 after node2 (its node list order); the resolver lists nodes by name.
    env = slurm_env("node2", 1, 1, "node[2,10]", "2(x2)", 4)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6")
    workers, index = resolve_cluster(slurm_task(env), 2222, gpus_per_task=2)
    assert workers == ["node10:2222", "node10:2223", "node2:2222", "node2:2223"]
    assert index == 3  # node2 with port 2222 + SLURM_LOCALID 1
    assert os.environ["CUDA_VISIBLE_DEVICES"] == "5,6"  # auto_set_gpu=False: the plan's choice stays


@pytest.mark.tf
def test_two_tasks_under_an_operators_tf_config_train_together_each_with_its_entry(tmp_path):
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    plan = cluster_plan(["hostA", "hostB"])
    path = write_plan(tmp_path / "plan.json", plan)
    tasks = []
    for index in range(2):
        env = {**os.environ, "TF_CONFIG": json.dumps({"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
        command = [sys.executable, "-m", "gputopo", "train", "--launcher", "tf-config", "--plan", path, "--cpu-devices", "1",
                   "--steps-per-epoch", "3", "--batch-size", "8", "--no-eval", "--no-checkpoint", "--json",
                   "--startup-timeout", "90"]  # fmt: skip
        tasks.append(subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outputs = [task.communicate(timeout=240) for task in tasks]
    for task, (stdout, stderr) in zip(tasks, outputs):
        assert task.returncode == 0, stderr
    summaries = [json.loads(stdout) for stdout, _ in outputs]
    assert [s["launch"]["entry"]["host"] for s in summaries] == ["hostA", "hostB"]
    assert [s["plan"]["env"]["NCCL_IB_HCA"] for s in summaries] == ["=mlx5_0,mlx5_1", "=mlx5_3"]
    assert summaries[0]["weights_sha256"] == summaries[1]["weights_sha256"]
    assert [s["steps"] for s in summaries] == [3, 3]
