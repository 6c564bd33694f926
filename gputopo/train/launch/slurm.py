"""``gputopo train --launcher slurm``: one Slurm task finds its plan entry and its place in the cluster.

Slurm starts the processes (``srun``, one task per worker) and cleans them up; each task here:

- ``slurm_task``: reads its Slurm variables (a missing one is one line);
- ``slurm_entry``: picks its entry of the plan: the entries whose ``host`` is ``SLURMD_NODENAME``,
  in the plan's order, the k-th of them for ``SLURM_LOCALID`` k;
- ``resolve_cluster``: every worker's address from TensorFlow's ``SlurmClusterResolver`` (its own
  GPU assignment off: the plan sets ``CUDA_VISIBLE_DEVICES``), and this task's index in it;
- ``slurm_launch``: the training child (MultiWorkerMirroredStrategy, worker 0 is the chief).

``--dry-run`` needs no Slurm and no TensorFlow: ``expected_cluster`` predicts the resolver's
addresses from the plan and ``sbatch_script`` prints the job to submit.
TensorFlow is imported (through ``gputopo.tfruntime``) only for the resolver, in the Slurm task.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Mapping

from gputopo.errors import InputError
from gputopo.notation import ascii_int, count_word
from gputopo.quoting import check_text as _check_text
from gputopo.quoting import comment, shell_words, slurm_node
from gputopo.train.config import TrainConfig
from gputopo.model.cluster_plan import DEFAULT_PORT, ClusterPlan, HostPlan
from gputopo.train.launch.plan_file import Launch, TaskLaunch, host_launch_plan, task_process

SLURM_VARIABLES = (
    "SLURM_PROCID",  # this task's rank in the step
    "SLURM_LOCALID",  # its rank on its node
    "SLURMD_NODENAME",  # the node (the plan's host)
    "SLURM_STEP_NUM_TASKS",  # what SlurmClusterResolver reads
    "SLURM_STEP_NODELIST",
    "SLURM_STEP_TASKS_PER_NODE",
)


MAX_SLURM_NODES = 65536  # TensorFlow's resolver expands the node list: bounded before it does
_TASKS_ITEM_RE = re.compile(r"(\d{1,6})(?:\(x(\d{1,9})\))?", re.ASCII)
_RANGE_RE = re.compile(r"(\d{1,9})(?:-(\d{1,9}))?", re.ASCII)


def _top_level_items(text: str) -> list[str]:
    items, depth, start = [], 0, 0
    for k, char in enumerate(text):
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            raise ValueError("unbalanced brackets")
        if char == "," and depth == 0:
            items.append(text[start:k])
            start = k + 1
    if depth:
        raise ValueError("unbalanced brackets")
    return [*items, text[start:]]


def hostlist_count(text: str) -> int:
    """How many nodes a Slurm host list (``node[1-4,7],gpu[01-02]x``) names, counted without
    expanding it; ``ValueError`` for one that is not a host list."""
    total = 0
    for item in _top_level_items(text):
        count = 1
        for group in re.findall(r"\[([^\]]*)\]", item):
            size = 0
            for part in group.split(","):
                match = _RANGE_RE.fullmatch(part)
                if not match:
                    raise ValueError(f"bad range {part[:20]!r}")
                low, high = int(match.group(1)), int(match.group(2) or match.group(1))
                if high < low:
                    raise ValueError(f"bad range {part[:20]!r}")
                size += high - low + 1
            count *= size
        total += count
        if total > MAX_SLURM_NODES:
            break
    return total


def tasks_per_node_count(text: str) -> int:
    """How many nodes ``SLURM_STEP_TASKS_PER_NODE`` (``2(x3),1``) covers, without expanding it."""
    total = 0
    for item in text.split(","):
        match = _TASKS_ITEM_RE.fullmatch(item.strip())
        if not match:
            raise ValueError(f"bad item {item[:20]!r}")
        total += int(match.group(2) or 1)
    return total


def check_text_line(text: str, what: str) -> None:
    """One ``InputError`` for a control character (newline included) in ``text``."""
    try:
        _check_text(text, what)
    except ValueError as exc:
        raise InputError(str(exc)) from None


def _check_step_lists(environ: Mapping[str, str]) -> None:
    """The node and task lists TensorFlow's resolver expands: well formed and at most
    ``MAX_SLURM_NODES`` nodes (``node[1-100000000]`` would take gigabytes), checked first."""
    for name, count in (("SLURM_STEP_NODELIST", hostlist_count), ("SLURM_STEP_TASKS_PER_NODE", tasks_per_node_count)):
        text = environ[name].strip()
        try:
            nodes = count(text) if len(text) <= 65536 else MAX_SLURM_NODES + 1
        except ValueError as exc:
            raise InputError(f"{name} {text[:60]!r} is not a Slurm list ({exc})") from None
        if nodes > MAX_SLURM_NODES:
            raise InputError(f"{name} names more than {MAX_SLURM_NODES} nodes: refused before expanding it")


@dataclass(frozen=True)
class SlurmTask:
    """This process as a task of a Slurm job step."""

    procid: int
    localid: int
    node: str
    step_tasks: int


def slurm_task(environ: Mapping[str, str]) -> SlurmTask:
    """The task's Slurm variables; the first one missing (or not a number) is one ``InputError``."""
    for name in SLURM_VARIABLES:
        if not environ.get(name, "").strip():
            raise InputError(
                f"{name} is not set: --launcher slurm runs as a task of a Slurm job step "
                "(srun ... gputopo train --launcher slurm ..., or the sbatch script that --dry-run prints)"
            )
    numbers = {}
    for name in ("SLURM_PROCID", "SLURM_LOCALID", "SLURM_STEP_NUM_TASKS"):
        text = environ[name].strip()
        number = ascii_int(text, 9)
        if number is None:
            raise InputError(f"{name} is {text[:40]!r}, not a number")
        numbers[name] = number
    _check_step_lists(environ)
    node = environ["SLURMD_NODENAME"].strip()
    check_text_line(node, "SLURMD_NODENAME")
    return SlurmTask(
        procid=numbers["SLURM_PROCID"],
        localid=numbers["SLURM_LOCALID"],
        node=node,
        step_tasks=numbers["SLURM_STEP_NUM_TASKS"],
    )


