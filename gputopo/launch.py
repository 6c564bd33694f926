"""From a recommendation to the exact child process that trains: environment, NUMA binding, argv.

Pure Python, no TensorFlow: ``gputopo train`` builds a ``LaunchPlan`` here, prints it (``--dry-run``
stops there) and only then starts TensorFlow in a *child* process. The child is a separate process
because ``CUDA_DEVICE_ORDER`` and ``CUDA_VISIBLE_DEVICES`` only take effect if they are set before
CUDA initialises, and because a TF process cannot change its device configuration once running.

``TrainConfig`` is the child's whole job description; it round-trips through command-line flags
(``to_argv`` / ``from_argv``) so the printed command is exactly what runs and can be rerun by hand.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import signal
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from gputopo.errors import InputError
from gputopo.numbering import cuda_env, host_cuda_numbers

STRATEGIES = ("mirrored", "multi-worker", "parameter-server")
MODELS = ("cnn", "mobilenetv2")
CROSS_DEVICE_OPS = ("NcclAllReduce", "HierarchicalCopyAllReduce", "ReductionToOneDevice")
CHILD_MODULE = "gputopo.tf.train"
LOOPBACK = "127.0.0.1"
INTERRUPTED_EXIT_CODE = 130  # a child stopped by Ctrl-C/SIGTERM after saving its checkpoint


@dataclass
class TrainConfig:
    """Everything the training child needs; every field is a ``--flag`` of ``python -m gputopo.tf.train``."""

    data: str = "synthetic"
    model: str = "cnn"
    batch_size: int = 64  # global batch: split evenly over all replicas (of all workers)
    epochs: int = 1
    steps_per_epoch: int | None = None  # None: one pass over the training images (synthetic: 50)
    learning_rate: float = 0.001
    image_size: int | None = None  # resize images to this square size (None: the data's own size)
    seed: int = 0
    evaluate: bool = True  # evaluate on test/ after each epoch
    cpu_devices: int | None = None  # N logical CPU devices stand in for GPUs
    strategy: str = "mirrored"
    cross_device_ops: str | None = None  # MirroredStrategy all-reduce on GPUs (from the recommendation)
    checkpoint_dir: str | None = None
    checkpoint_every: int = 100  # steps between checkpoints (0: only at the end)
    resume: bool = False
    result_file: str | None = None  # where the child writes its JSON summary (or error)
    workers: list[str] = field(default_factory=list)  # multi-worker: host:port of every worker
    task_index: int = 0  # multi-worker: which of ``workers`` this process is
    ps: int = 0  # parameter-server: number of in-process parameter servers
    ps_workers: int = 0  # parameter-server: number of in-process workers
    startup_timeout_s: float = 120.0  # multi-worker: give up if the peers do not answer by then
    progress: bool = True  # draw the progress bar on standard error

    def validate(self) -> None:
        """Reject option values that can never work, before any process or TensorFlow starts."""
        if self.model not in MODELS:
            raise InputError(f"unknown model {self.model!r}; choose one of: {', '.join(MODELS)}")
        if self.strategy not in STRATEGIES:
            raise InputError(f"unknown strategy {self.strategy!r}; choose one of: {', '.join(STRATEGIES)}")
        for name in ("batch_size", "epochs"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 1:
            raise InputError(f"--steps-per-epoch must be at least 1, got {self.steps_per_epoch}")
        if self.checkpoint_every < 0:
            raise InputError(f"--checkpoint-every must be 0 or more, got {self.checkpoint_every}")
        if not 0 < self.learning_rate < float("inf"):
            raise InputError(f"--learning-rate must be a positive number, got {self.learning_rate}")
        if not self.startup_timeout_s > 0:  # a timeout already over would stop every multi-worker run
            raise InputError(f"--startup-timeout must be a positive number of seconds, got {self.startup_timeout_s}")
        if self.image_size is not None and self.image_size < 8:
            raise InputError(f"--image-size must be at least 8, got {self.image_size}")
        if self.model == "mobilenetv2" and self.image_size is not None and self.image_size < 32:
            raise InputError("MobileNetV2 needs images of at least 32x32; use --image-size 32 or more")
        if self.cpu_devices is not None and self.cpu_devices < 1:
            raise InputError(f"--cpu-devices must be at least 1, got {self.cpu_devices}")
        if self.cross_device_ops is not None and self.cross_device_ops not in CROSS_DEVICE_OPS:
            raise InputError(
                f"unknown cross-device op {self.cross_device_ops!r}; choose one of: {', '.join(CROSS_DEVICE_OPS)}"
            )

    def to_argv(self) -> list[str]:
        """The flags that reproduce this config (defaults left out, so the command stays short)."""
        argv: list[str] = []
        defaults = TrainConfig()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == getattr(defaults, f.name):
                continue
            flag = "--" + f.name.replace("_", "-")
            if isinstance(value, bool):
                argv.append(flag if value else "--no-" + f.name.replace("_", "-"))
            elif isinstance(value, list):
                argv += [flag, ",".join(value)]
            elif value is None:
                continue
            else:
                argv += [flag, str(value)]
        return argv

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> TrainConfig:
        """Parse the child's command line (the inverse of ``to_argv``)."""
        parser = argparse.ArgumentParser(
            prog=f"python -m {CHILD_MODULE}",
            description="The training process that `gputopo train` launches (run it by hand to reproduce a run).",
        )
        defaults = cls()
        for f in dataclasses.fields(cls):
            flag = "--" + f.name.replace("_", "-")
            default = getattr(defaults, f.name)
            if isinstance(default, bool):
                parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default)
            elif isinstance(default, list):
                parser.add_argument(flag, dest=f.name, default="", type=str)
            else:
                kind = {"int": int, "float": float}.get(str(f.type).split(" ")[0], str)
                parser.add_argument(flag, dest=f.name, default=default, type=kind)
        ns = parser.parse_args(list(argv))
        values = vars(ns)
        for f in dataclasses.fields(cls):
            if isinstance(getattr(defaults, f.name), list):
                text = values[f.name]
                values[f.name] = [part for part in text.split(",") if part] if isinstance(text, str) else list(text)
        config = cls(**values)
        config.validate()
        return config


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
        env_part = " ".join(f"{k}={shlex.quote(v)}" for k, v in self.env.items())
        return f"{env_part} {shlex.join(self.command())}".strip()

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


