"""A multi-host plan file and what one of its entries means for one training task.

The plan is what ``gputopo recommend --from a.json --from b.json ... --save plan.json`` writes
(schema ``gputopo.cluster-plan/1``): per host its GPUs, ``CUDA_VISIBLE_DEVICES``, numactl, NICs,
NCCL environment and ``TF_CONFIG``. Here:

- ``load_cluster_plan``: the plan file, checked field by field (one line naming the field);
- ``host_launch_plan``: one host entry -> the ``LaunchPlan`` its training child runs under;
- ``task_process``: that plan and the cluster's workers -> the MultiWorkerMirroredStrategy child;
- ``Launch`` / ``TaskLaunch``: what a launcher (``gputopo.train.launch.launchers``) starts.

No TensorFlow here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from gputopo.fileio import read_text_input
from gputopo.model.cluster_plan import ClusterPlan, HostPlan, plan_from_json
from gputopo.notation import ascii_int, gpu_list
from gputopo.train.config import TrainConfig, check_batch_split
from gputopo.train.launch.plan import LaunchPlan, ProcessSpec
from gputopo.train.workers import check_own_address

# The plan file's schema and checks live in gputopo.model.cluster_plan (written by recommend, read
# here): re-exported for the launchers.
__all__ = ["ClusterPlan", "HostPlan", "Launch", "TaskLaunch", "host_launch_plan", "load_cluster_plan", "task_process"]


def load_cluster_plan(path: str) -> ClusterPlan:
    """Read a plan file (bounded) and check it field by field (``model.cluster_plan.plan_from_json``)."""
    return plan_from_json(read_text_input(path, "plan file"), str(path))


# -- one entry -> the child's plan -------------------------------------------------------------


def _numa_node(numactl: list[str]) -> int | None:
    for arg in numactl:
        if arg.startswith("--cpunodebind="):
            value = arg.split("=", 1)[1]
            return ascii_int(value, 4)
    return None


def host_launch_plan(entry: HostPlan, plan_path: str, cpu_devices: int | None, numactl_path: str | None) -> LaunchPlan:
    """The ``LaunchPlan`` one host entry gives its training child: the entry's environment (CUDA,
    NCCL) and its numactl binding (the child is started under it), or, with ``--cpu-devices``, one
    logical CPU device per task with the GPU part shown as a note and the NCCL environment kept."""
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": entry.cuda_visible_devices, **entry.env}
    numa_node = _numa_node(entry.numactl)
    numactl = [numactl_path, *entry.numactl[1:]] if entry.numactl and numactl_path else []
    where = f"{plan_path}, entry of {entry.host} (plan task {entry.task_index})"
    notes = list(entry.warnings)
    if cpu_devices is None:
        return LaunchPlan(
            device_kind="GPU", replicas=len(entry.gpus), gpus=list(entry.gpus), env=env, numactl=numactl,
            numa_node=numa_node, reason=where, notes=notes,
        )  # fmt: skip
    gpu_part = f"GPUs {gpu_list(entry.gpus)} (CUDA_VISIBLE_DEVICES={entry.cuda_visible_devices})"
    if entry.numactl:
        gpu_part += f" under {' '.join(entry.numactl)}"
    notes.append(f"on {entry.host} the plan runs on {gpu_part}; this run uses a logical CPU device instead")
    return LaunchPlan(
        device_kind="CPU", replicas=1, gpus=[], env={**env, "CUDA_VISIBLE_DEVICES": ""}, numactl=[],
        reason=f"{where}; 1 logical CPU device stands in for its GPUs (--cpu-devices)", notes=notes,
    )  # fmt: skip


def task_process(
    plan: LaunchPlan, config: TrainConfig, workers: list[str], task_index: int, label: str, check_address: bool = True
) -> ProcessSpec:
    """This task's MultiWorkerMirroredStrategy worker: the child gets the workers and its index
    (it builds ``TF_CONFIG`` from them, worker 0 is the chief) and runs under the plan's numactl."""
    replicas_per_worker = plan.replicas if plan.device_kind == "GPU" else 1
    check_batch_split(config.batch_size, replicas_per_worker * len(workers), "replicas across all workers")
    if check_address:  # not on --dry-run, which may run on another machine than the task
        check_own_address(workers[task_index])
    spec_config = dataclasses.replace(config, strategy="multi-worker", workers=list(workers), task_index=task_index)
    return ProcessSpec(label, spec_config, dict(plan.env), list(plan.numactl))


# -- what a launcher starts

@dataclass
class TaskLaunch:
    """One task of a launch: its plan entry, the plan its child runs under, the child itself."""

    entry: HostPlan
    plan: LaunchPlan
    process: ProcessSpec


@dataclass
class Launch:
    """What ``--launcher`` starts here (one task), or with ``--dry-run`` (Slurm) every task of the plan."""

    launcher: str
    plan_file: str
    tasks: list[TaskLaunch]
    script: str | None = None  # the sbatch script (Slurm --dry-run)

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": "gputopo.train-launch/1",
            "launcher": self.launcher,
            "plan_file": self.plan_file,
            "tasks": [
                {"entry": t.entry.to_dict(), "plan": t.plan.to_dict(), "process": t.process.to_dict()}
                for t in self.tasks
            ],
            "sbatch": self.script,
        }


