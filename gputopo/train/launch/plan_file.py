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
import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.notation import ascii_int, gpu_list
from gputopo.quoting import check_text, env_name
from gputopo.train.workers import check_own_address, parse_address
from gputopo.train.config import TrainConfig, check_batch_split
from gputopo.train.launch.plan import LaunchPlan, ProcessSpec

PLAN_SCHEMA = "gputopo.cluster-plan/1"
DEFAULT_PORT = 12345  # TensorFlow's gRPC port of the first task on a node when neither plan nor --port say


@dataclass(frozen=True)
class HostEntry:
    """One host (one task) of a cluster plan, as ``recommend`` wrote it."""

    host: str
    task_index: int
    gpus: list[int]
    cuda_visible_devices: str
    numactl: list[str]  # ["numactl", "--cpunodebind=0", "--membind=0"] or []
    nics: list[Any]
    env: dict[str, str]  # CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES, NCCL_IB_HCA, NCCL_SOCKET_IFNAME ...
    tf_config: dict[str, Any]
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class ClusterPlan:
    """A whole multi-host plan (``gputopo.cluster-plan/1``) and the file it came from."""

    path: str
    gpus: int
    gpus_per_host: int
    hosts: list[HostEntry]

    @property
    def host_names(self) -> list[str]:
        """Each host once, in the plan's order."""
        return list(dict.fromkeys(entry.host for entry in self.hosts))

    def port(self) -> int | None:
        """The port of the first worker in the plan's ``TF_CONFIG`` (every host uses the same ports)."""
        for entry in self.hosts:
            workers = entry.tf_config.get("cluster", {}).get("worker", [])
            if workers:
                return parse_address(workers[0])[1]
        return None


# -- reading the plan ---------------------------------------------------------------------------

_KIND_WORDS = {str: "a string", int: "a whole number", list: "a list", dict: "an object"}


