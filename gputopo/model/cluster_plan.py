"""The multi-host plan file, ``gputopo.cluster-plan/1``: one schema, written and read by this code.

``gputopo recommend --from a.json --from b.json --gpus N --save plan.json`` writes it
(``gputopo.analysis.recommend.hosts`` makes the ``ClusterPlan``); ``gputopo train --launcher
slurm|tf-config --plan plan.json`` reads it back (``plan_from_json``) on every host. Per host: its
GPUs, ``CUDA_VISIBLE_DEVICES``, the numactl binding, the NICs the GPUs send through, the NCCL
environment and ``TF_CONFIG``.

A plan file travels between machines and ends up in shell lines (env, numactl, sbatch), so reading
checks every field at the door and refuses, in one line naming the field, what gputopo would never
write: control characters in any string, variable names that are not names, a numactl list that
is not gputopo's own binding, worker addresses that are not ``host:port``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from gputopo.errors import InputError
from gputopo.model.json_text import strict_json_text
from gputopo.model.topology import plain_data
from gputopo.notation import parse_host_port, parse_json_object
from gputopo.quoting import check_text, env_name

PLAN_SCHEMA = "gputopo.cluster-plan/1"
DEFAULT_PORT = 12345  # TensorFlow's gRPC port of the first task on a node when neither plan nor --port say
# The variables a plan may set in the training child's environment (what recommend writes).
PLAN_ENV_PREFIXES = ("CUDA_", "NCCL_")
# Of those, the CUDA variables a plan sets are these two; an NCCL variable that names a file, a
# folder or a library is refused: NCCL_NET_PLUGIN / NCCL_TUNER_PLUGIN / CUDA_INJECTION64_PATH are
# loaded into the child (the plan's code, as root), NCCL_DEBUG_FILE / NCCL_TOPO_DUMP_FILE are
# written (a file of the plan's choosing truncated), NCCL_CONF_FILE sets any of them.
PLAN_CUDA_VARIABLES = frozenset({"CUDA_DEVICE_ORDER", "CUDA_VISIBLE_DEVICES"})
_PLAN_FILE_VARIABLE_RE = re.compile(r"_(?:FILE|PATH|PLUGIN|DIR|DIRECTORY|LIB|LIBRARY)(?:_|$)")
# NCCL_IB_HCA / NCCL_SOCKET_IFNAME: NCCL's list syntax (an optional "=" exact-match or "^" exclude
# prefix, then device names, an HCA with an optional ":port"); a name holding "^", "=" or anything
# else would change what the list selects.
NCCL_NAME_LISTS = frozenset({"NCCL_IB_HCA", "NCCL_SOCKET_IFNAME"})
_DEVICE = r"[A-Za-z0-9_.\-]{1,64}(?::[0-9]{1,3})?"
NCCL_NAME_LIST_RE = re.compile(rf"[=^]?{_DEVICE}(?:,{_DEVICE}){{0,255}}")
HOW_TO_WRITE = "write it with `gputopo recommend --from a.json --from b.json --gpus N --save plan.json`"


@dataclass
class NicUse:
    """A NIC the chosen GPUs send through: its RDMA name (else the source's name), its network
    interface where known, the path word from those GPUs, and the GPUs."""

    name: str
    netdev: str | None
    path: str
    gpus: list[int]


@dataclass
class HostPlan:
    """One host (one task) of the plan."""

    host: str
    task_index: int
    gpus: list[int]
    cuda_visible_devices: str
    numactl: list[str]  # ["numactl", "--cpunodebind=0", "--membind=0"] or []
    nics: list[NicUse]
    env: dict[str, str]  # CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES, NCCL_IB_HCA, NCCL_SOCKET_IFNAME ...
    tf_config: dict[str, Any]
    warnings: list[str] = field(default_factory=list)
    host_gpus: int | None = None  # GPUs on the host (an sbatch script asks for them all); None: not said
    shape: str = ""  # the group's ring in words (in memory only: the warnings compare hosts by it)

    def to_dict(self) -> dict[str, Any]:
        data = plain_data(self)  # dataclasses.asdict without its deep copies (a 1000-host plan)
        data.pop("shape")
        return data


@dataclass
class ClusterPlan:
    """A whole multi-host plan; ``path`` is the file it was read from (not part of the file)."""

    gpus: int
    gpus_per_host: int
    hosts: list[HostPlan]
    reason: str = ""
    port: int = DEFAULT_PORT
    path: str | None = None

    @property
    def host_names(self) -> list[str]:
        """Each host once, in the plan's order."""
        return list(dict.fromkeys(entry.host for entry in self.hosts))

    def first_port(self) -> int | None:
        """The port of the first worker in the plan's ``TF_CONFIG`` (every host uses the same ports)."""
        for entry in self.hosts:
            workers = entry.tf_config.get("cluster", {}).get("worker", [])
            if workers:
                return parse_host_port(workers[0])[1]
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"schema": PLAN_SCHEMA, "gpus": self.gpus, "gpus_per_host": self.gpus_per_host,
                "hosts": [host.to_dict() for host in self.hosts], "reason": self.reason}

    def to_json(self) -> str:
        """The plan file's text (a 1000-host plan: one line per host entry)."""
        return strict_json_text(self.to_dict())