def child_argv(config: TrainConfig, python: str | None = None) -> list[str]:
    """``python -m gputopo.tf.train <flags>``: the training child's argv."""
    return [python or sys.executable, "-m", CHILD_MODULE, *config.to_argv()]


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
        reason=getattr(group, "reason", None),
    )


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
    gpus: int | None = None,
    devices: str | None = None,
    from_file: str | None = None,
    machine: str | None = None,
    tf_log: str | None = None,
    numactl_path: str | None = None,
) -> LaunchPlan:
    """The plan for ``gputopo train``: logical CPU devices, ``--devices``, or ``recommend``'s best group.

    With ``--cpu-devices`` and a topology source, the GPU choice is still made and shown as a note
    (what would run on that machine), while the run itself uses the CPU devices.
    """
    if gpus is not None and devices is not None:
        raise InputError("give either --gpus N or --devices LIST, not both")
    if gpus is not None and gpus < 1:
        raise InputError(f"--gpus must be at least 1, got {gpus}")
    has_source = any(v is not None for v in (from_file, machine, tf_log))
    gpu_plan: LaunchPlan | None = None
    if config.cpu_devices is None or has_source:
        from gputopo.analysis import with_findings
        from gputopo.errors import NvmlUnavailable
        from gputopo.sources import load_topology

        try:
            topology = with_findings(load_topology(from_file=from_file, machine=machine, tf_log=tf_log))
        except NvmlUnavailable as exc:
            raise NvmlUnavailable(f"{exc}; or train on logical CPU devices with --cpu-devices N") from None
        if not topology.gpus:
            raise InputError("the topology has no GPUs; use --cpu-devices N to train on logical CPU devices")
        if devices is not None:
            from gputopo.notation import parse_gpu_list

            gpu_plan = plan_from_devices(topology, parse_gpu_list(devices, "--devices"), numactl_path)
        else:
            count = gpus or len(topology.gpus)
            if count > len(topology.gpus):
                raise InputError(f"--gpus {count}: the topology has only {len(topology.gpus)} GPUs")
            from gputopo.analysis.recommend import recommend

            recommendation = recommend(topology, count)
            if not recommendation.groups:
                raise InputError(f"no group of {count} GPUs can be recommended on this topology")
            gpu_plan = plan_from_group(recommendation.groups[0], numactl_path, topology)
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
        if local_workers is not None:
            raise InputError("--local-workers is for --strategy multi-worker; parameter-server takes --workers N --ps N")
        try:
            worker_count = int(workers) if workers is not None else 2
        except ValueError:
            raise InputError(f"--strategy parameter-server takes --workers N (a count), got {workers!r}") from None
        ps_count = 1 if ps is None else ps
        if worker_count < 1 or ps_count < 1:
            raise InputError("--strategy parameter-server needs at least one worker and one parameter server")
        spec_config = dataclasses.replace(base, ps=ps_count, ps_workers=worker_count)
        plan.notes.append(
            f"asynchronous SGD: {worker_count} workers and {ps_count} parameter server(s), in-process on this host"
        )
        return [ProcessSpec("training process (coordinator)", spec_config, dict(plan.env), list(plan.numactl))]
    if ps is not None:
        raise InputError("--ps is for --strategy parameter-server")
    replicas_per_worker = plan.replicas if plan.device_kind == "GPU" else 1
    envs = [dict(plan.env)]
    if local_workers is not None:
        if workers is not None:
            raise InputError("give either --workers host:port,... or --local-workers N, not both")
        if local_workers < 1:
            raise InputError(f"--local-workers must be at least 1, got {local_workers}")
        if plan.device_kind == "GPU":  # workers on one host share its GPUs out, each its own
            envs = _split_gpus(plan, local_workers)
            replicas_per_worker = plan.replicas // local_workers
        addresses = [f"{LOOPBACK}:{port}" for port in free_local_ports(local_workers)]
        task_indices = list(range(local_workers))
    elif workers is not None:
        addresses = parse_workers(workers)
        if not 0 <= config.task_index < len(addresses):
            raise InputError(f"--task-index {config.task_index} is not one of 0..{len(addresses) - 1}")
        check_own_address(addresses[config.task_index])
        task_indices = [config.task_index]
    else:
        raise InputError("--strategy multi-worker needs --workers host:port,... or --local-workers N")
    check_batch_split(config.batch_size, replicas_per_worker * len(addresses), "replicas across all workers")
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


