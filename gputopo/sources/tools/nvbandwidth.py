"""NVIDIA ``nvbandwidth`` text output -> Topology with measured GB/s per ordered GPU pair.

The text: ``Device N: name (dddddddd:bb:dd)`` lines (v0.5+ print the PCI address), then per test
``Running <test>.``, a description line ``memcpy CE|SM GPU(row) -> GPU(column) [Read1|Total ...]
bandwidth (GB/s)`` (or ``memory latency SM GPU(row) <-> GPU(column) (ns)``), a column line, one row
per device (``N/A`` on the diagonal, or where a pair was not measured) and ``SUM <test> <value>``.
The arrow gives the direction: ``->`` row to column, ``<-`` column to row; ``<->`` both at once (the
``Total`` matrix of a bidirectional test adds both directions). Matrices with ``CPU(row)`` are
host-device copies and say nothing about GPU pairs. The JSON form (``-j``) holds the same matrices:
``gputopo.sources.tools.nvbandwidth_json``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.errors import InputError
from gputopo.model import Gpu, ReadingNote, Topology
from gputopo.sources.pasted import (
    capped,
    device_index,
    hex_bus_id,
    keep_worse,
    measurement_of,
    number,
    set_directed,
    undecorated_lines,
    with_all_pairs,
)

KIND = "nvbandwidth"
METHOD = "nvbandwidth"

# The name runs to the end of the line; its PCI address, where printed, is found at the end alone
# (``(.+?)(?: \(...\))?\s*$`` tried ``\s*$`` at every length of the name: quadratic in a line of blanks).
_DEVICE_RE = re.compile(r"^\s*+Device (\d{1,9}): (.+)$")
_BUS_TAIL_RE = re.compile(r" \(([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\)$")
_RUNNING_RE = re.compile(r"^\s*Running (\w+)\.\s*$")
_SUM_RE = re.compile(r"^\s*SUM (\w+) ")
_WAIVING_RE = re.compile(r"^\s*Waiving (\w+)\.\s*$")
# Blanks of its own line only: ``^\s*`` searched over the whole text ran across every blank line below.
_VERSION_RE = re.compile(r"^[^\S\n]*+nvbandwidth Version: v?\d", re.MULTILINE)
# nvbandwidth checks the bytes each copy delivered: a wrong byte stops the run with these lines.
_WRONG_DATA_RE = re.compile(r"^\s*(?:Invalid value when checking the pattern|ASSERT in expression h_errorFlag)")
D2D_PREFIX = "device_to_device_"
DESCRIPTION_RE = re.compile(
    r"(?:memcpy (?P<engine>CE|SM)|memory latency SM) (?P<row>CPU|GPU)\(row\) (?P<arrow><->|->|<-) GPU\(column\)"
    r"(?: (?P<part>\w+))?(?: bandwidth \(GB/s\)| \(ns\))"
)
# Which unidirectional test gives a link its headline figure, best first.
HEADLINE_TESTS = (
    "device_to_device_memcpy_read_ce", "device_to_device_memcpy_write_ce",
    "device_to_device_memcpy_read_sm", "device_to_device_memcpy_write_sm",
)


def sniff(text: str) -> bool:
    """Whether the text holds nvbandwidth text output: its matrix descriptions, or its version line
    (a run whose tests were waived or stopped prints no matrix)."""
    if '"bandwidth_matrix"' in text or '"nvbandwidth"' in text:
        return False
    return re.search(r"memcpy (?:CE|SM) (?:CPU|GPU)\(row\)", text) is not None or _VERSION_RE.search(text) is not None


@dataclass
class Matrix:
    """One GPU-to-GPU matrix: the test, what it measures and ``(src, dst) -> value``."""

    test: str | None
    kind: str  # "uni", "bidir-total", "bidir-part", "latency"
    cells: dict[tuple[int, int], float] = field(default_factory=dict)


def matrix_kind(m: re.Match[str]) -> str:
    if "latency" in m.group(0):
        return "latency"
    if m.group("arrow") == "<->":
        return "bidir-total" if m.group("part") == "Total" else "bidir-part"
    return "uni"


def directed(arrow: str, row: int, column: int) -> tuple[int, int]:
    """``(src, dst)`` of the cell in ``row``, ``column`` under ``arrow``."""
    return (column, row) if arrow == "<-" else (row, column)


def read(text: str, source: str) -> Topology:
    """The GPU pairs measured by the nvbandwidth text output in ``text``."""
    lines = undecorated_lines(text)
    gpus: dict[int, Gpu] = {}
    matrices: list[Matrix] = []
    host_columns = 0
    test: str | None = None
    waived: list[str] = []
    wrong_data: list[str] = []
    started: list[str] = []  # the tests a ``Running`` line names
    i = 0
    while i < len(lines):
        line = capped(lines[i])  # matrix rows are read whole (_read_cells)
        if m := _WAIVING_RE.match(line):
            waived.append(m.group(1))
        elif _WRONG_DATA_RE.match(line):
            wrong_data.append(test or "a test")
        elif (m := _DEVICE_RE.match(line)) and (index := device_index(m.group(1))) is not None:
            gpus[index] = _device(index, m.group(2))
        elif m := _RUNNING_RE.match(line):
            test = m.group(1)
            started.append(test)
        elif m := DESCRIPTION_RE.search(line):
            cells, i = _read_cells(lines, i + 1, m.group("arrow"))
            if m.group("row") == "CPU":
                host_columns = max(host_columns, 1 + max((max(pair) for pair in cells), default=-1))
                continue
            name = test or _sum_name(lines, i)
            matrices.append(Matrix(name, matrix_kind(m), cells))
            continue
        i += 1
    # Whether the text reaches a device-to-device test (run, waived, or a matrix between GPUs): a paste
    # of host tests only ends before them, which says nothing of whether the GPUs can peer.
    reached = any(name.startswith(D2D_PREFIX) for name in started + waived) or any(
        (matrix.test or "").startswith(D2D_PREFIX) or matrix.test is None for matrix in matrices)
    return topology_from(gpus, matrices, host_columns, source, "nvbandwidth", waived, list(dict.fromkeys(wrong_data)),
                         d2d_reached=reached)


def _name_and_bus(rest: str) -> tuple[str, str | None]:
    """``name (dddddddd:bb:dd)`` (the address optional, blanks after it) -> the name and the bus id."""
    rest = rest.rstrip()
    tail = _BUS_TAIL_RE.search(rest, max(1, len(rest) - 24))  # the name has at least one character
    if tail is None:
        return rest, None
    return rest[: tail.start()], hex_bus_id(tail.group(1), tail.group(2), tail.group(3))


def _device(index: int, rest: str) -> Gpu:
    name, bus = _name_and_bus(rest)
    return Gpu(index=index, name=name.strip()[:200], pci_bus_id=bus)


def _sum_name(lines: list[str], start: int) -> str | None:
    """The test named by the ``SUM <test>`` line just after a matrix (where ``Running`` was cut)."""
    for line in lines[start : start + 3]:
        if m := _SUM_RE.match(line):
            return re.sub(r"_(read|write)\d|_total$", "", m.group(1))
    return None


def _read_cells(lines: list[str], start: int, arrow: str) -> tuple[dict[tuple[int, int], float], int]:
    cells: dict[tuple[int, int], float] = {}
    i = start
    columns: list[int] | None = None
    while i < len(lines):
        tokens = lines[i].split()
        if columns is None:
            if tokens and all(device_index(t) is not None for t in tokens):
                columns = [int(t) for t in tokens]
                i += 1
                continue
            break
        row = device_index(tokens[0]) if tokens else None
        if row is None or len(tokens) != len(columns) + 1:
            break
        for column, token in zip(columns, tokens[1:]):
            value = number(token)
            if value is not None and row != column:
                cells[directed(arrow, row, column)] = value
            elif value is not None:
                cells[(row, column)] = value  # host rows: row is the CPU, column the GPU
        i += 1
    return cells, i


def topology_from(gpus: dict[int, Gpu], matrices: list[Matrix], host_columns: int, source: str, method_label: str,
                  waived: list[str] = (), wrong_data: list[str] = (),  # type: ignore[assignment]
                  d2d_reached: bool = True) -> Topology:
    """The Topology of the GPUs named or measured, with each pair's figures from ``matrices``;
    ``waived`` the tests nvbandwidth waived, ``wrong_data`` those its byte check stopped,
    ``d2d_reached`` whether the output gets as far as a device-to-device test."""
    indices = set(gpus) | {i for m in matrices for pair in m.cells for i in pair} | set(range(host_columns))
    if not indices:
        raise InputError(f"{source}: nvbandwidth output without any device or matrix")
    topo = with_all_pairs([gpus.get(i) or Gpu(index=i) for i in sorted(indices)], "nvbandwidth",
                          f"{len(indices)} GPUs measured by {method_label}", source)
    uni = sorted((m for m in matrices if m.kind == "uni"), key=_headline_rank)
    headline = uni[0] if uni else None
    for matrix in matrices:
        for (src, dst), value in matrix.cells.items():
            if src == dst:
                continue
            link = topo.link(src, dst)
            m = measurement_of(link, METHOD, source)
            if matrix is headline:
                m.test = matrix.test
                m.p2p_enabled = True  # nvbandwidth measures device-to-device only between peers
                set_directed(link, src, value, "a_to_b_gbps", "b_to_a_gbps")
            elif matrix.kind == "bidir-total":
                m.bidirectional_gbps = value if m.bidirectional_gbps is None else min(m.bidirectional_gbps, value)
            elif matrix.kind == "latency":
                m.latency_us = keep_worse(m.latency_us, value / 1000.0)
    if wrong_data:  # worse than slow: a copy delivered wrong bytes
        topo.reading_notes.append(ReadingNote("nvbandwidth-wrong-data", {
            "source": source, "tests": list(wrong_data),
            "peer": all(name.startswith(D2D_PREFIX) for name in wrong_data)}, sorted(indices)))  # else a host copy
    if not any(link.measured for link in topo.links):
        d2d = [name for name in waived if name.startswith(D2D_PREFIX)] if len(indices) > 1 else []
        topo.reading_notes.append(ReadingNote("no-pair-measured", {
            "source": source, "tool": "nvbandwidth", "waived": d2d, "gpu_count": len(indices),
            "stopped": bool(wrong_data), "cut_before_d2d": not d2d_reached and len(indices) > 1 and not wrong_data},
            sorted(indices) if d2d else []))
    return topo


def _headline_rank(matrix: Matrix) -> int:
    return HEADLINE_TESTS.index(matrix.test) if matrix.test in HEADLINE_TESTS else len(HEADLINE_TESTS)
