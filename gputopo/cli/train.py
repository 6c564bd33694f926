"""`gputopo train`: pick GPUs from the topology, print the plan, train in a child process on them.

This module only parses options, calls ``gputopo.train`` and renders; TensorFlow runs in the child
(``python -m gputopo.train.child``), never in this process.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import typer
from typing_extensions import Annotated

from gputopo.cli import (
    FromOption,
    JsonOption,
    MachineOption,
    TfLogOption,
    TfRunOption,
    PANEL_OUTPUT,
    command,
    complete_strategy,
)

if TYPE_CHECKING:
    from gputopo.model import Topology
    from gputopo.sources import TopologyRequest
    from gputopo.train.config import TrainConfig
    from gputopo.train.launch.plan import LaunchPlan, ProcessSpec

DEFAULT_CHECKPOINT_DIR = "gputopo-checkpoints"
# `train -h` groups its options (PANEL_INPUTS and PANEL_OUTPUT as every command has them).
_CHOICE, _TRAINING, _CLUSTER, _CHECKPOINTS = "Choice of GPUs", "Training", "Cluster", "Checkpoints"


def complete_launcher(incomplete: str) -> list[str]:
    """``--launcher``'s launchers."""
    return [name for name in ("slurm", "tf-config") if name.startswith(incomplete)]