def field_value(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    if key not in obj:
        raise InputError(f"{where}{key} is missing")
    value = obj[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise InputError(f"{where}{key} must be {_KIND_WORDS[kind]}, got {json.dumps(value)[:60]}")
    return value


def optional_list(obj: Mapping[str, Any], key: str, where: str) -> list[Any]:
    return field_value(obj, key, list, where) if key in obj else []


def string_list(values: list[Any], where: str) -> list[str]:
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise InputError(f"{where}[{i}] must be a string, got {json.dumps(value)[:60]}")
    return list(values)


# What a plan's numactl list may hold: the binding gputopo writes, numbers in ASCII digits only.
_NUMACTL_ARG_RE = re.compile(r"--(?:cpunodebind|membind)=[0-9]{1,4}|--physcpubind=[0-9]{1,5}(?:[-,][0-9]{1,5}){0,1023}")


def one_line_field(value: str, where: str) -> str:
    """``value`` when it has no control character (newline included), else one ``InputError``."""
    try:
        return check_text(value, where)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def numactl_list(values: list[Any], where: str) -> list[str]:
    """``[]`` or ``["numactl", "--cpunodebind=N", "--membind=N"]`` (or ``--physcpubind=LIST``): every
    argument checked, so a plan cannot hand numactl a command of its own to run."""
    values = string_list(values, where)
    if not values:
        return []
    if values[0] != "numactl":
        raise InputError(f"{where}[0] must be \"numactl\", got {json.dumps(values[0])[:60]}")
    for i, arg in enumerate(values[1:], 1):
        if not _NUMACTL_ARG_RE.fullmatch(arg):
            raise InputError(f"{where}[{i}] must be --cpunodebind=N, --membind=N or --physcpubind=LIST, "
                             f"got {json.dumps(arg)[:60]}")
    return values


def _host_entry(obj: Any, where: str) -> HostEntry:
    if not isinstance(obj, dict):
        raise InputError(f"{where} must be an object, got {json.dumps(obj)[:60]}")
    host = one_line_field(field_value(obj, "host", str, f"{where}."), f"{where}.host")
    if not host.strip():
        raise InputError(f"{where}.host is empty")
    gpus = field_value(obj, "gpus", list, f"{where}.")
    for i, gpu in enumerate(gpus):
        if not isinstance(gpu, int) or isinstance(gpu, bool) or gpu < 0:
            raise InputError(f"{where}.gpus[{i}] must be a GPU index (0, 1, ...), got {json.dumps(gpu)[:60]}")
    env = field_value(obj, "env", dict, f"{where}.")
    for key, value in env.items():
        env_name(one_line_field(key, f"{where}.env key"), f"{where}.env: variable")
        if not isinstance(value, str):
            raise InputError(f"{where}.env.{key} must be a string, got {json.dumps(value)[:60]}")
        one_line_field(value, f"{where}.env.{key}")
    tf_config = field_value(obj, "tf_config", dict, f"{where}.")
    cluster = field_value(tf_config, "cluster", dict, f"{where}.tf_config.")
    for i, address in enumerate(string_list(field_value(cluster, "worker", list, f"{where}.tf_config.cluster."), "")):
        try:
            parse_address(address)
        except InputError:
            raise InputError(f"{where}.tf_config.cluster.worker[{i}] {address!r} is not host:port") from None
    return HostEntry(
        host=host,
        task_index=field_value(obj, "task_index", int, f"{where}."),
        gpus=list(gpus),
        cuda_visible_devices=one_line_field(field_value(obj, "cuda_visible_devices", str, f"{where}."),
                                            f"{where}.cuda_visible_devices"),
        numactl=numactl_list(field_value(obj, "numactl", list, f"{where}."), f"{where}.numactl"),
        nics=list(field_value(obj, "nics", list, f"{where}.")),
        env=dict(env),
        tf_config=tf_config,
        warnings=string_list(optional_list(obj, "warnings", f"{where}."), f"{where}.warnings"),
    )


def load_cluster_plan(path: str) -> ClusterPlan:
    """Read and check a plan file; every problem is one ``InputError`` naming the field."""
    text = read_text_input(path, "plan file")
    try:
        data = json.loads(text)
    except RecursionError:
        raise InputError(f"plan file {path} is nested too deeply to be a plan") from None
    except ValueError as exc:
        raise InputError(f"plan file {path} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"plan file {path} is not a gputopo cluster plan (a JSON object, schema {PLAN_SCHEMA})")
    where = f"plan file {path}: "
    schema = data.get("schema")
    if schema != PLAN_SCHEMA:
        raise InputError(
            f"{where}schema is {json.dumps(schema)[:60]}, not {PLAN_SCHEMA!r} "
            "(write it with `gputopo recommend --from a.json --from b.json --gpus N --save plan.json`)"
        )
    gpus = field_value(data, "gpus", int, where)
    gpus_per_host = field_value(data, "gpus_per_host", int, where)
    entries = [_host_entry(obj, f"{where}hosts[{i}]") for i, obj in enumerate(field_value(data, "hosts", list, where))]
    if not entries:
        raise InputError(f"{where}hosts is empty")
    seen: dict[int, int] = {}
    for i, entry in enumerate(entries):
        if entry.task_index in seen:
            first = seen[entry.task_index]
            raise InputError(f"{where}hosts[{i}].task_index {entry.task_index} repeats hosts[{first}]'s")
        seen[entry.task_index] = i
    return ClusterPlan(path=str(path), gpus=gpus, gpus_per_host=gpus_per_host, hosts=entries)


# -- one entry -> the child's plan -------------------------------------------------------------


def _numa_node(numactl: list[str]) -> int | None:
    for arg in numactl:
        if arg.startswith("--cpunodebind="):
            value = arg.split("=", 1)[1]
            return ascii_int(value, 4)
    return None


def host_launch_plan(entry: HostEntry, plan_path: str, cpu_devices: int | None, numactl_path: str | None) -> LaunchPlan:
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

    entry: HostEntry
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
            "launcher": self.launcher,
            "plan_file": self.plan_file,
            "tasks": [
                {"entry": t.entry.to_dict(), "plan": t.plan.to_dict(), "process": t.process.to_dict()}
                for t in self.tasks
            ],
            "sbatch": self.script,
        }


