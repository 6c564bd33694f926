"""The scan screen of a large NVLink domain (more than ``MAX_LISTED_GPUS``: an NVL576 is 576 GPUs
on 144 hosts): GPUs that look alike are one row, hosts laid out alike are one branch. Nothing is
dropped from ``--json``, which lists every GPU and link."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from rich import box
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from gputopo.model import Topology

MAX_LISTED_GPUS = 128  # a GB200 NVL72 rack (72) keeps a row per GPU


def _ranges(numbers: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2,5"``."""
    parts: list[str] = []
    ordered = sorted(numbers)
    start = prev = ordered[0]
    for n in ordered[1:] + [None]:  # type: ignore[list-item]
        if n is not None and n == prev + 1:
            prev = n
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return ",".join(parts)


def _short(ranges: str, most: int = 40) -> str:
    """A long range list cut to its first and last ranges: ``0-1,4-5,8-9, ... 572-573``."""
    if len(ranges) <= most:
        return ranges
    parts = ranges.split(",")
    head = ",".join(parts[:3])
    return f"{head}, ... {parts[-1]} ({len(parts)} ranges)"


def gpu_summary_table(topo: Topology, row_of: Any) -> Table:
    """One row per kind of GPU (the same cells but for the index, bus id and host), with the GPUs
    of that kind as ranges. ``row_of(gpu)``: ``views.topology``'s cells of one GPU's row."""
    kinds: dict[tuple[str, ...], list[int]] = defaultdict(list)
    for gpu in topo.gpus:
        cells = row_of(gpu)
        kinds[tuple(cell.plain if isinstance(cell, Text) else str(cell) for cell in cells)].append(gpu.index)
    table = Table(title=f"GPUs ({len(topo.gpus)}, {len(kinds)} kinds; every GPU and bus id in --json)",
                  title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    table.add_column("GPUs", overflow="fold", max_width=40)
    table.add_column("count", justify="right")
    for name in ("name", "mem", "NUMA", "CPUs", "PCIe", "NVLink"):
        table.add_column(name, overflow="fold")
    for cells, members in kinds.items():
        table.add_row(Text(_short(_ranges(members))), str(len(members)), *(Text(c) for c in cells[:6]))
    return table


def host_summary_tree(topo: Topology) -> Tree:
    """Hosts with the same layout (NUMA nodes, CPUs, GPUs per node) as one branch naming them."""
    layouts: dict[tuple[tuple[str, int], ...], list[str]] = defaultdict(list)
    by_host: dict[str, list[Any]] = defaultdict(list)
    for gpu in topo.gpus:
        by_host[gpu.host or ""].append(gpu)
    for host, gpus in by_host.items():
        places: dict[str, int] = defaultdict(int)
        for gpu in gpus:
            node = "NUMA node ?" if gpu.numa_node is None else f"NUMA node {gpu.numa_node}"
            places[node + (f" (CPUs {gpu.cpu_affinity})" if gpu.cpu_affinity else "")] += 1
        layouts[tuple(sorted(places.items()))].append(host)
    tree = Tree(Text(f"{len(by_host)} hosts, {len(layouts)} layout{'s' if len(layouts) != 1 else ''}", style="bold"))
    for layout, hosts in layouts.items():
        names = ", ".join(hosts[:3]) + (f" ... {hosts[-1]}" if len(hosts) > 3 else "")
        branch = tree.add(Text(f"{len(hosts)} hosts laid out alike ({names})"))
        for place, count in layout:
            branch.add(Text(f"{place}: {count} GPU{'s' if count != 1 else ''}"))
    return tree