@command("train")
def train(
    from_files: FromOption = None,
    machine: MachineOption = None,
    tf_log: TfLogOption = None,
    tf_run: TfRunOption = None,
    gpus: Annotated[Optional[int], typer.Option(
        "--gpus", "-n", metavar="N", rich_help_panel=_CHOICE, help="How many GPUs (picked by `recommend`).")] = None,
    devices: Annotated[Optional[str], typer.Option(
        "--devices", metavar="LIST", rich_help_panel=_CHOICE, help="Exactly these GPUs (nvidia-smi indices: 0,2,3).")] = None,
    cpu_devices: Annotated[Optional[int], typer.Option(
        "--cpu-devices", metavar="N", rich_help_panel=_CHOICE, help="N logical CPU devices instead of GPUs (no GPU needed).")] = None,
    allow_busy: Annotated[bool, typer.Option(
        "--allow-busy", rich_help_panel=_CHOICE, help="Train even on GPUs another process computes on.")] = False,
    data: Annotated[str, typer.Option(
        "--data", metavar="DATA", rich_help_panel=_TRAINING, show_default=False,
        help="synthetic (default), mnist, cifar10 or an image folder.")] = "synthetic",
    model: Annotated[str, typer.Option(
        "--model", metavar="NAME", rich_help_panel=_TRAINING, show_default=False,
        help="cnn (small, default) or mobilenetv2.")] = "cnn",
    batch_size: Annotated[int, typer.Option(
        "--batch-size", "-b", metavar="N", rich_help_panel=_TRAINING, show_default=False,
        help="Global batch, split over all replicas (default 64).")] = 64,
    epochs: Annotated[int, typer.Option(
        "--epochs", metavar="N", rich_help_panel=_TRAINING, show_default=False,
        help="Epochs to train (default 1), evaluating after each.")] = 1,
    steps_per_epoch: Annotated[Optional[int], typer.Option(
        "--steps-per-epoch", metavar="N", rich_help_panel=_TRAINING,
        help="Steps per epoch (default: one pass over the data).")] = None,
    learning_rate: Annotated[Optional[float], typer.Option(
        "--learning-rate", metavar="RATE", rich_help_panel=_TRAINING,
        help="Adam's rate (default 0.001; --resume: the checkpoint's).")] = None,
    image_size: Annotated[Optional[int], typer.Option(
        "--image-size", metavar="SIZE", rich_help_panel=_TRAINING, help="Resize images to SIZE x SIZE.")] = None,
    seed: Annotated[int, typer.Option(
        "--seed", metavar="N", rich_help_panel=_TRAINING, show_default=False,
        help="Seed of the data order and first weights (default 0).")] = 0,
    evaluate: Annotated[bool, typer.Option(
        "--eval/--no-eval", rich_help_panel=_TRAINING, show_default=False,
        help="Evaluate on test/ after each epoch (default: --eval).")] = True,
    strategy: Annotated[str, typer.Option(
        "--strategy", metavar="NAME", rich_help_panel=_TRAINING, show_default=False, autocompletion=complete_strategy,
        help="mirrored (default), multi-worker or parameter-server.")] = "mirrored",
    workers: Annotated[Optional[str], typer.Option(
        "--workers", metavar="LIST", rich_help_panel=_CLUSTER,
        help="multi-worker: every worker's host:port; parameter-server: a count.")] = None,
    task_index: Annotated[int, typer.Option(
        "--task-index", metavar="N", rich_help_panel=_CLUSTER, show_default=False,
        help="multi-worker: which of --workers this host is (default 0).")] = 0,
    local_workers: Annotated[Optional[int], typer.Option(
        "--local-workers", metavar="N", rich_help_panel=_CLUSTER, help="multi-worker: start N workers on this host.")] = None,
    ps: Annotated[Optional[int], typer.Option(
        "--ps", metavar="N", rich_help_panel=_CLUSTER, help="parameter-server: how many parameter servers.")] = None,
    launcher: Annotated[Optional[str], typer.Option(
        "--launcher", metavar="NAME", rich_help_panel=_CLUSTER, autocompletion=complete_launcher,
        help="slurm or tf-config: one worker of a multi-host --plan (docs/cluster.md).")] = None,
    plan_file: Annotated[Optional[str], typer.Option(
        "--plan", metavar="FILE", rich_help_panel=_CLUSTER, help="--launcher's multi-host plan (`recommend --save`).")] = None,
    port: Annotated[Optional[int], typer.Option(
        "--port", metavar="N", rich_help_panel=_CLUSTER,
        help="--launcher slurm: a node's first worker port (default: the plan's).")] = None,
    allow_exposed_ports: Annotated[bool, typer.Option(
        "--allow-exposed-ports", rich_help_panel=_CLUSTER,
        help="Run a local cluster the network can reach (docs/security.md).")] = False,
    startup_timeout_s: Annotated[float, typer.Option(
        "--startup-timeout", metavar="SECONDS", rich_help_panel=_CLUSTER, show_default=False,
        help="multi-worker: how long to wait for the other workers (default 120).")] = 120.0,
    checkpoint_dir: Annotated[Optional[str], typer.Option(
        "--checkpoint-dir", metavar="DIR", rich_help_panel=_CHECKPOINTS, show_default=False,
        help=f"Where checkpoints go (default {DEFAULT_CHECKPOINT_DIR}).")] = DEFAULT_CHECKPOINT_DIR,
    no_checkpoint: Annotated[bool, typer.Option(
        "--no-checkpoint", rich_help_panel=_CHECKPOINTS, help="Write no checkpoints.")] = False,
    checkpoint_every: Annotated[int, typer.Option(
        "--checkpoint-every", metavar="N", rich_help_panel=_CHECKPOINTS, show_default=False,
        help="Steps between checkpoints (default 100; 0: only at the end).")] = 100,
    resume: Annotated[bool, typer.Option(
        "--resume", rich_help_panel=_CHECKPOINTS, help="Continue from the last checkpoint in --checkpoint-dir.")] = False,
    scaling: Annotated[Optional[str], typer.Option(
        "--scaling", metavar="COUNTS", rich_help_panel=PANEL_OUTPUT,
        help="Train briefly on each device count (1,2,4) and compare speed.")] = None,
    scaling_steps: Annotated[int, typer.Option(
        "--scaling-steps", metavar="N", rich_help_panel=PANEL_OUTPUT, show_default=False,
        help="Steps per --scaling run (default 30).")] = 30,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", rich_help_panel=PANEL_OUTPUT, help="Print the plan and the exact command; do not train.")] = False,
    watch: Annotated[bool, typer.Option(
        "--watch", rich_help_panel=PANEL_OUTPUT,
        help="Record NVLink/PCIe traffic and link errors while training (as `gputopo watch`).")] = False,
    watch_file: Annotated[Optional[str], typer.Option(
        "--watch-file", metavar="FILE", rich_help_panel=PANEL_OUTPUT,
        help="--watch, appending each interval to FILE as a JSON line.")] = None,
    json_output: JsonOption = False,
) -> None:
    """Train a model data-parallel on the best GPUs for it (or logical CPU devices) and report speed."""
    import shutil

    from gputopo.errors import InputError
    from gputopo.sources import TopologyRequest

    request = TopologyRequest(from_files=tuple(from_files or ()), machine=machine, tf_log=tf_log, tf_run=tf_run)

    from gputopo.notation import parse_count_list
    from gputopo.train.checkpoints import check_checkpoint_choice
    from gputopo.train.workers import check_tf_config_env
    from gputopo.train.config import TrainConfig
    from gputopo.train.child.data import check_data_source
    from gputopo.train.launch.plan import build_plan, training_processes

    config = TrainConfig(
        data=data,
        model=model,
        batch_size=batch_size,
        epochs=epochs,
        steps_per_epoch=steps_per_epoch,
        learning_rate=learning_rate,
        image_size=image_size,
        seed=seed,
        evaluate=evaluate,
        cpu_devices=cpu_devices,
        strategy=strategy,
        checkpoint_dir=None if no_checkpoint else checkpoint_dir,
        checkpoint_every=checkpoint_every,
        resume=resume,
        task_index=task_index,
        startup_timeout_s=startup_timeout_s,
        progress=not json_output,
    )
    config.validate()
    check_tf_config_env()
    check_checkpoint_choice(config, scaling=scaling is not None, dry_run=dry_run)
    check_data_source(config.data)
    if launcher is not None:
        others = {"--gpus": gpus, "--devices": devices, "--from": request.from_files, "--machine": machine,
                  "--tf-log": tf_log, "--tf-run": tf_run, "--workers": workers, "--local-workers": local_workers, "--ps": ps,
                  "--scaling": scaling, "--task-index": task_index or None}  # fmt: skip
        _launch(launcher, plan_file, port, config, dry_run, json_output, allow_exposed_ports,
                [flag for flag, value in others.items() if value not in (None, [], ())],
                _watch_choice(watch, watch_file, dry_run))  # fmt: skip
        return
    plan = build_plan(config, _training_topology(request, config), gpus=gpus, devices=devices,
                      numactl_path=shutil.which("numactl"), allow_busy=allow_busy)
    if scaling is not None:
        if watch or watch_file is not None:
            raise InputError("--watch records one training run; leave it out of --scaling")
        _run_scaling(plan, config, parse_count_list(scaling), scaling_steps, json_output, dry_run)
        return
    processes = training_processes(plan, config, workers=workers, local_workers=local_workers, ps=ps)
    watching = _watch_choice(watch, watch_file, dry_run)
    if dry_run:
        _show_plan(plan, processes, config, json_output)
        return
    _run_and_show(plan, processes, config, json_output, allow_exposed_ports, watch=watching)


