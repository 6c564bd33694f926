"""From a recommendation to the exact child processes that train: GPUs, environment, NUMA binding,
argv. The parent's planning, no TensorFlow.

``gputopo train`` builds a ``LaunchPlan`` here, prints it (``--dry-run`` stops there) and only then
starts TensorFlow in *child* processes (``gputopo.train.launch.supervise``). A child is a separate process
because ``CUDA_DEVICE_ORDER`` and ``CUDA_VISIBLE_DEVICES`` only take effect if they are set before
CUDA initialises, and because a TF process cannot change its device configuration once running.
CUDA numbers come from ``gputopo.numbering`` (the ones ``recommend`` prints).
"""

from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.notation import ascii_int
from gputopo.numbering import cuda_env, host_cuda_numbers
from gputopo.quoting import env_assignment, shell_words
from gputopo.train.workers import LOOPBACK, check_own_address, free_local_ports, parse_workers
from gputopo.train.config import MAX_LOCAL_PROCESSES, TrainConfig, check_batch_split, child_argv


@dataclass
class LaunchPlan:
    """Where the training runs and why there (the GPUs, their binding, the recommendation's advice)."""

    device_kind: str  # "GPU" or "CPU" (logical CPU devices standing in for GPUs)
    replicas: int  # devices per worker process
    gpus: list[int]  # NVML indices (PCI bus order); empty on CPU devices
    env: dict[str, str]  # set in the child before TensorFlow starts
    numactl: list[str]  # command prefix binding CPU and memory to the GPUs' NUMA node (may be empty)
    cross_device_ops: str | None = None
    numa_node: int | None = None
    ring: list[int] | None = None
    bottleneck_gbps: float | None = None
    # How the slowest hop's figure was had: "measured", "estimated" (for its link type) or "assumed"
    # (the low end of a range: a fact it depends on is not in the source); None: not known.
    bottleneck_basis: str | None = None
    reason: str | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


@dataclass
class ProcessSpec:
    """One training process to start: its label for messages, its config, environment and prefix."""

    label: str  # "training process", "worker 1 (127.0.0.1:23456)"
    config: TrainConfig
    env: dict[str, str]
    prefix: list[str] = field(default_factory=list)  # numactl binding, if any
    python: str = field(default_factory=lambda: sys.executable)

    def command(self, result_file: str | None = None) -> list[str]:
        """The child's full argv; ``result_file`` is where the parent wants the summary."""
        config = dataclasses.replace(self.config, result_file=result_file)
        return [*self.prefix, *child_argv(config, self.python)]

    def shell_line(self) -> str:
        """The exact command as one shell line, environment first, ready to paste and rerun."""
        env_part = " ".join(env_assignment(k, v, export=False) for k, v in self.env.items())
        return f"{env_part} {shell_words(self.command())}".strip()

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "env": dict(self.env), "command": self.command(), "shell": self.shell_line()}


def numactl_prefix(numa_node: int | None, numactl_path: str | None) -> list[str]:
    """``numactl --cpunodebind=N --membind=N`` when the GPUs share NUMA node N and numactl exists.

    Binding keeps the input pipeline's threads and host buffers on the socket the GPUs hang off,
    so host-to-device copies do not cross QPI/UPI.
    """
    if numa_node is None or numa_node < 0 or not numactl_path:
        return []
    return [numactl_path, f"--cpunodebind={numa_node}", f"--membind={numa_node}"]


def _common_numa_node(numa_nodes: Iterable[int | None]) -> int | None:
    nodes = set(numa_nodes)
    if len(nodes) == 1:
        (node,) = nodes
        return node
    return None


def plan_from_group(group: Any, numactl_path: str | None, topology: Any = None) -> LaunchPlan:
    """A plan for one recommended group (``gputopo.analysis.recommend``'s groups).

    Reads the group's attributes by name so the plan follows the recommendation as it is: its
    GPUs and ``CUDA_VISIBLE_DEVICES`` (ring order), its cross-device op and its NUMA node. With
    the ``topology``, a group spanning hosts is refused and a host's GPUs get their local numbers.
    """
    gpus = [int(g) for g in group.gpus]
    if topology is not None:
        env = cuda_env(host_cuda_numbers(topology, gpus, f"the best {len(gpus)}"))
    else:
        env = cuda_env(gpus)
        visible = getattr(group, "cuda_visible_devices", None)
        if visible:
            env["CUDA_VISIBLE_DEVICES"] = str(visible)
    # What recommend printed beside the GPUs: NCCL_P2P_DISABLE=1 where its P2P is broken until a fix.
    env.update({name: value for name, value in getattr(group, "env", {}).items() if name.startswith("NCCL_")})
    numa_node = getattr(group, "numa_node", None)
    return LaunchPlan(
        device_kind="GPU",
        replicas=len(gpus),
        gpus=gpus,
        env=env,
        numactl=numactl_prefix(numa_node, numactl_path),
        cross_device_ops=getattr(group, "cross_device_ops", None),
        numa_node=numa_node,
        ring=list(getattr(group, "ring", None) or []) or None,
        bottleneck_gbps=getattr(group, "bottleneck_gbps", None),
        bottleneck_basis=getattr(getattr(group, "slowest_hop", None), "basis", None),
        reason=getattr(group, "reason", None),
        notes=_until_fixed_notes(group),
    )