# --- reading ---------------------------------------------------------------------------------------

_KIND_WORDS = {str: "a string", int: "a whole number", list: "a list", dict: "an object"}
# What a plan's numactl list may hold: the binding gputopo writes, numbers in ASCII digits only.
_NUMACTL_ARG_RE = re.compile(r"--(?:cpunodebind|membind)=[0-9]{1,4}|--physcpubind=[0-9]{1,5}(?:[-,][0-9]{1,5}){0,1023}")


def field_value(obj: Mapping[str, Any], key: str, kind: type, where: str) -> Any:
    """``obj[key]`` when it is of ``kind`` (``bool`` is no whole number), else one ``InputError``."""
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


def _gpu_indices(values: list[Any], where: str) -> list[int]:
    for i, gpu in enumerate(values):
        if not isinstance(gpu, int) or isinstance(gpu, bool) or not 0 <= gpu <= 4095:
            raise InputError(f"{where}[{i}] must be a GPU index (0 to 4095), got {json.dumps(gpu)[:60]}")
    return list(values)


def _nic_use(obj: Any, where: str) -> NicUse:
    if not isinstance(obj, dict):
        raise InputError(f"{where} must be an object, got {json.dumps(obj)[:60]}")
    netdev = obj.get("netdev")
    if netdev is not None and not isinstance(netdev, str):
        raise InputError(f"{where}.netdev must be a string or null, got {json.dumps(netdev)[:60]}")
    return NicUse(
        name=one_line_field(field_value(obj, "name", str, f"{where}."), f"{where}.name"),
        netdev=None if netdev is None else one_line_field(netdev, f"{where}.netdev"),
        path=one_line_field(field_value(obj, "path", str, f"{where}."), f"{where}.path"),
        gpus=_gpu_indices(field_value(obj, "gpus", list, f"{where}."), f"{where}.gpus"),
    )


