"""Training under a launcher someone else runs (Slurm, a Kubernetes operator): ``gputopo train
--launcher slurm|tf-config --plan plan.json`` applies a multi-host plan to the one task this process is.

- ``launch``: the entry point: this task's training process (``--dry-run`` with Slurm: every task
  of the plan, and the sbatch script);
- ``tf_config_task`` / ``tf_config_entry``: ``--launcher tf-config``: the ``TF_CONFIG`` an operator
  set -> the workers, this task's index and its plan entry (the plan's ``task_index``).

The plan file is read in ``gputopo.train.launch.plan_file``; Slurm's side is ``gputopo.train.launch.slurm``.
No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from typing import Mapping

from gputopo.errors import InputError
from gputopo.train.workers import parse_address, parse_tf_config
from gputopo.train.config import TrainConfig
from gputopo.model.cluster_plan import ClusterPlan, HostPlan, field_value, optional_list, string_list
from gputopo.train.launch.plan_file import Launch, TaskLaunch, host_launch_plan, load_cluster_plan, task_process
from gputopo.train.launch.slurm import slurm_launch

LAUNCHERS = ("slurm", "tf-config")
TF_CONFIG_TASK_TYPES = ("chief", "worker")  # MultiWorkerMirroredStrategy's; ps/evaluator are not trained here




def tf_config_task(text: str | None) -> tuple[list[str], int]:
    """``TF_CONFIG`` -> (every worker's address, this task's index among them).

    A cluster with a ``chief`` is read as workers, chief first: the same processes and addresses,
    and MultiWorkerMirroredStrategy's chief is worker 0 either way.
    """
    if text is None or not text.strip():
        raise InputError("--launcher tf-config: TF_CONFIG is not set (the operator that starts this task sets it)")
    data = parse_tf_config(text)
    cluster = field_value(data, "cluster", dict, "TF_CONFIG ")
    task = field_value(data, "task", dict, "TF_CONFIG ")
    task_type = field_value(task, "type", str, "TF_CONFIG task.")
    index = field_value(task, "index", int, "TF_CONFIG task.")
    others = sorted(set(cluster) - set(TF_CONFIG_TASK_TYPES))
    if task_type not in TF_CONFIG_TASK_TYPES or others:
        what = task_type if task_type not in TF_CONFIG_TASK_TYPES else others[0]
        raise InputError(
            f"TF_CONFIG has a {what!r} task; --launcher tf-config trains MultiWorkerMirroredStrategy "
            "(chief and worker tasks only)"
        )
    chief = string_list(optional_list(cluster, "chief", "TF_CONFIG cluster."), "TF_CONFIG cluster.chief")
    workers = chief + string_list(optional_list(cluster, "worker", "TF_CONFIG cluster."), "TF_CONFIG cluster.worker")
    for address in workers:
        parse_address(address)
    members = chief if task_type == "chief" else workers[len(chief) :]
    if not 0 <= index < len(members):
        raise InputError(
            f"TF_CONFIG task {task_type} {index} is not in its cluster ({len(members)} {task_type} task(s))"
        )
    return workers, index + (0 if task_type == "chief" else len(chief))


def tf_config_entry(plan: ClusterPlan, task_index: int) -> HostPlan:
    """The plan entry of TF_CONFIG's task ``task_index`` (the plan's ``task_index``)."""
    for entry in plan.hosts:
        if entry.task_index == task_index:
            return entry
    known = ", ".join(str(e.task_index) for e in plan.hosts)
    raise InputError(f"TF_CONFIG task {task_index} is not in {plan.path} (its task indices: {known})")


def launch(
    launcher: str,
    plan_file: str | None,
    config: TrainConfig,
    port: int | None = None,
    dry_run: bool = False,
    numactl_path: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Launch:
    """``gputopo train --launcher slurm|tf-config --plan plan.json``: this task's training process.

    ``numactl_path`` defaults to the ``numactl`` on this host's PATH.
    """
    if launcher not in LAUNCHERS:
        raise InputError(f"unknown launcher {launcher!r}; choose one of: {', '.join(LAUNCHERS)}")
    if plan_file is None:
        raise InputError(
            f"--launcher {launcher} needs --plan plan.json (from `gputopo recommend --from a.json --from b.json "
            "--gpus N --save plan.json`)"
        )
    if config.strategy == "parameter-server":
        raise InputError(f"--launcher {launcher} trains --strategy multi-worker, not parameter-server")
    if port is not None and not 0 < port < 65536:
        raise InputError(f"--port must be a TCP port (1..65535), got {port}")
    config = dataclasses.replace(config, strategy="multi-worker")
    environ = os.environ if environ is None else environ
    numactl_path = shutil.which("numactl") if numactl_path is None else numactl_path
    plan = load_cluster_plan(plan_file)
    if launcher == "slurm":
        return slurm_launch(plan, config, port, dry_run, numactl_path, environ)
    workers, task_index = tf_config_task(environ.get("TF_CONFIG"))
    entry = tf_config_entry(plan, task_index)
    task_plan = host_launch_plan(entry, plan.path, config.cpu_devices, numactl_path)
    label = f"worker {task_index} on {entry.host} ({workers[task_index]}, from TF_CONFIG)"
    process = task_process(task_plan, config, workers, task_index, label)
    return Launch(launcher, plan.path, [TaskLaunch(entry, task_plan, process)])
