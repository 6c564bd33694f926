"""TensorFlow's peer matrices (``DMA:`` and the edge matrix) -> entries of ``TfView.peer``.

A matrix may come without its column header (pasted excerpts lose it, and sometimes the title
line too): its rows are read all the same, the columns taken as ordinals 0..width-1 (or the rows'
own ordinals where there are as many rows as columns), and the missing header is noted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputopo.model import ReadingNote

# The reading note of every place a TensorFlow log is cut (facts: ``{"cut": kind, ...}``).
TF_LOG_CUT = "tf-log-cut"


@dataclass
class PeerMatrix:
    ordinals: list[int]  # the column header's ordinals; [] when the header line is missing
    line_no: int = 0
    rows: dict[int, list[bool]] = field(default_factory=dict)
    diagonal_is_self: bool = True  # DMA matrices print Y on the diagonal, edge matrices N

    def add_row(self, ordinal: int, values: list[bool]) -> None:
        if ordinal not in self.rows:  # a repeated row (another rank's) does not overwrite the first
            self.rows[ordinal] = values

    def columns(self) -> list[int]:
        """The column ordinals: the header's, or read from the rows when it is missing."""
        if self.ordinals or not self.rows:
            return self.ordinals
        width = max(len(values) for values in self.rows.values())
        row_ordinals = sorted(self.rows)
        return row_ordinals if len(row_ordinals) == width else list(range(width))

    def named(self) -> set[int]:
        return set(self.columns()) | set(self.rows)


def apply_matrix(matrix: PeerMatrix, peer: list[list[bool | None]], notes: list[ReadingNote]) -> None:
    """Copy a matrix into ``peer`` (by ordinal) and note a missing header, rows or cells."""
    columns = matrix.columns()
    if not matrix.ordinals and matrix.rows and columns:  # (rows cut before any cell: no columns to name)
        notes.append(_cut({"cut": "matrix-header", "line": matrix.line_no, "columns": [columns[0], columns[-1]]}))
    for row_ordinal, values in matrix.rows.items():
        if row_ordinal >= len(peer):
            continue
        for column, value in zip(columns, values):
            if column >= len(peer) or column == row_ordinal:
                continue  # the diagonal: DMA says Y, edge matrices N; a device always reaches itself
            peer[row_ordinal][column] = value
        if len(values) < len(columns):
            notes.append(_cut({"cut": "matrix-row", "gpu": row_ordinal, "entries": len(values), "of": len(columns)}))
    missing = [o for o in columns if o not in matrix.rows]
    if missing:
        notes.append(_cut({"cut": "matrix-rows", "line": matrix.line_no, "gpus": missing}))


def _cut(place: dict[str, Any]) -> ReadingNote:
    return ReadingNote(TF_LOG_CUT, place)