def _until_fixed_notes(group: Any) -> list[str]:
    """Where the group's P2P is broken until a fix, what its slowest hop carries today (the plan's
    slowest hop is the figure once fixed): recommend's ``allreduce_busbw_until_fixed_gbps``."""
    today = getattr(group, "allreduce_busbw_until_fixed_gbps", None)
    if today is None:
        return []
    if "NCCL_P2P_DISABLE" not in (getattr(group, "env", None) or {}):
        return [f"the slowest hop above is the figure once P2P is fixed; today, with P2P as it is, ~{today:.1f} GB/s "
                "per direction"]
    return [f"the slowest hop above is the figure once P2P is fixed; today, with NCCL_P2P_DISABLE=1 until the fix, "
            f"~{today:.1f} GB/s per direction (copies through host memory)"]


def plan_from_devices(topology: Any, gpus: Sequence[int], numactl_path: str | None) -> LaunchPlan:
    """A plan for GPUs the user named with ``--devices`` (no ranking, their order kept)."""
    known = set(topology.gpu_indices)
    if len(set(gpus)) != len(gpus):
        raise InputError(f"--devices names a GPU twice: {','.join(str(g) for g in gpus)}")
    missing = [g for g in gpus if g not in known]
    if missing:
        raise InputError(
            f"--devices names GPU {missing[0]}, but this topology has GPUs {','.join(str(g) for g in sorted(known))}"
        )
    numa_node = _common_numa_node(topology.gpu(g).numa_node for g in gpus)
    return LaunchPlan(
        device_kind="GPU",
        replicas=len(gpus),
        gpus=list(gpus),
        env=cuda_env(host_cuda_numbers(topology, gpus, "--devices names")),
        numactl=numactl_prefix(numa_node, numactl_path),
        numa_node=numa_node,
        reason="chosen with --devices",
    )


def plan_for_cpu_devices(count: int) -> LaunchPlan:
    """A plan on ``count`` logical CPU devices; GPUs are hidden from the child."""
    return LaunchPlan(
        device_kind="CPU",
        replicas=count,
        gpus=[],
        env={"CUDA_VISIBLE_DEVICES": ""},
        numactl=[],
        reason=f"{count} logical CPU device{'s' if count != 1 else ''} stand{'' if count != 1 else 's'} in for GPUs (--cpu-devices)",
    )