def slurm_entry(plan: ClusterPlan, task: SlurmTask) -> HostPlan:
    """The plan entry of ``task``: the ``SLURM_LOCALID``-th of the entries for its node."""
    mine = [entry for entry in plan.hosts if entry.host == task.node]
    if not mine:
        raise InputError(
            f"task {task.procid} runs on {task.node}, which is not in {plan.path} (hosts: {', '.join(plan.host_names)})"
        )
    if task.localid >= len(mine):
        raise InputError(
            f"task {task.procid} is task {task.localid + 1} on {task.node}, but {plan.path} has "
            f"{count_word(len(mine), 'entry', 'entries')} for {task.node}; start {len(mine)} task(s) per node there"
        )
    return mine[task.localid]


def resolve_cluster(task: SlurmTask, port_base: int, gpus_per_task: int) -> tuple[list[str], int]:
    """Every worker's ``host:port`` from TensorFlow's ``SlurmClusterResolver`` and this task's index.

    The resolver lists nodes by name and gives the tasks of a node the ports ``port_base``,
    ``port_base + 1``, ...; this task is the address of its node with ``port_base + SLURM_LOCALID``
    (the resolver's own index follows ``SLURM_PROCID``, which matches that list only when Slurm's
    node order is the alphabetical one). ``auto_set_gpu=False``: the plan chooses the GPUs.
    """
    from gputopo.tfruntime import import_tensorflow

    tf = import_tensorflow(for_check=True)  # the resolver's problems are said in our one line
    try:
        resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
            port_base=port_base,
            gpus_per_node=task.step_tasks * gpus_per_task,  # enough for any split: the check is ours
            gpus_per_task=gpus_per_task,
            auto_set_gpu=False,
        )
        workers = list(resolver.cluster_spec().as_dict().get("worker", []))
    except (RuntimeError, ValueError) as exc:
        raise InputError(f"TensorFlow's SlurmClusterResolver cannot read this Slurm step: {exc}") from None
    own = f"{task.node}:{port_base + task.localid}"
    if own not in workers:
        raise InputError(f"SlurmClusterResolver's cluster ({', '.join(workers)}) has no {own} for task {task.procid}")
    return workers, workers.index(own)


