"""What the training child shows and reports: its progress bar and notes on standard error, the
examples-per-second rate, one record per epoch, and the ``--json`` summary every strategy returns.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from gputopo.train.child.common import note  # noqa: F401  (re-exported: the loops' notes live in common)
from gputopo.train.child.common import RunningMeans, StopRequest, weights_fingerprint
from gputopo.train.config import RESULT_SCHEMA, TrainConfig, is_chief

PROGRESS_REFRESH_S = 0.25


def progress_bar(config: TrainConfig, total: int, start: int) -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("[bold]train"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}  acc {task.fields[accuracy]}  {task.fields[rate]} ex/s"),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        disable=not (config.progress and is_chief(config)),
    )
    task = progress.add_task("train", total=total, completed=start, loss="-", accuracy="-", rate="-")
    return progress, task


def examples_rate(
    step: int, from_step: int | None, from_s: float, paused_s: float, global_batch: int, now_s: float | None = None
) -> float | None:
    """Examples per second since the first (compiling) step, evaluation and checkpoint time excluded."""
    if from_step is None or step <= from_step:
        return None
    elapsed_s = (now_s or time.perf_counter()) - from_s - paused_s
    return (step - from_step) * global_batch / elapsed_s if elapsed_s > 0 else None


def epoch_record(epoch: float, step: int, means: RunningMeans, test: tuple[float, float] | None) -> dict[str, Any]:
    return {
        "epoch": epoch,
        "step": step,
        "loss": means.loss,
        "accuracy": means.accuracy,
        "test_loss": test[0] if test else None,
        "test_accuracy": test[1] if test else None,
    }


def run_summary(
    config: TrainConfig,
    datasets: Any,
    model: Any,
    stop: StopRequest,
    history: list[dict[str, Any]],
    *,
    status: str,
    device_kind: str,
    devices: list[str],
    replicas: int,
    workers: int,
    per_replica_batch_size: int,
    steps_per_epoch: int,
    start_step: int,
    step: int,
    initial_loss: float | None,
    test_result: tuple[float, float] | None,
    examples_per_second: float | None,
    checkpoint_path: str | None,
    initial_loss_steps: int | None = None,
) -> dict[str, Any]:
    """The ``--json`` summary every strategy reports (keys of the ``train`` contract first)."""
    last = history[-1] if history else {}
    return {
        "schema": RESULT_SCHEMA,
        "status": status,
        "steps": step,
        "final_loss": last.get("loss"),
        "final_accuracy": last.get("accuracy"),
        "examples_per_second": examples_per_second,
        "devices": devices,
        "checkpoint_path": checkpoint_path,
        "strategy": config.strategy,
        "model": config.model,
        "data": datasets.description,
        "device_kind": device_kind,
        "replicas": replicas,
        "workers": workers,
        "task_index": config.task_index,
        "global_batch_size": config.batch_size,
        "per_replica_batch_size": per_replica_batch_size,
        "epochs": config.epochs,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": config.epochs * steps_per_epoch,
        "start_step": start_step,
        "steps_run": step - start_step,
        "initial_loss": initial_loss,
        "initial_loss_steps": initial_loss_steps,  # how many steps initial_loss is the mean of (None: a few)
        "test_loss": test_result[0] if test_result else None,
        "test_accuracy": test_result[1] if test_result else None,
        "history": history,
        "checkpoint_dir": config.checkpoint_dir,
        "stopped_by": stop.signal_name,
        "weights_sha256": weights_fingerprint(model),
    }
