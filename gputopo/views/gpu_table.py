"""The GPU table of `gputopo scan`: one row per GPU (name, bus id, memory, NUMA node, CPUs, PCIe link
with the performance state it was read in, NVLink, MIG, utilisation), every cell from the user's
files as ``Text``, never markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.table import Table
from rich.text import Text

from gputopo.model import Gpu
from gputopo.views.live import memory_cell as _memory
from gputopo.views.unknowns import nvlink_cell

if TYPE_CHECKING:
    from gputopo.analysis.scan_result import ScanResult

BELOW_IDLE = "idle"  # (``analysis.expect.pstates.BELOW_IDLE``: a lowered link by design, drawn dim)


def _wrappable(cpus: str, lines: bool = False) -> str:
    """A CPU list as `taskset -c` and `numactl --physcpubind` take it (no space after a comma: a
    copy pastes whole); with ``lines`` (a terminal too narrow for it) a line per range, each ending
    at its comma, never broken inside a number."""
    return cpus.replace(",", ",\n") if lines else cpus


def _fmt(value: object) -> str:
    return "?" if value is None else str(value)


def _pcie(gen: int | None, width: int | None) -> str:
    if gen is None and width is None:
        return "?"
    return f"Gen{_fmt(gen)}x{_fmt(width)}"


def _short_bus_id(bus_id: str | None) -> str:
    """``0000:9b:00.0`` -> ``9b:00.0`` (the domain is almost always 0)."""
    if bus_id is None:
        return "?"
    return bus_id.removeprefix("0000:")


def _short_name(name: str | None) -> str:
    """Drop the vendor words that every NVIDIA GPU name repeats (the JSON keeps the full name)."""
    if name is None:
        return "?"
    for prefix in ("NVIDIA ", "Tesla "):
        name = name.removeprefix(prefix)
    return name


def gpu_table(result: ScanResult, host_column: bool = True, cpu_lines: bool = False) -> Table:
    topo = result.topology
    table = Table(title="GPUs", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    show_mig = any(g.mig_mode for g in topo.gpus)
    show_gpu_numa = any(g.gpu_numa_id is not None for g in topo.gpus)  # Grace: the GPU's memory as a node
    show_util = any(g.utilization_percent is not None for g in topo.gpus)
    columns = (["GPU", "name", "bus id", "mem", "NUMA"]
               + (["GPU NUMA"] if show_gpu_numa else []) + ["CPUs", "PCIe", "NVLink"] + (["MIG"] if show_mig else []) + (["util"] if show_util else []))
    rows = []
    for g in topo.gpus:
        cells = gpu_cells(result, g, show_gpu_numa, show_mig, show_util, cpu_lines)
        rows.append([str(g.index), cells[0], _short_bus_id(g.pci_bus_id), *cells[1:]])

    def fits(position: int, cap: int) -> int:
        """A folding column's least width: ``cap``, or less where its header and cells are shorter
        (a source without names or PCIe figures): the width goes to the columns that cannot fold."""
        longest = max([len(columns[position])] + [max(map(len, str(row[position]).split("\n"))) for row in rows])
        return min(cap, longest)

    for position, col in enumerate(columns):
        if col == "name":
            table.add_column(col, min_width=fits(position, 12), overflow="fold")
        elif col in ("CPUs", "PCIe", "NUMA"):
            # May fold onto a second line, so that the columns after them are never pushed off an
            # 80-column terminal.
            table.add_column(col, overflow="fold", min_width=fits(position, 7))
        elif col == "NVLink":
            # Never cut: a cropped "? x>=18" would read "? x>=1" (Grace's wide NUMA sets, 80 columns).
            table.add_column(col, no_wrap=True, min_width=fits(position, 12))
        else:
            table.add_column(col, no_wrap=True)
    show_host = host_column and any(g.host for g in topo.gpus)
    if show_host:
        table.add_column("host", no_wrap=True)
    for g, row in zip(topo.gpus, rows):
        if show_host:
            row.append(_fmt(g.host))
        # Text, not str: names, bus ids and hosts come from the user's files and may hold "[...]".
        table.add_row(*(cell if isinstance(cell, Text) else Text(cell) for cell in row))
    return table


def gpu_cells(result: ScanResult, g: Gpu, show_gpu_numa: bool = False, show_mig: bool = False,
              show_util: bool = False, cpu_lines: bool = False) -> list[Text | str]:
    """A GPU's cells but its number, bus id and host: name, mem, NUMA, (GPU NUMA), CPUs, PCIe,
    NVLink (``?`` where not known, ``>=N`` implied by the NV# words), (MIG), (util)."""
    pcie = _pcie_cell(g, result.pcie_below.get(g.index))
    mig = "?" if g.mig_mode is None else ("on" if g.mig_mode else "off")
    numa = _fmt(g.numa_node) if g.numa_node is not None or not g.numa_affinity else g.numa_affinity
    util = _fmt(g.utilization_percent) + ("%" if g.utilization_percent is not None else "")
    return ([_short_name(g.name), _memory(g), numa] + ([_fmt(g.gpu_numa_id)] if show_gpu_numa else [])
            + [_wrappable(_fmt(g.cpu_affinity), cpu_lines), pcie, nvlink_cell(g, result.implied_nvlinks(g))] + ([mig] if show_mig else [])
            + ([util] if show_util else []))


def _pcie_cell(g: Gpu, below: tuple[str, str | None] | None) -> Text:
    """``Gen5x16``; below max ``Gen1x16/Gen4x16`` in yellow, with the performance state where the
    source read one with the link: ``P0`` (a link that trained down: yellow) or ``P8`` (idle: a
    lowered link is by design, dim). ``below``: ``ScanResult.pcie_below``'s judgement of it."""
    now, most = _pcie(g.pcie_gen_current, g.pcie_width_current), _pcie(g.pcie_gen_max, g.pcie_width_max)
    if below is None:
        return Text(now)
    judged, state = below
    return Text(f"{now}/{most}" + (f" {state}" if state else ""), style="dim" if judged == BELOW_IDLE else "yellow")
