"""Shared output plumbing: the rich consoles and JSON printing."""

from __future__ import annotations

import json
import math
import sys
from typing import Any

from rich import box
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

_stdout: Console | None = None
_stderr: Console | None = None


def out() -> Console:
    """The console for human output (created on first use so tests can capture stdout)."""
    global _stdout
    if _stdout is None or _stdout.file is not sys.stdout:
        _stdout = Console(file=sys.stdout, highlight=False)
    return _stdout


def err() -> Console:
    """The console for progress and notes (standard error), keeping stdout clean for --json."""
    global _stderr
    if _stderr is None or _stderr.file is not sys.stderr:
        _stderr = Console(file=sys.stderr, highlight=False)
    return _stderr


def _finite(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None, recursively."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def print_json(data: Any) -> None:
    """``--json`` output: always valid JSON (json.dumps would write NaN / Infinity, which strict
    parsers such as jq and JSON.parse reject), so a non-finite figure becomes null."""
    sys.stdout.write(json.dumps(_finite(data), indent=2, allow_nan=False) + "\n")
    sys.stdout.flush()


def matrix_tables(
    title: str, headers: list[str], rows: list[tuple[str, list[Text]]], width: int | None, min_cell: int = 4
) -> list[Group]:
    """A matrix as one table, or as one table per block of columns when it is wider than ``width``:
    every row label and every column stays readable (rich would otherwise cut both to '…')."""
    cell_widths = [
        max(min_cell, len(header), *(len(cells[k].plain) for _, cells in rows)) for k, header in enumerate(headers)
    ]
    label_width = max((len(label) for label, _ in rows), default=0)
    blocks: list[list[int]] = [list(range(len(headers)))]
    if width is not None:
        # Each cell takes its width plus one space either side (see the tables' padding below).
        per_block = max(1, (width - label_width - 2) // (max(cell_widths, default=min_cell) + 2))
        if per_block < len(headers):
            count = -(-len(headers) // per_block)
            size = -(-len(headers) // count)  # even blocks: 16 columns in 8 + 8, not 12 + 4
            blocks = [list(range(k, min(k + size, len(headers)))) for k in range(0, len(headers), size)]
    tables = []
    for block in blocks:
        part = title if len(blocks) == 1 else f"{title}, columns {headers[block[0]]}..{headers[block[-1]]}"
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
        table.add_column("", no_wrap=True, min_width=label_width)
        for k in block:
            table.add_column(Text(headers[k]), justify="center", no_wrap=True, min_width=cell_widths[k])
        for label, cells in rows:
            table.add_row(Text(label), *(cells[k] for k in block))
        # The title on its own line: as a table title rich would wrap it to the table's width
        # ("Links between GPUs / (nvidia-smi words, / coloured by / ..." over a 2-GPU matrix).
        tables.append(Group(Text(part, style="table.title"), table))
    return tables
