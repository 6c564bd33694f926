"""TensorFlow's peer matrices (``DMA:`` and the edge matrix) -> entries of ``TfView.peer``.

A matrix may come without its column header (pasted excerpts lose it, and sometimes the title
line too): its rows are read all the same, the columns taken as ordinals 0..width-1 (or the rows'
own ordinals where there are as many rows as columns), and the missing header is noted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.model import Finding


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


def apply_matrix(matrix: PeerMatrix, peer: list[list[bool | None]], notes: list[Finding]) -> None:
    """Copy a matrix into ``peer`` (by ordinal) and note a missing header, rows or cells."""
    columns = matrix.columns()
    if not matrix.ordinals and matrix.rows:
        span = f"{columns[0]}-{columns[-1]}" if len(columns) > 1 else str(columns[0])
        notes.append(_cut(f"line {matrix.line_no}: the peer matrix has no header line; columns read as ordinals {span}"))
    for row_ordinal, values in matrix.rows.items():
        if row_ordinal >= len(peer):
            continue
        for column, value in zip(columns, values):
            if column >= len(peer) or column == row_ordinal:
                continue  # the diagonal: DMA says Y, edge matrices N; a device always reaches itself
            peer[row_ordinal][column] = value
        if len(values) < len(columns):
            notes.append(
                _cut(f"the peer matrix row for GPU {row_ordinal} is cut short ({len(values)} of {len(columns)} entries)")
            )
    missing = [o for o in columns if o not in matrix.rows]
    if missing:
        notes.append(
            _cut(
                f"line {matrix.line_no}: the peer matrix has no rows for GPU "
                f"{', '.join(map(str, missing))}; those entries are unknown unless other lines say"
            )
        )


def _cut(what: str) -> Finding:
    return Finding("info", "tf-log-cut", what)