def check_batch_split(global_batch: int, replicas: int, what: str = "replicas") -> None:
    """Every replica must get the same share of the global batch (the loss is averaged over all of it)."""
    if global_batch % replicas:
        suggestion = replicas * max(1, round(global_batch / replicas))
        raise InputError(
            f"global batch {global_batch} does not split evenly over {replicas} {what}; "
            f"use a multiple of {replicas} (e.g. --batch-size {suggestion})"
        )


def check_own_address(address: str) -> None:
    """A worker must be able to listen on its own address: a clear error if the port is taken."""
    host, port = parse_address(address)
    if host in ("127.0.0.1", "localhost", "0.0.0.0") or host == socket.gethostname():
        check_port_free("127.0.0.1" if host == "localhost" else host, port)


def parse_address(text: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)`` with a clear error on anything else."""
    host, sep, port_text = text.strip().rpartition(":")
    if not sep or not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise InputError(f"worker address {text!r} is not host:port (e.g. 127.0.0.1:12345)")
    return host, int(port_text)


def parse_workers(text: str) -> list[str]:
    """``"h1:p1,h2:p2"`` -> validated addresses (``--workers``)."""
    addresses = [part.strip() for part in text.split(",") if part.strip()]
    if not addresses:
        raise InputError("--workers is empty; give host:port for every worker, e.g. 10.0.0.1:2222,10.0.0.2:2222")
    for address in addresses:
        parse_address(address)
    if len(set(addresses)) != len(addresses):
        raise InputError("--workers lists the same address twice")
    return addresses


def tf_config(workers: Sequence[str], task_index: int, ps: Sequence[str] = (), task_type: str = "worker") -> str:
    """The ``TF_CONFIG`` JSON that MultiWorkerMirroredStrategy reads to find its cluster and itself."""
    cluster: dict[str, list[str]] = {"worker": list(workers)}
    if ps:
        cluster["ps"] = list(ps)
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": task_index}})


def check_port_free(host: str, port: int) -> None:
    """Raise ``InputError`` if ``port`` on ``host`` cannot be bound (another process holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As gRPC does: connections of an earlier run lingering in TIME_WAIT do not block the port,
        # only a process listening on it does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise InputError(
                f"port {port} on {host} is in use ({exc.strerror or exc}); pick another port for this worker"
            ) from None


def free_local_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports that were free on ``host`` a moment ago (for local workers)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def address_answers(address: str, timeout_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def describe_exit(returncode: int) -> str:
    """``-9`` -> ``"was killed by SIGKILL"``; ``3`` -> ``"exited with status 3"``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def latest_checkpoint_step(checkpoint_dir: str | os.PathLike[str] | None) -> int | None:
    """The step of the newest complete checkpoint, read from TF's ``checkpoint`` state file.

    ``gputopo.tf.train`` numbers checkpoints by step (``ckpt-<step>``); TF rewrites the state file
    atomically only after a checkpoint is complete, so what it names is always whole. No TF needed.
    """
    if checkpoint_dir is None:
        return None
    state = Path(checkpoint_dir) / "checkpoint"
    try:
        text = state.read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("model_checkpoint_path:"):
            name = line.split(":", 1)[1].strip().strip('"')
            _, _, number = Path(name).name.rpartition("-")
            if number.isdigit():
                return int(number)
    return None


def check_checkpoint_dir_writable(checkpoint_dir: str) -> None:
    """Create ``--checkpoint-dir`` and write a test file there, before any training starts.

    Otherwise a folder that cannot be written only shows at the first checkpoint, after the first
    ``--checkpoint-every`` steps of training. URLs (``gs://...``) are left to TensorFlow.
    """
    if "://" in checkpoint_dir:
        return
    import tempfile

    try:
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=checkpoint_dir, prefix=".gputopo-write-test-"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write checkpoints to {checkpoint_dir}: {exc.strerror or exc}") from None


def resume_hint(checkpoint_dir: str | os.PathLike[str] | None) -> str:
    """Where the last checkpoint is and how to continue from it, for failure messages."""
    step = latest_checkpoint_step(checkpoint_dir)
    if step is None:
        return "no checkpoint was saved"
    return f"the last checkpoint is at step {step} in {checkpoint_dir}; rerun with --resume to continue"