def _host_plan(obj: Any, where: str) -> HostPlan:
    if not isinstance(obj, dict):
        raise InputError(f"{where} must be an object, got {json.dumps(obj)[:60]}")
    host = one_line_field(field_value(obj, "host", str, f"{where}."), f"{where}.host")
    if not host.strip():
        raise InputError(f"{where}.host is empty")
    env = field_value(obj, "env", dict, f"{where}.")
    for key, value in env.items():
        env_name(one_line_field(key, f"{where}.env key"), f"{where}.env: variable")
        if not key.startswith(PLAN_ENV_PREFIXES):
            # A plan's variables reach the training child's environment: PYTHONPATH, LD_PRELOAD or
            # BASH_ENV there would run code of the plan's choosing.
            raise InputError(f"{where}.env.{key}: a plan sets only CUDA_* and NCCL_* variables")
        if (key.startswith("CUDA_") and key not in PLAN_CUDA_VARIABLES) or (
                key.startswith("NCCL_") and _PLAN_FILE_VARIABLE_RE.search(key)):
            raise InputError(f"{where}.env.{key}: the variable names a file, folder or library the training child "
                             f"would load or write; a plan sets CUDA_DEVICE_ORDER, CUDA_VISIBLE_DEVICES and NCCL "
                             f"settings only")
        if not isinstance(value, str):
            raise InputError(f"{where}.env.{key} must be a string, got {json.dumps(value)[:60]}")
        one_line_field(value, f"{where}.env.{key}")
        if key in NCCL_NAME_LISTS and not NCCL_NAME_LIST_RE.fullmatch(value):
            raise InputError(f"{where}.env.{key} {value[:60]!r} is not NCCL's list of device names ([=|^]name,name...)")
    tf_config = field_value(obj, "tf_config", dict, f"{where}.")
    cluster = field_value(tf_config, "cluster", dict, f"{where}.tf_config.")
    for i, address in enumerate(string_list(field_value(cluster, "worker", list, f"{where}.tf_config.cluster."), "")):
        try:
            parse_host_port(one_line_field(address, f"{where}.tf_config.cluster.worker[{i}]"))
        except InputError:
            raise InputError(f"{where}.tf_config.cluster.worker[{i}] {address[:80]!r} is not host:port") from None
    cuda_visible = obj.get("cuda_visible_devices")
    if isinstance(cuda_visible, str):
        one_line_field(cuda_visible, f"{where}.cuda_visible_devices")
    if isinstance(cuda_visible, str) and not re.fullmatch(r"[0-9]{1,4}(?:,[0-9]{1,4}){0,4095}", cuda_visible):
        raise InputError(f"{where}.cuda_visible_devices {cuda_visible[:60]!r} is not a list of GPU numbers (0,1,2)")
    if isinstance(cuda_visible, str) and env.get("CUDA_VISIBLE_DEVICES", cuda_visible) != cuda_visible:
        raise InputError(f"{where}.env.CUDA_VISIBLE_DEVICES {env['CUDA_VISIBLE_DEVICES'][:60]!r} is not the entry's "
                         f"cuda_visible_devices {cuda_visible!r}")
    host_gpus = obj.get("host_gpus")
    if host_gpus is not None and (not isinstance(host_gpus, int) or isinstance(host_gpus, bool) or not 0 < host_gpus <= 4096):
        raise InputError(f"{where}.host_gpus must be a GPU count (1 to 4096) or null, got {json.dumps(host_gpus)[:60]}")
    return HostPlan(
        host=host,
        task_index=field_value(obj, "task_index", int, f"{where}."),
        gpus=_gpu_indices(field_value(obj, "gpus", list, f"{where}."), f"{where}.gpus"),
        cuda_visible_devices=one_line_field(field_value(obj, "cuda_visible_devices", str, f"{where}."),
                                            f"{where}.cuda_visible_devices"),
        numactl=numactl_list(field_value(obj, "numactl", list, f"{where}."), f"{where}.numactl"),
        nics=[_nic_use(nic, f"{where}.nics[{i}]") for i, nic in enumerate(field_value(obj, "nics", list, f"{where}."))],
        env=dict(env),
        tf_config=tf_config,
        warnings=string_list(optional_list(obj, "warnings", f"{where}."), f"{where}.warnings"),
        host_gpus=host_gpus,
    )


def plan_from_json(text: str, path: str) -> ClusterPlan:
    """A plan file's text -> ``ClusterPlan``; every problem is one ``InputError`` naming the field."""
    data = parse_json_object(text, f"plan file {path}", f" (a gputopo cluster plan, schema {PLAN_SCHEMA}: {HOW_TO_WRITE})")
    where = f"plan file {path}: "
    schema = data.get("schema")
    if schema != PLAN_SCHEMA:
        raise InputError(f"{where}schema is {json.dumps(schema)[:60]}, not {PLAN_SCHEMA!r} ({HOW_TO_WRITE})")
    gpus = field_value(data, "gpus", int, where)
    gpus_per_host = field_value(data, "gpus_per_host", int, where)
    if not 0 < gpus_per_host <= 4096 or not 0 < gpus <= 4096 * 4096:
        raise InputError(f"{where}gpus and gpus_per_host must be GPU counts (got {gpus} and {gpus_per_host})")
    reason = data.get("reason", "")
    if not isinstance(reason, str):
        raise InputError(f"{where}reason must be a string, got {json.dumps(reason)[:60]}")
    hosts = [_host_plan(obj, f"{where}hosts[{i}]") for i, obj in enumerate(field_value(data, "hosts", list, where))]
    if not hosts:
        raise InputError(f"{where}hosts is empty")
    seen: dict[int, int] = {}
    used: dict[tuple[str, int], int] = {}
    for i, entry in enumerate(hosts):
        if entry.task_index in seen:
            raise InputError(f"{where}hosts[{i}].task_index {entry.task_index} repeats hosts[{seen[entry.task_index]}]'s")
        if not 0 <= entry.task_index < len(hosts):
            raise InputError(f"{where}hosts[{i}].task_index {entry.task_index} is not a worker of this plan "
                             f"(0 to {len(hosts) - 1})")
        seen[entry.task_index] = i
        for gpu in entry.gpus:  # two tasks on one host share no GPU
            if (entry.host, gpu) in used:
                raise InputError(f"{where}hosts[{i}] uses GPU {gpu} of {entry.host}, which hosts[{used[(entry.host, gpu)]}] "
                                 "uses too")
            used[(entry.host, gpu)] = i
    plan = ClusterPlan(gpus=gpus, gpus_per_host=gpus_per_host, hosts=hosts, reason=reason, path=str(path))
    plan.port = plan.first_port() or DEFAULT_PORT
    return plan