def _training_topology(request: "TopologyRequest", config: "TrainConfig") -> "Topology | None":
    """The machine to plan on: the named source, else this host's (none with --cpu-devices and no source)."""
    if config.cpu_devices is not None and not request.names_a_source:
        return None
    from gputopo.analysis import topology_for
    from gputopo.errors import NvmlUnavailable

    try:
        return topology_for(request)
    except NvmlUnavailable as exc:
        raise NvmlUnavailable(f"{exc}; or train on logical CPU devices with --cpu-devices N") from None


def _watch_choice(watch: bool, watch_file: "str | None", dry_run: bool) -> "int | str | None":
    """``--watch`` / ``--watch-file``: None (not asked), ``""`` (no file), or the file's descriptor,
    opened for appending before training starts: never through a symbolic link, in a folder held
    from the check on, another user's file in /tmp refused, anything but a regular file refused in
    one line (``train.launch.watching.open_watch_file``)."""
    from gputopo.train.launch.watching import open_watch_file

    if watch_file is None:
        return "" if watch else None
    if dry_run:
        return ""
    return open_watch_file(watch_file)


def _run_and_show(
    plan: "LaunchPlan", processes: "list[ProcessSpec]", config: "TrainConfig", json_output: bool, allow_exposed: bool,
    lock_checkpoints: bool = True, watch: "int | str | None" = None, launch: "dict | None" = None,
) -> None:
    """Train (``_run``) and show the summary, with the plan (and the launch, under a launcher).

    Under ``summary_kept``: once the children have ended, a SIGTERM waits for the summary. Under
    ``srun --kill-on-bad-exit`` the first task to exit 130 ends the step by SIGTERM to the others."""
    from gputopo.train.launch.supervise import summary_kept

    with summary_kept():
        summary = _run(plan, processes, config, json_output, allow_exposed, lock_checkpoints, watch)
        summary["plan"] = plan.to_dict()
        if launch is not None:
            summary["launch"] = launch
        _show_summary(summary, json_output)