def build_plan(
    config: TrainConfig,
    topology: Topology | None,
    gpus: int | None = None,
    devices: str | None = None,
    numactl_path: str | None = None,
    allow_busy: bool = False,
) -> LaunchPlan:
    """The plan for ``gputopo train``: logical CPU devices, ``--devices``, or ``recommend``'s best group
    on ``topology`` (the machine's, resolved by the caller; None with ``--cpu-devices`` and no source).

    GPUs another process computes on (NVML's live state) are left out of the pick while enough
    others remain; a plan that still lands on one is refused unless ``allow_busy``.

    With ``--cpu-devices`` and a topology, the GPU choice is still made and shown as a note (what
    would run on that machine), while the run itself uses the CPU devices.
    """
    if gpus is not None and devices is not None:
        raise InputError("give either --gpus N or --devices LIST, not both")
    if gpus is not None and gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {gpus}")
    if topology is None and config.cpu_devices is None:
        raise ValueError("build_plan needs a topology unless it trains on logical CPU devices")
    if config.cpu_devices is not None and (gpus is not None or devices is not None) and topology is None:
        given = f"--gpus {gpus}" if gpus is not None else f"--devices {devices}"
        raise InputError(f"{given} picks GPUs, --cpu-devices {config.cpu_devices} runs on logical CPU devices instead: "
                         "give one (with --machine or --from too, --cpu-devices shows which GPUs it would pick there)")
    gpu_plan: LaunchPlan | None = None
    if topology is not None:
        if not topology.gpus:
            raise InputError("the topology has no GPUs; use --cpu-devices N to train on logical CPU devices")
        if devices is not None:
            from gputopo.notation import parse_gpu_list

            gpu_plan = plan_from_devices(topology, parse_gpu_list(devices, "--devices"), numactl_path)
        else:
            count = gpus or len(topology.gpus)
            if count > len(topology.gpus):
                raise InputError(f"--gpus {count}: the topology has only {len(topology.gpus)} GPUs")
            from gputopo.analysis.busy import BusyLimits, choose_skipped
            from gputopo.analysis.recommend import recommend

            # Only a compute process makes a GPU busy here (100%: memory and utilisation alone do not).
            skipped, _busy, busy_notes = choose_skipped(topology, count, [], [], BusyLimits(100.0, 100.0), "skip")
            recommendation = recommend(topology, count, exclude=skipped)
            if not recommendation.groups:
                raise InputError(f"no group of {count} GPUs can be recommended on this topology")
            gpu_plan = plan_from_group(recommendation.groups[0], numactl_path, topology)
            gpu_plan.notes.extend(busy_notes)
            if recommendation.budget_note:  # a large machine: the pick is the best found, not proven
                gpu_plan.notes.append(recommendation.budget_note)
        if config.cpu_devices is None and not allow_busy:
            _refuse_busy(topology, gpu_plan.gpus)
    if config.cpu_devices is None:
        assert gpu_plan is not None
        return gpu_plan
    plan = plan_for_cpu_devices(config.cpu_devices)
    if gpu_plan is not None:
        plan.notes.append(
            f"on that machine the choice is GPUs {','.join(str(g) for g in gpu_plan.gpus)}"
            + (f" ({gpu_plan.reason})" if gpu_plan.reason else "")
            + "; this run uses the logical CPU devices instead"
        )
    return plan


def _refuse_busy(topology: Topology, gpus: list[int]) -> None:
    """An InputError where another process computes on one of ``gpus`` (NVML's live state)."""
    from gputopo.analysis.busy import BusyLimits, busy_reasons, live_state_time

    for index in gpus:
        reasons = busy_reasons(topology.gpu(index), BusyLimits(100.0, 100.0))
        if reasons:
            raise InputError(f"GPU {index} is in use ({'; '.join(reasons)}; {live_state_time(topology)}): train on "
                             "others (--devices, or fewer --gpus), wait for it, or add --allow-busy to share it")


def training_processes(
    plan: LaunchPlan,
    config: TrainConfig,
    workers: str | None = None,
    local_workers: int | None = None,
    ps: int | None = None,
) -> list[ProcessSpec]:
    """The processes one ``gputopo train`` starts for its strategy, each with its exact command.

    Also checks that the global batch splits evenly over every replica of every worker.
    """
    base = dataclasses.replace(config, cross_device_ops=config.cross_device_ops or plan.cross_device_ops)
    if base.strategy == "mirrored":
        if workers is not None or local_workers is not None or ps is not None:
            raise InputError("--workers, --local-workers and --ps need --strategy multi-worker or parameter-server")
        check_batch_split(config.batch_size, plan.replicas, "replicas")
        return [ProcessSpec("training process", base, dict(plan.env), list(plan.numactl))]
    if base.strategy == "parameter-server":
        return [_parameter_server_process(plan, base, workers, local_workers, ps)]
    if ps is not None:
        raise InputError("--ps is for --strategy parameter-server")
    return _multi_worker_processes(plan, base, workers, local_workers)


def _parameter_server_process(
    plan: LaunchPlan, base: TrainConfig, workers: str | None, local_workers: int | None, ps: int | None
) -> ProcessSpec:
    """One coordinator process with its parameter servers and workers in-process."""
    if local_workers is not None:
        raise InputError("--local-workers is for --strategy multi-worker; parameter-server takes --workers N --ps N")
    worker_count = ascii_int(workers.strip(), 6) if workers is not None else 2
    if worker_count is None:
        raise InputError(f"--strategy parameter-server takes --workers N (a count), got {str(workers)[:40]!r}")
    ps_count = 1 if ps is None else ps
    if worker_count < 1 or ps_count < 1:
        raise InputError("--strategy parameter-server needs at least one worker and one parameter server")
    if worker_count > MAX_LOCAL_PROCESSES or ps_count > MAX_LOCAL_PROCESSES:
        raise InputError(f"--strategy parameter-server runs its servers in one process: at most {MAX_LOCAL_PROCESSES} "
                         f"workers and {MAX_LOCAL_PROCESSES} parameter servers (got {worker_count} and {ps_count})")
    spec_config = dataclasses.replace(base, ps=ps_count, ps_workers=worker_count)
    plan.notes.append(
        f"asynchronous SGD: {worker_count} workers and {ps_count} parameter server(s), in-process on this host"
    )
    return ProcessSpec("training process (coordinator)", spec_config, dict(plan.env), list(plan.numactl))


