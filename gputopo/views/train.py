"""Rendering for ``gputopo train``: the launch plan, the run summary, the scaling table (and JSON)."""

from __future__ import annotations

from typing import Any, Sequence

from rich.table import Table
from rich.text import Text

from gputopo.train.launch.plan import LaunchPlan
from gputopo.views.common import out
from gputopo.views.vocabulary import SLOWEST_HOP, UNKNOWN, ring_text


PLAN_SCHEMA = "gputopo.train-plan/1"  # train --dry-run --json
SCALING_SCHEMA = "gputopo.train-scaling/1"  # train --scaling --json


def _fmt_float(value: Any, digits: int = 4) -> str:
    return UNKNOWN if value is None else f"{value:.{digits}f}"


def _facts_table(title: str) -> Table:
    """A two-column what / value table whose values are printed as text, never as rich markup
    (they hold paths, device names and notes from the user's side)."""
    table = Table(title=Text(title), title_justify="left", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    return table


def _row(table: Table, what: str, value: str) -> None:
    table.add_row(Text(what), Text(value))


def plan_json(plan: LaunchPlan, processes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The plan and every process to start, each with its environment and exact command."""
    return {"schema": PLAN_SCHEMA, "plan": plan.to_dict(), "processes": list(processes)}


def _basis_words(basis: str | None) -> str:
    """How the bottleneck's figure was had: a measured figure is never "expected for its link type"."""
    return {"measured": "measured", "assumed": "at least: estimated where a fact its speed depends on is not in the source",
            "estimated": "estimated for its link type"}.get(basis or "", "expected for its link type")


def render_plan(plan: LaunchPlan, processes: Sequence[dict[str, Any]], strategy: str) -> None:
    """Where training runs and why, then the exact command(s) that start it."""
    console = out()
    table = _facts_table("Training plan")
    if plan.device_kind == "GPU":
        _row(table, "GPUs (nvidia-smi index)", ", ".join(str(g) for g in plan.gpus))
        _row(table, "CUDA_VISIBLE_DEVICES", plan.env.get("CUDA_VISIBLE_DEVICES", ""))
    else:
        _row(table, "devices", f"{plan.replicas} logical CPU device{'s' if plan.replicas != 1 else ''} (standing in for GPUs)")
    _row(table, "strategy", strategy)
    if plan.ring:
        _row(table, "ring", ring_text(plan.ring))
    if plan.bottleneck_gbps is not None:
        _row(table, SLOWEST_HOP, f"~{plan.bottleneck_gbps:.1f} GB/s per direction ({_basis_words(plan.bottleneck_basis)})")
    if plan.cross_device_ops:
        _row(table, "cross-device op", plan.cross_device_ops)
    if plan.numactl:
        _row(table, "NUMA binding", " ".join(plan.numactl[1:]))
    elif plan.numa_node is not None:
        _row(table, "NUMA binding", f"none (GPUs on NUMA node {plan.numa_node}, but numactl is not installed)")
    elif plan.device_kind == "GPU":
        _row(table, "NUMA binding", "none (the GPUs span several NUMA nodes)")
    if plan.reason:
        _row(table, "why", plan.reason)
    for note in plan.notes:
        _row(table, "note", note)
    console.print(table)
    for process in processes:
        console.print(Text(f"{process['label']}:", style="bold"))
        console.print(Text(process["shell"]), soft_wrap=True)


def render_summary(summary: dict[str, Any]) -> None:
    """The run's outcome: steps, loss, accuracy, speed, devices, checkpoint."""
    console = out()
    status = summary.get("status", "completed")
    if status == "completed" and summary.get("steps_run") == 0 and summary["start_step"] >= summary["total_steps"]:
        # --resume of a finished run: no step ran, so no figure to show (not a table of '?').
        console.print(Text(f"Already complete: the checkpoint is at step {summary['start_step']} of "
                           f"{summary['total_steps']}; nothing was trained. Raise --epochs to train further "
                           "from it.", style="yellow"))
        if summary.get("checkpoint_path"):
            console.print(Text(f"checkpoint: {summary['checkpoint_path']}"))
        return
    title = "Training finished" if status == "completed" else f"Training {status}"
    table = _facts_table(title)
    _row(table, "steps", f"{summary['steps']} of {summary['total_steps']} (this run: {summary['steps_run']}, "
                  f"from step {summary['start_step']})")
    # final_loss / final_accuracy are means over the last epoch, initial_loss the first steps' mean:
    # say so, or they look wrong next to the progress bar's last-steps figures.
    first = summary.get("initial_loss_steps")
    first_words = f"mean of the first {first} step{'s' if first != 1 else ''}" if first else "first steps"
    _row(table, "loss", f"{_fmt_float(summary.get('initial_loss'))} ({first_words}) -> "
         f"{_fmt_float(summary.get('final_loss'))} (mean of the last epoch)")
    _row(table, "train accuracy", f"{_fmt_float(summary.get('final_accuracy'), 3)} (mean of the last epoch)"
         if summary.get("final_accuracy") is not None else "-")
    if summary.get("test_accuracy") is not None:
        _row(table, "test loss / accuracy", f"{_fmt_float(summary['test_loss'])} / {_fmt_float(summary['test_accuracy'], 3)}")
    rate = summary.get("examples_per_second")
    _row(table, "examples/s", "-" if rate is None else f"{rate:,.0f}")
    if summary.get("strategy") == "parameter-server":
        # Each step is one worker's whole batch (the coordinator hands steps out); nothing is split.
        workers = summary.get("workers") or summary["replicas"]
        _row(table, "batch", f"{summary['global_batch_size']} per step, each step on one of {workers} "
                             f"worker{'s' if workers != 1 else ''}")
    else:
        _row(table, "global batch", f"{summary['global_batch_size']} ({summary['per_replica_batch_size']} per replica, "
                                    f"{summary['replicas']} replicas)")
    _row(table, "devices", ", ".join(summary.get("devices", [])))
    if summary.get("worker_weights_sha256"):
        same = len(set(summary["worker_weights_sha256"])) == 1
        _row(table, "workers' weights", "identical" if same else "DIFFER")
    _row(table, "checkpoint", summary.get("checkpoint_path") or _no_checkpoint(summary))
    console.print(table)
    if summary.get("watch"):
        from gputopo.views.watch_result import result_lines

        for line in result_lines(summary["watch"]):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    if status == "interrupted":
        if summary.get("checkpoint_path"):
            console.print(Text("Stopped early; rerun the same command with --resume to continue.", style="yellow"))
        else:
            console.print(Text("Stopped early; no checkpoint was saved (--no-checkpoint), so a rerun starts afresh.",
                               style="yellow"))


def _no_checkpoint(summary: dict[str, Any]) -> str:
    """Why a run left no checkpoint: another worker writes them, or --no-checkpoint."""
    if summary.get("task_index"):
        return "none here (worker 0, the chief, writes them)"
    return "none (--no-checkpoint)"


def scaling_rows(results: Sequence[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Examples/s per device count and the scaling efficiency against the smallest count.

    Efficiency = (examples/s at n) / (examples/s at the base * n / base): 1.0 is perfect linear scaling.
    """
    base_count, base_summary = results[0]
    base_rate = base_summary.get("examples_per_second")
    rows = []
    for count, summary in results:
        rate = summary.get("examples_per_second")
        efficiency = rate / (base_rate * count / base_count) if rate and base_rate else None
        rows.append(
            {
                "devices": count,
                "global_batch_size": summary.get("global_batch_size"),
                "examples_per_second": rate,
                "speedup": rate / base_rate if rate and base_rate else None,
                "scaling_efficiency": efficiency,
            }
        )
    return rows


def render_scaling(rows: Sequence[dict[str, Any]], device_kind: str) -> None:
    table = Table(title=f"Scaling on {device_kind} devices (same per-replica batch)", title_justify="left")
    table.add_column("devices", justify="right")
    table.add_column("global batch", justify="right")
    table.add_column("examples/s", justify="right")
    table.add_column("speed-up", justify="right")
    table.add_column("efficiency", justify="right")
    for row in rows:
        rate = row["examples_per_second"]
        table.add_row(
            str(row["devices"]),
            str(row["global_batch_size"]),
            "-" if rate is None else f"{rate:,.0f}",
            "-" if row["speedup"] is None else f"{row['speedup']:.2f}x",
            "-" if row["scaling_efficiency"] is None else f"{row['scaling_efficiency']:.0%}",
        )
    out().print(table)
