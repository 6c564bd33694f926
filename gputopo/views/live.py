"""Live GPU state (NVML's, when the topology was read): memory in use, compute processes, and when
they were read."""

from __future__ import annotations

from rich import box
from rich.table import Table
from rich.text import Text

from gputopo.model import Gpu, Topology


def fmt_bytes(n: int | None) -> str:
    """``80G``, ``512M``; ``?`` where not known."""
    if n is None:
        return "?"
    if n < 1024**3:  # not "0G" for a small GPU or a MIG slice
        return f"{n / 1024**2:.0f}M"
    return f"{n / 1024**3:.0f}G"


def memory_cell(gpu: Gpu) -> str:
    """``80G``, or ``30/80G`` (used of total) where the source read the live state."""
    total = fmt_bytes(gpu.memory_total_bytes)
    if gpu.memory_used_bytes is None or gpu.memory_total_bytes is None:
        return total
    unit = 1024**3 if gpu.memory_total_bytes >= 1024**3 else 1024**2
    return f"{gpu.memory_used_bytes / unit:.0f}/{total}"


def live_state(topo: Topology) -> list[Text | Table]:
    """What the source read of the GPUs' live state, to print under the GPU table: when it was read
    (a snapshot shown later is not the state now) and the compute processes; nothing without it."""
    from gputopo.analysis.busy import has_live_state, live_state_time

    if not has_live_state(topo):
        return []
    parts: list[Text | Table] = [Text(f"memory in use, utilisation and processes {live_state_time(topo)}", style="dim")]
    table = process_table(topo)
    return parts + ([table] if table is not None else [])


def process_table(topo: Topology) -> Table | None:
    """The compute processes on the GPUs when they were read (NVML); None where none or not known."""
    rows = [(g.index, p) for g in topo.gpus for p in (g.processes or [])]
    if not rows:
        return None
    table = Table(title="Processes on the GPUs (when read)", title_justify="left", box=box.SIMPLE_HEAD,
                  padding=(0, 1), pad_edge=False)
    for col in ("GPU", "PID", "process", "GPU memory"):
        table.add_column(col, overflow="fold")
    for index, proc in rows:
        table.add_row(str(index), str(proc.pid), Text(proc.name or "?"), fmt_bytes(proc.used_memory_bytes))
    return table