def _multi_worker_processes(
    plan: LaunchPlan, base: TrainConfig, workers: str | None, local_workers: int | None
) -> list[ProcessSpec]:
    """``--local-workers N`` processes here, or this host's one worker of ``--workers``."""
    replicas_per_worker = plan.replicas if plan.device_kind == "GPU" else 1
    envs = [dict(plan.env)]
    if local_workers is not None:
        if workers is not None:
            raise InputError("give either --workers host:port,... or --local-workers N, not both")
        if not 1 <= local_workers <= MAX_LOCAL_PROCESSES:
            raise InputError(f"--local-workers must be from 1 to {MAX_LOCAL_PROCESSES}, got {local_workers}")
        if plan.device_kind == "GPU":  # workers on one host share its GPUs out, each its own
            envs = _split_gpus(plan, local_workers)
            replicas_per_worker = plan.replicas // local_workers
        addresses = [f"{LOOPBACK}:{port}" for port in free_local_ports(local_workers)]
        task_indices = list(range(local_workers))
    elif workers is not None:
        addresses = parse_workers(workers)
        if not 0 <= base.task_index < len(addresses):
            raise InputError(f"--task-index {base.task_index} is not one of 0..{len(addresses) - 1}")
        check_own_address(addresses[base.task_index])
        task_indices = [base.task_index]
    else:
        raise InputError("--strategy multi-worker needs --workers host:port,... or --local-workers N")
    check_batch_split(base.batch_size, replicas_per_worker * len(addresses), "replicas across all workers")
    if plan.device_kind == "CPU" and (plan.replicas > 1) and replicas_per_worker == 1:
        plan.notes.append("MultiWorkerMirroredStrategy uses one CPU device per worker: one replica per worker")
    return [
        ProcessSpec(
            f"worker {i} ({addresses[i]})",
            dataclasses.replace(base, workers=list(addresses), task_index=i),
            dict(envs[i] if len(envs) > 1 else envs[0]),
            list(plan.numactl),
        )
        for i in task_indices
    ]


def _split_gpus(plan: LaunchPlan, local_workers: int) -> list[dict[str, str]]:
    """Each local worker's environment: its own share of the plan's GPUs, in the plan's order.

    Every worker process would otherwise see (and allocate the memory of) all the plan's GPUs.
    """
    visible = plan.env["CUDA_VISIBLE_DEVICES"].split(",")
    if len(visible) % local_workers:
        raise InputError(
            f"--local-workers {local_workers} cannot share out the {len(visible)} GPUs of the plan evenly "
            "(each worker gets GPUs of its own); use a count that divides it"
        )
    share = len(visible) // local_workers
    return [
        {**plan.env, "CUDA_VISIBLE_DEVICES": ",".join(visible[i * share : (i + 1) * share])}
        for i in range(local_workers)
    ]


def scaling_processes(plan: LaunchPlan, config: TrainConfig, sizes: Sequence[int], steps: int) -> list[ProcessSpec]:
    """``--scaling``: brief runs on 1, 2, 4... devices of the plan (each in its own process), same
    per-replica batch. Each size needs its own process: two MirroredStrategies with different
    device counts collide in one TensorFlow process."""
    if config.strategy != "mirrored":
        raise InputError("--scaling measures --strategy mirrored on this host")
    if steps < 2:
        raise InputError(f"--scaling-steps must be at least 2 (the first step compiles), got {steps}")
    if sizes[-1] > plan.replicas:
        raise InputError(f"--scaling {sizes[-1]} needs {sizes[-1]} devices; the plan has {plan.replicas}")
    check_batch_split(config.batch_size, plan.replicas)
    per_replica = config.batch_size // plan.replicas
    specs = []
    for count in sizes:
        run_config = dataclasses.replace(
            config, batch_size=per_replica * count, epochs=1, steps_per_epoch=steps, evaluate=False,
            checkpoint_dir=None, resume=False,
        )  # fmt: skip
        if plan.device_kind == "CPU":
            run_config.cpu_devices, env = count, dict(plan.env)
        else:  # the first GPUs in the recommended (ring) order
            env = cuda_env([int(g) for g in plan.env["CUDA_VISIBLE_DEVICES"].split(",")[:count]])
        specs.append(ProcessSpec(f"{count}-device run", run_config, env, list(plan.numactl)))
    return specs
