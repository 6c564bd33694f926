"""GPU rows a pasted ``nvidia-smi topo -m`` matrix lacks, and what the other rows still say.

Pastes are cut: an issue excerpt, a terminal's scroll-back or a chat message ends after row GPU5 of
eight, sometimes inside a row. The rows that are there still give each row-less GPU's link to every
GPU that has a row (the cell in that row's column), so nearly the whole matrix is known; only the
pairs between two row-less GPUs, and the row-less GPUs' CPU and NUMA affinity, are not. Those are
read as unknown (link type ``UNKNOWN``, attributes ``None``) and the paste is said to be cut, instead
of refusing the whole text. A row cut short is dropped only where it is the matrix's last line: a
short row with rows after it means the columns were misread, which stays an error.
"""

from __future__ import annotations

from collections.abc import Callable

from gputopo.errors import InputError
from gputopo.model import Link, make_link
from gputopo.sources.pasted import MAX_GPUS
from gputopo.sources.smi.smi_text_links import link_facts
from gputopo.sources.smi.smi_text_matrix import GPU_RE, _Matrix

UNKNOWN_LINK = "UNKNOWN"


def rowless_gpus(matrix: _Matrix, source: str) -> list[str]:
    """The GPU columns of ``matrix`` without a whole row (a last row cut short is dropped to join
    them, and said); the cut is recorded in ``matrix.repairs`` (``last-row-cut``, ``rows-missing``; worded by
    ``analysis.notes.reading_notes``). Raises ``InputError`` where no GPU row
    is whole, where a GPU row other than the matrix's last line is cut short, or where the header
    lists more than ``MAX_GPUS`` GPUs (a header of a few kilobytes would otherwise make millions of
    unknown pairs)."""
    gpu_columns = matrix.gpu_columns
    if len(gpu_columns) > MAX_GPUS:  # with rows missing, work would follow the header's pairs, not the text
        raise InputError(f"{source} line {matrix.header_line_no}: the matrix's header lists {len(gpu_columns)} GPUs, "
                         f"more than {MAX_GPUS}; not a real capture")
    last_line = max(matrix.row_line_no.values(), default=0)
    for column in gpu_columns:
        cells = matrix.rows.get(column)
        if cells is None or len(cells) >= len(matrix.columns):
            continue
        if matrix.row_line_no[column] != last_line or len(matrix.rows) == 1:
            raise InputError(
                f"{source} line {matrix.row_line_no[column]}: row {column} is cut short: expected "
                f"{len(matrix.columns)} cells ({', '.join(matrix.columns)}), found {len(cells)}"
            )
        _drop_row(matrix, column)
        matrix.repairs.append({"repair": "last-row-cut", "row": column, "cells": len(cells),
                               "columns": len(matrix.columns)})
    missing = [c for c in gpu_columns if c not in matrix.rows]
    if len(missing) == len(gpu_columns):
        raise InputError(
            f"{source}: the matrix is cut short: its header (line {matrix.header_line_no}) lists "
            f"{len(gpu_columns)} GPUs but rows were found only for none"
        )
    if missing:
        indices = [int(GPU_RE.match(c).group(1)) for c in missing]  # type: ignore[union-attr]
        matrix.repairs.append({"repair": "rows-missing", "rows": missing, "gpus": indices,
                               "apart_line": matrix.rows_apart_line})
    return missing


def _drop_row(matrix: _Matrix, column: str) -> None:
    matrix.rows.pop(column, None)
    matrix.row_attributes.pop(column, None)
    matrix.merged.pop(column, None)
    for key in [key for key in matrix.unreadable if key[0] == column]:
        del matrix.unreadable[key]


def links_with_rowless(matrix: _Matrix, index_of: dict[str, int], rowless: set[str],
                       careful: Callable[[str, str], str]) -> list[Link]:
    """The links of a matrix some of whose GPU rows are missing (``rowless``), pair by pair (a cut
    paste is small; a whole matrix goes through ``smi_text_links.gpu_links``). A pair with one row
    is read from that row (``careful(a, b)``: the word of the pair from row ``a``; ``careful(a, a)``
    checks the diagonal); a pair with none is ``UNKNOWN``."""
    gpu_columns = matrix.gpu_columns
    links: list[Link] = []
    for pos, a in enumerate(gpu_columns):
        if a not in rowless:
            careful(a, a)
        for b in gpu_columns[pos + 1 :]:
            if a in rowless and b in rowless:  # neither row is in the paste
                links.append(make_link(index_of[a], index_of[b], UNKNOWN_LINK, nvswitch=None))
                continue
            word = careful(b, a) if a in rowless else careful(a, b)
            nvlink_count, nvswitch, pcie_path = link_facts(word, matrix.pcie_only)
            links.append(make_link(index_of[a], index_of[b], word, nvlink_count=nvlink_count,
                                   pcie_path=pcie_path, nvswitch=nvswitch))
    return links