def expected_cluster(plan: ClusterPlan, port_base: int) -> tuple[list[str], list[tuple[HostPlan, int, int]]]:
    """What the resolver will give when the plan's tasks run (``--dry-run``): the worker addresses,
    and per plan entry its ``SLURM_LOCALID`` and worker index."""
    per_host: dict[str, list[HostPlan]] = {}
    for entry in plan.hosts:
        per_host.setdefault(entry.host, []).append(entry)
    workers = [f"{host}:{port_base + k}" for host in sorted(per_host) for k in range(len(per_host[host]))]
    placed = []
    for host, entries in per_host.items():
        for k, entry in enumerate(entries):
            placed.append((entry, k, workers.index(f"{host}:{port_base + k}")))
    return workers, placed


def train_flags(config: TrainConfig) -> list[str]:
    """The ``gputopo train`` options that reproduce ``config`` for every task."""
    defaults = TrainConfig()
    flags: list[str] = []
    for name, flag in (
        ("data", "--data"), ("model", "--model"), ("batch_size", "--batch-size"), ("epochs", "--epochs"),
        ("steps_per_epoch", "--steps-per-epoch"), ("learning_rate", "--learning-rate"),
        ("image_size", "--image-size"), ("seed", "--seed"), ("cpu_devices", "--cpu-devices"),
        ("checkpoint_every", "--checkpoint-every"), ("startup_timeout_s", "--startup-timeout"),
    ):  # fmt: skip
        value = getattr(config, name)
        if value is not None and value != getattr(defaults, name):
            flags += [flag, str(value)]
    if not config.evaluate:
        flags.append("--no-eval")
    flags += ["--checkpoint-dir", config.checkpoint_dir] if config.checkpoint_dir else ["--no-checkpoint"]
    if config.resume:
        flags.append("--resume")
    return flags


def batch_script(
    nodes: Mapping[str, int],
    gpus_per_node: int | None,
    notes: list[str],
    srun_argv: list[str],
    pass_script_args: bool = False,
) -> str:
    """The one sbatch script gputopo writes (``recommend --format slurm`` and ``train --launcher slurm
    --dry-run``): ``nodes`` (node name -> tasks on it, in order), ``--gpus-per-node`` and
    ``--exclusive`` where GPUs are used, ``notes`` as comments, and ``srun --kill-on-bad-exit=1``
    with ``srun_argv`` (and the script's own arguments with ``pass_script_args``).

    Every node name must be a Slurm node name and every argument is one quoted shell word
    (``gputopo.quoting``): nothing from a plan or snapshot can become a line of the script."""
    counts = set(nodes.values())
    lines = [
        "#!/bin/bash",
        "#SBATCH --job-name=gputopo-train",
        f"#SBATCH --nodes={len(nodes)}",
        f"#SBATCH --nodelist={','.join(slurm_node(node) for node in nodes)}",
        (f"#SBATCH --ntasks-per-node={counts.pop()}" if len(counts) == 1 else f"#SBATCH --ntasks={sum(nodes.values())}"),
    ]
    if gpus_per_node is not None:
        lines += [f"#SBATCH --gpus-per-node={int(gpus_per_node)}", "#SBATCH --exclusive"]
    lines += [comment(note) for note in notes]
    srun = shell_words(["srun", "--kill-on-bad-exit=1", *srun_argv])
    lines += ["", "set -euo pipefail", srun + (' "$@"' if pass_script_args else "")]
    return "\n".join(lines) + "\n"


