"""Rich rendering of TensorFlow's view of the GPUs: its devices, its peer matrix, its peer groups.

Shown beside the topology so a user sees TF's numbering next to nvidia-smi's and which pairs TF
could peer, coloured the same way everywhere: Y green, N red, unknown dim.
"""

from __future__ import annotations

import os

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gputopo.model import TfView, Topology
from gputopo.views.common import matrix_tables


def render_tf_view(topology: Topology, console: Console) -> None:
    """Print TF's device table, peer matrix and peer-group line; nothing without ``topology.tf``."""
    from gputopo.analysis.causes.tf_crosscheck import peer_group_summary, tf_ordinals

    view = topology.tf
    if view is None:
        return
    title = "TensorFlow's view"
    if view.source:
        title += f" (from {os.path.basename(view.source) or view.source}"
        title += f", {view.era}" if view.era else ""
        title += f", start-up {view.startup} of {view.startups})" if view.startups > 1 else ")"
    if not view.devices:
        console.print(Text(f"{title}: TensorFlow sees no GPU", style="bold yellow"))
        return

    console.print(_device_table(view, title))
    if view.gpu_count is not None:
        console.print(Text(gpu_count_line(view), style="dim"))

    ordinals = tf_ordinals(view)
    rows: list[tuple[str, list[Text]]] = []
    for a in ordinals:
        cells: list[Text] = []
        for b in ordinals:
            value = view.peer[a][b] if a < len(view.peer) and b < len(view.peer[a]) else None
            if a == b:
                cells.append(Text("X", style="dim"))
            elif value is True:  # an inferred Y is lower-case: the log did not print it
                cells.append(Text("y", style="green") if view.peer_inferred else Text("Y", style="bold green"))
            elif value is False:
                cells.append(Text("N", style="bold red"))
            else:
                cells.append(Text("?", style="dim"))
        rows.append((f"GPU:{a}", cells))
    # Split into column blocks on narrow terminals: 16 GPUs at 80 columns showed only 'G…' headers.
    headers = [f"GPU:{o}" for o in ordinals]
    matrix_title = "TensorFlow peer access (row -> column)"
    if view.peer_inferred:
        matrix_title += "; y = inferred: TF logs only the pairs that cannot peer"
    for table in matrix_tables(matrix_title, headers, rows, console.width):
        console.print(table)
    summary = peer_group_summary(view)
    if summary:
        console.print(Text(f"TensorFlow: {summary}", style="bold"))
    else:
        console.print(Text("The log says nothing about peer access (see the findings for how to get it).", style="dim"))


def gpu_count_line(view: TfView) -> str:
    """How many GPUs TensorFlow had: ``TensorFlow had at least 8 GPUs; the log names GPU 7`` where
    the log is cut, ``TensorFlow had 4 GPUs`` where it says them all; the GPUs it ignores."""
    count = view.gpu_count or 0
    named = sorted(d.ordinal for d in view.devices)
    ignored = [d.ordinal for d in view.devices if d.ignored]
    line = f"TensorFlow had {'at least ' if view.gpu_count_at_least else ''}{count} GPU{'' if count == 1 else 's'}"
    if view.gpu_count_at_least or len(named) != count:
        line += f"; the log names GPU{'' if len(named) == 1 else 's'} {', '.join(map(str, named))}"
    if ignored:
        line += f"; it ignores GPU{'' if len(ignored) == 1 else 's'} {', '.join(map(str, ignored))}"
    return line


def _device_table(view: TfView, title: str) -> Table:
    """TF's GPUs: ordinal, name, PCI bus id, what TF allocated, the nvidia-smi GPU it is."""
    # Titles and cells are Text: the log's file name and TF's device names are the user's strings.
    devices = Table(title=Text(title), title_justify="left")
    devices.add_column("TF GPU", justify="right")
    devices.add_column("name")
    devices.add_column("PCI bus id")
    devices.add_column("TF allocated (MB)", justify="right")
    devices.add_column("nvidia-smi GPU", justify="right")
    for device in sorted(view.devices, key=lambda d: d.ordinal):
        nvml = device.nvml_index
        nvml_text = Text("?", style="dim") if nvml is None else Text(
            str(nvml), style="bold yellow" if nvml != device.ordinal else ""
        )
        # TF's own number where the log prints it: a process that sees one GPU calls CUDA device 4 GPU:0.
        label = f"GPU:{device.ordinal}" if device.tf_id in (None, device.ordinal) else (
            f"GPU:{device.tf_id} (device {device.ordinal})")
        devices.add_row(
            label,
            Text(device.name) if device.name else Text("?", style="dim"),
            Text(device.pci_bus_id) if device.pci_bus_id else Text("?", style="dim"),
            str(device.memory_mb) if device.memory_mb is not None else Text("?", style="dim"),
            nvml_text,
        )
    return devices