def _run(
    plan: "LaunchPlan", processes: "list[ProcessSpec]", config: "TrainConfig", json_output: bool, allow_exposed: bool,
    lock_checkpoints: bool = True, watch: "int | str | None" = None,
) -> dict:
    """Train locally (``train.launch.run.run_locally``), showing the plan and any exposure warning
    first; with ``watch`` the link counters sampled meanwhile (``train.launch.watching``)."""
    from gputopo.train.launch.run import run_locally
    from gputopo.views.common import err

    def show_start(running: "list[ProcessSpec]", warning: "str | None") -> None:
        if not json_output:
            _show_plan(plan, running, config, json_output)
        if warning:
            err().print(warning, markup=False, soft_wrap=True)

    if watch is None:
        return run_locally(plan, processes, config, show_start, allow_exposed, lock_checkpoints)
    recorder = _start_watch(watch)
    try:
        summary = run_locally(plan, processes, config, show_start, allow_exposed, lock_checkpoints)
    finally:
        recorder.stop()
        if isinstance(watch, int):
            import os

            os.close(watch)
    summary["watch"] = _watch_result(recorder, plan)
    return summary


def _start_watch(watch: "int | str") -> "Any":
    """The recorder, sampling; where NVML cannot start, one line saying so (training goes on)."""
    import os
    from datetime import datetime, timezone

    from gputopo.train.launch.watching import TrainWatch
    from gputopo.views.watch import frame_json, json_line

    def write(current: "Any") -> None:
        if isinstance(watch, int):  # one write per line on an O_APPEND descriptor: lines never interleave
            now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
            os.write(watch, json_line(frame_json(current, now)).encode("utf-8"))

    recorder = TrainWatch(write)
    reason = recorder.start()
    if reason:
        typer.echo(f"gputopo: note: {reason}", err=True)
    return recorder


def _watch_result(recorder: "Any", plan: "LaunchPlan") -> dict:
    """The watch's summary (``gputopo.watch-summary/1``) with the verdict on the plan's GPUs."""
    import os

    from gputopo.analysis.causes.finding_kinds import with_kinds
    from gputopo.analysis.watch.watch_plan import judge_plan
    from gputopo.views.watch import summary_json

    if not recorder.gpus:
        return {"recorded": False, "reason": recorder.reason}
    verdict = None
    if plan.gpus and all(g < len(recorder.gpus) for g in plan.gpus):
        judged = judge_plan(recorder.summary, list(plan.gpus), "train's plan", recorder.gpus, os.environ)
        for finding in with_kinds(judged.findings):
            recorder.summary.findings[(finding.code, tuple(finding.gpus))] = finding
        verdict = judged.to_dict()
    data = summary_json(recorder.summary, None, None, verdict)
    return {"recorded": True, "reason": recorder.reason, **data}