def srun_argv(plan: ClusterPlan, config: TrainConfig, port_base: int) -> list[str]:
    """The ``gputopo train`` command each task runs."""
    return ["gputopo", "train", "--launcher", "slurm", "--plan", plan.path, "--port", str(port_base),
            *train_flags(config)]


def sbatch_script(plan: ClusterPlan, config: TrainConfig, port_base: int) -> str:
    """A batch script for ``sbatch``: the plan's nodes, one task per entry, the srun line."""
    counts = {host: sum(1 for e in plan.hosts if e.host == host) for host in plan.host_names}
    most = max(counts.values())
    ports = f"{port_base}" if most == 1 else f"{port_base}-{port_base + most - 1}"
    gpus_per_node = None
    notes = []
    if config.cpu_devices is None:
        # The plan's GPU numbers are each node's nvidia-smi numbers: all of the node's GPUs where the
        # plan says how many it has, else its GPUs up to the highest.
        gpus_per_node = max((e.host_gpus or (max(e.gpus) + 1) for e in plan.hosts if e.gpus), default=0) or None
        notes.append("The plan's CUDA_VISIBLE_DEVICES count each node's GPUs (nvidia-smi order): allocate them all.")
    notes += [
        "Run from a folder every node sees: the plan and --checkpoint-dir must be on the shared file system.",
        f"TensorFlow's gRPC port(s) {ports} must be open between these nodes and closed to everyone else.",
    ]
    return batch_script(counts, gpus_per_node, notes, srun_argv(plan, config, port_base))


def slurm_launch(
    plan: ClusterPlan,
    config: TrainConfig,
    port: int | None,
    dry_run: bool,
    numactl_path: str | None,
    environ: Mapping[str, str],
) -> Launch:
    """This Slurm task's training process, or with ``dry_run`` every task of the plan and the script."""
    port_base = port or plan.first_port() or DEFAULT_PORT
    most = max(sum(1 for e in plan.hosts if e.host == host) for host in plan.host_names)
    if not 1 <= port_base <= 65536 - most:
        raise InputError(f"port {port_base} with {most} task(s) on a node needs ports up to {port_base + most - 1}; "
                         "a TCP port is at most 65535: give a lower --port")
    if dry_run:
        workers, placed = expected_cluster(plan, port_base)
        tasks = []
        for entry, localid, index in sorted(placed, key=lambda p: p[2]):
            task_plan = host_launch_plan(entry, plan.path, config.cpu_devices, numactl_path)
            label = f"worker {index} on {entry.host}, SLURM_LOCALID {localid} ({workers[index]})"
            process = task_process(task_plan, config, workers, index, label, check_address=False)
            tasks.append(TaskLaunch(entry, task_plan, process))
        return Launch("slurm", plan.path, tasks, sbatch_script(plan, config, port_base))
    task = slurm_task(environ)
    entry = slurm_entry(plan, task)
    task_plan = host_launch_plan(entry, plan.path, config.cpu_devices, numactl_path)
    workers, index = resolve_cluster(task, port_base, task_plan.replicas if task_plan.device_kind == "GPU" else 1)
    if task.step_tasks != len(plan.hosts):
        task_plan.notes.append(
            f"this step runs {count_word(task.step_tasks, 'task')}; "
            f"{plan.path} plans {count_word(len(plan.hosts), 'task')}"
        )
    label = f"Slurm task {task.procid} on {task.node} (worker {index}, {workers[index]})"
    process = task_process(task_plan, config, workers, index, label)
    return Launch("slurm", plan.path, [TaskLaunch(entry, task_plan, process)])