def _launch(
    launcher: str, plan_file: Optional[str], port: Optional[int], config: "TrainConfig", dry_run: bool,
    json_output: bool, allow_exposed: bool, conflicting: "list[str]", watch: "int | str | None" = None,
) -> None:  # fmt: skip
    """``--launcher slurm|tf-config --plan plan.json``: this task's worker of a multi-host plan
    (``gputopo.train.launch.launchers``); with ``--dry-run`` every task of the plan and the sbatch script."""
    from gputopo.errors import InputError
    from gputopo.train.launch.launchers import launch
    from gputopo.views.common import print_json
    from gputopo.views.launch import render_launch

    if conflicting:
        raise InputError(f"--launcher {launcher} takes the GPUs and the cluster from --plan; leave out {conflicting[0]}")
    launched = launch(launcher, plan_file, config, port=port, dry_run=dry_run)
    if dry_run:
        print_json(launched.to_dict()) if json_output else render_launch(launched)
        return
    task = launched.tasks[0]
    chief = task.process.config.task_index == 0  # locks the shared checkpoint folder; the others write beside it
    launch_json = {"launcher": launcher, "plan_file": launched.plan_file, "task": task.process.label,
                   "entry": task.entry.to_dict()}  # fmt: skip
    _run_and_show(task.plan, [task.process], task.process.config, json_output, allow_exposed, lock_checkpoints=chief,
                  watch=watch, launch=launch_json)  # fmt: skip


def _show_plan(plan: "LaunchPlan", processes: "list[ProcessSpec]", config: "TrainConfig", json_output: bool) -> None:
    from gputopo.views.common import print_json
    from gputopo.views.train import plan_json, render_plan

    described = [p.to_dict() for p in processes]
    if json_output:
        print_json(plan_json(plan, described))
    else:
        render_plan(plan, described, config.strategy)


def _run_scaling(
    plan: "LaunchPlan", config: "TrainConfig", sizes: "list[int]", steps: int, json_output: bool, dry_run: bool
) -> None:
    """Brief runs on 1, 2, 4... devices of the plan (``train.plan.scaling_processes``), one after the
    other (``train.supervise.run_scaling``), shown as one table."""
    from gputopo.cli import fail
    from gputopo.train.launch.plan import scaling_processes
    from gputopo.train.launch.supervise import run_scaling
    from gputopo.views.common import err, print_json
    from gputopo.views.train import render_scaling, scaling_rows

    specs = scaling_processes(plan, config, sizes, steps)
    if dry_run:
        _show_plan(plan, specs, config, json_output)
        return

    def announce(count: int, spec: "ProcessSpec") -> None:
        if not json_output:
            err().print(f"scaling: {count} device(s), global batch {spec.config.batch_size}")

    results, interrupted = run_scaling(sizes, specs, announce)
    rows = scaling_rows(results) if results else []
    if json_output:
        from gputopo.views.train import SCALING_SCHEMA

        print_json({"schema": SCALING_SCHEMA, "scaling": rows, "status": "interrupted" if interrupted else "completed",
                    "device_kind": plan.device_kind, "per_replica_batch_size": config.batch_size // plan.replicas,
                    "steps": steps, "plan": plan.to_dict()})  # fmt: skip
    elif rows:
        render_scaling(rows, plan.device_kind)
    if interrupted:
        done = ", ".join(str(count) for count, _ in results) or "none"
        raise fail(f"interrupted: scaling stopped; device counts measured: {done}", 130)


def _show_summary(summary: dict, json_output: bool) -> None:
    """The run's summary as JSON or a table; an interrupted run exits 130 after it."""
    from gputopo.views.common import print_json
    from gputopo.views.train import render_summary

    if json_output:
        print_json(summary)
    else:
        render_summary(summary)
    if summary.get("status") == "interrupted":
        raise typer.Exit(130)
