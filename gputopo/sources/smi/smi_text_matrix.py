"""Finding the matrices of ``nvidia-smi topo -m`` / ``topo -p2p`` text in the lines people paste.

A matrix is a header (``GPU0 GPU1 ... mlx5_0 CPU Affinity NUMA Affinity GPU NUMA ID``) and one row
per device below it. Pastes are often damaged; what can be read is read and each repair is noted
(``_Matrix.repairs``, each a plain record ``{"repair": kind, ...facts}``, kept by
``gputopo.sources.smi.smi_text`` in its ``repaired-paste`` reading note and worded by
``gputopo.analysis.notes.reading_notes``):

- a header whose cells ran together (``GPU0GPU1GPU2...mlx5_0``) while the rows are intact: the
  columns are the row labels, in order;
- rows pasted without their header: the GPU columns come from the rows, NIC columns that nothing
  names are left out, and the cells after the links are read in nvidia-smi's attribute order;
- the last device cell run into the CPU Affinity (``PH0-115``): the link word is taken from the
  device's own row (or the one word the letters can start), the CPUs from the rest;
- an underline escape that lost its ESC byte (``[4mGPU0 ... GPU NUMA ID[0m``);
- blank lines between the rows; a header or rows wrapped at the paste's width (joined);
- cells run together (``NODENODE``: ``smi_text_paste.split_row``) and cells that are no word (a NIC
  cell is then read from its mirror, or left out and named: ``_Matrix.unreadable``).

A shared line prefix (``# ``, ``> ``, a log prefix) is taken off before (``smi_text_paste``); a
``topo -mp`` command line above the header marks the matrix as PCIe paths only (``pcie_only``).

Cells never contain spaces (``X``, ``NV2``, ``0-11,24-35``, ``N/A``), so rows are split on any
whitespace; only the header needs care, because its attribute titles contain spaces.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from gputopo.sources.smi.smi_text_paste import (
    ATTRIBUTE_VALUE_RE,
    LINK_WORDS,
    NV_RE,
    P2P_WORDS,
    SELF_WORD,
    UNNAMED_PREFIX,
    is_cell_word,
    is_row_token,
    split_device_names,
    split_row,
    split_run_together,
    title_columns,
)

__all__ = ["LINK_WORDS", "NV_RE", "P2P_WORDS", "SELF_WORD", "UNNAMED_PREFIX", "is_cell_word"]

# Header titles after the device columns, longest first so "GPU NUMA ID" is not read as a GPU.
ATTRIBUTE_TITLES = ("GPU NUMA ID", "CPU Affinity", "NUMA Affinity")
# The order nvidia-smi prints them in, for rows pasted without their header.
ATTRIBUTE_ORDER = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")
_TITLE_PATTERN = "|".join(r"\s+".join(map(re.escape, t.split())) for t in ATTRIBUTE_TITLES)
_ATTRIBUTE_RE = re.compile(_TITLE_PATTERN, re.IGNORECASE)
_HEADER_CELL_RE = re.compile(_TITLE_PATTERN + r"|\S+", re.IGNORECASE)

# nvidia-smi underlines the header with ANSI escapes (ESC[4m ... ESC[0m), also when its output is
# redirected to a file; captures saved that way keep them, copies from web pages lose the ESC byte.
_ANSI_ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_BARE_ESCAPE_RE = re.compile(r"\[[0-9;]{0,5}m")
GPU_RE = re.compile(r"^GPU(\d{1,9})$")  # (a header of "GPU" and 5,000 digits made int() raise: a traceback)
_NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# `nvidia-smi topo -p2p r` (also --p2p, -p2p=r); the letter says which capability the matrix shows.
_P2P_COMMAND_RE = re.compile(r"(?:-p2p|--p2p(?:status)?)[=\s]+([rwnap]{1,5})\b", re.IGNORECASE)  # `rw`: several
_PCIE_ONLY_COMMAND_RE = re.compile(r"topo\b.{0,40}?(?:\s-mp\b|--matrix_pci\b)")
_HEADER_WORDS = {"cpu", "affinity", "numa", "gpu", "id"}


@dataclass
class _Matrix:
    """One matrix block as found in the text, before it becomes model objects."""

    header_line_no: int  # 1-based, for error messages (the first row's line where no header was pasted)
    columns: list[str]  # device columns in header order (GPU0, ..., mlx5_0 / NIC0)
    attributes: list[str]  # attribute titles after them
    rows: dict[str, list[str]] = field(default_factory=dict)  # row label -> device cells
    row_attributes: dict[str, list[str]] = field(default_factory=dict)  # row label -> attribute cells
    row_line_no: dict[str, int] = field(default_factory=dict)
    kind: str = "topo"  # "topo" (link words) or "p2p" (status words)
    p2p_capability: str | None = None  # r/w/a/n/p, from the command line before it (`rw`: as asked)
    repairs: list[dict[str, Any]] = field(default_factory=list)  # what was repaired: {"repair": kind, ...}
    merged: dict[str, str] = field(default_factory=dict)  # row label -> the cell that ran into its CPUs
    title_columns: list[int] | None = None  # where each attribute title starts (space-aligned pastes)
    unreadable: dict[tuple[str, str], str] = field(default_factory=dict)  # (row, column) -> the token there
    unplaced: list[str] = field(default_factory=list)  # rows whose affinity values could not be placed
    pcie_only: bool = False  # `nvidia-smi topo -mp` (--matrix_pci): PCIe paths only, NVLink not shown
    rows_apart_line: int | None = None  # where a row the matrix lacks stands further down, apart from it

    def position(self, column: str) -> int:
        """``columns.index(column)`` as a dict lookup (asked for every cell: 200 columns are 40,000),
        built again when ``columns`` is another list or has another length (nothing renames a
        column in place)."""
        cached = self.__dict__.get("_positions")
        if cached is None or cached[0] is not self.columns or cached[1] != len(self.columns):
            positions: dict[str, int] = {}
            for k, name in enumerate(self.columns):
                positions.setdefault(name, k)
            cached = self.__dict__["_positions"] = (self.columns, len(self.columns), positions)
        if column not in cached[2]:
            raise ValueError(f"{column!r} is not in list")
        return cached[2][column]

    @property
    def gpu_columns(self) -> list[str]:
        return [c for c in self.columns if GPU_RE.match(c)]


def strip_escapes(text: str) -> tuple[str, bool]:
    """The text without terminal escapes; whether some had lost their ESC byte (``[4m``)."""
    text = _ANSI_ESCAPE_RE.sub("", text)
    bare = _BARE_ESCAPE_RE.search(text) is not None
    return _BARE_ESCAPE_RE.sub("", text) if bare else text, bare


def describe(lines: list[str]) -> str:
    """A short description of what the text starts with, for error messages."""
    first = next((line.strip() for line in lines if line.strip()), "")
    if not first:
        return "only blank lines"
    if len(first) > 60:
        first = first[:57] + "..."
    return f"{sum(1 for line in lines if line.strip())} non-blank lines starting with {first!r}"


def _header_parts(line: str) -> tuple[str, list[str]] | None:
    """``(device part, attribute titles)`` of a line starting with GPU0, else None."""
    stripped = line.strip()
    if not stripped.startswith("GPU0"):
        return None
    match = _ATTRIBUTE_RE.search(stripped)
    attributes: list[str] = []
    if match:
        for title_match in _HEADER_CELL_RE.finditer(stripped[match.start() :]):
            attributes.append(" ".join(title_match.group(0).split()))
    return (stripped[: match.start()] if match else stripped), attributes


def _consecutive_gpus(columns: list[str]) -> bool:
    numbers = [int(m.group(1)) for m in (GPU_RE.match(c) for c in columns) if m]
    return bool(numbers) and numbers == list(range(len(numbers)))


def split_header(line: str) -> tuple[list[str], list[str]] | None:
    """``(device columns, attribute titles)`` if ``line`` is a matrix header, else ``None``.

    A header is GPU0 (and maybe more GPUn) first, then other device columns (NICs), then the
    attribute titles, which contain spaces and are matched as phrases.
    """
    parts = _header_parts(line)
    if parts is None:
        return None
    columns = parts[0].split()
    if any(split_device_names(c) for c in columns):
        return None  # device names run together: read from the row labels (_run_together_header)
    if any(c.upper() in LINK_WORDS or c.upper() in P2P_WORDS or c == SELF_WORD or NV_RE.match(c) for c in columns):
        return None  # a matrix row (GPU0  X  NV1 ...) whose header was not pasted
    if not _consecutive_gpus(columns):
        return None
    return columns, parts[1]


def _logical_rows(lines: list[str], start: int) -> Iterator[str]:
    """The row lines from ``start`` on, blank lines skipped and wrapped rows joined (a line of cell
    words and affinity values only continues the row above it); stops at any other line. Made as
    they are asked for: a caller that stops at a repeated label reads no further (a paste of
    thousands of rows below every candidate header line was quadratic)."""
    parts: list[str] = []
    for index in range(start, len(lines)):
        line = lines[index]
        tokens = line.split()
        if not tokens:
            continue
        if parts and all(is_row_token(t) for t in tokens):
            parts.append(line.strip())
            continue
        if len(tokens) < 2 or is_cell_word(tokens[0]):
            break
        if parts:
            yield _joined(parts)
        parts = [line]
    if parts:
        yield _joined(parts)


def _joined(parts: list[str]) -> str:
    """A row and the lines that continue it, as one line (a row alone as it was)."""
    return parts[0] if len(parts) == 1 else " ".join([parts[0].rstrip(), *parts[1:]])


def _row_labels(lines: list[str], start: int) -> list[str]:
    """The labels of the matrix rows from ``start`` on: lines with a self cell (X) after a label."""
    labels: list[str] = []
    seen: set[str] = set()
    for line in _logical_rows(lines, start):
        tokens = line.split()
        if tokens[0] in seen or not any(SELF_WORD in (split_run_together(t) or [t.upper()]) for t in tokens[1:]):
            break
        labels.append(tokens[0])
        seen.add(tokens[0])
    return labels


def _run_together_header(lines: list[str], index: int) -> _Matrix | None:
    """A header whose device cells ran together (``GPU0GPU1...mlx5_0``, ``NIC11NIC12``): read from the
    row labels where they spell it, else from its names split apart where the rows (cut short) start
    with them."""
    parts = _header_parts(lines[index])
    if parts is None:
        return None
    device_part, attributes = parts
    tokens = device_part.split()
    labels = _row_labels(lines, index + 1)
    glued = next((t for t in tokens if split_device_names(t)), tokens[0] if tokens else "")
    if len(tokens) < len(labels) and "".join(tokens) == "".join(labels):
        columns, split = labels, False
    else:
        columns, split = [name for t in tokens for name in (split_device_names(t) or [t])], True
        if len(columns) == len(tokens) or not labels or columns[: len(labels)] != labels:
            return None
    if not _consecutive_gpus(columns) or not GPU_RE.match(columns[0]):
        return None
    matrix = _Matrix(header_line_no=index + 1, columns=columns, attributes=attributes)
    matrix.repairs.append({"repair": "header-ran-together", "line": index + 1, "cell": glued, "split": split})
    return matrix


def _expanded(tokens: list[str]) -> list[str]:
    """Tokens with cells that ran together (``XNV18``) split into their words."""
    return [word for token in tokens for word in (split_run_together(token) or [token])]


def _headerless_rows(lines: list[str], index: int) -> _Matrix | None:
    """Rows pasted without their header (``GPU0  X  NV18 ...`` first): columns from the rows. Where
    the rows were cut, a column past the last GPU row that holds an NV# cell is a GPU too (only GPUs
    have NVLinks to GPUs; nvidia-smi puts every GPU column before the NICs)."""
    tokens = _expanded(lines[index].split())
    if len(tokens) < 2 or tokens[0] != "GPU0" or tokens[1].upper() != SELF_WORD:
        return None
    labels = _row_labels(lines, index)
    gpus = [label for label in labels if GPU_RE.match(label)]
    if not _consecutive_gpus(gpus) or labels[: len(gpus)] != gpus:
        return None
    nics = labels[len(gpus) :]
    counts = []  # (link cells, attribute cells) per GPU row
    nvlinked = 0  # the columns up to the last NV# cell of any GPU row
    for line in itertools.islice(_logical_rows(lines, index), len(gpus)):
        cells = _expanded(line.split()[1:])
        links = next((k for k, cell in enumerate(cells) if not is_cell_word(cell)), len(cells))
        counts.append((links, len(cells) - links))
        nvlinked = max([nvlinked] + [k + 1 for k, cell in enumerate(cells[:links]) if NV_RE.match(cell.upper())])
    link_cells = min(c for c, _ in counts)
    rowless = [f"GPU{k}" for k in range(len(gpus), min(nvlinked, link_cells))] if not nics else []
    unnamed = link_cells - len(gpus) - len(rowless) - len(nics)
    attribute_count = max(a for _, a in counts)
    if unnamed < 0 or attribute_count > len(ATTRIBUTE_ORDER):
        return None
    columns = gpus + rowless + nics + [f"{UNNAMED_PREFIX}{k}" for k in range(unnamed)]
    matrix = _Matrix(header_line_no=index + 1, columns=columns, attributes=list(ATTRIBUTE_ORDER[:attribute_count]))
    above = next((k for k in range(index - 1, -1, -1) if lines[k].strip()), None)
    mismatched = above + 1 if above is not None and _header_parts(lines[above]) is not None else None
    matrix.repairs.append({"repair": "rows-without-header", "header_line": mismatched, "line": index + 1,
                           "gpus": [gpus[0], (gpus + rowless)[-1]], "gpus_by_nvlink": rowless,
                           "unnamed_nics": unnamed, "attributes": list(matrix.attributes)})
    return matrix


def _header_continuation(line: str) -> bool:
    """Whether a line is the rest of a header wrapped at the paste's width: device names and title
    words only (``NIC5 NIC6 CPU Affinity NUMA Affinity``)."""
    tokens = line.split()
    if not tokens or tokens[0].startswith("GPU0"):
        return False
    return all(t.lower() in _HEADER_WORDS or split_device_names(t + t) for t in tokens) and not any(
        is_cell_word(t) for t in tokens)


def _header_at(lines: list[str], i: int) -> tuple[_Matrix, int] | None:
    """The matrix whose header (maybe wrapped over several lines) starts at line ``i``, and the
    index of the line after the header; None if no header starts there."""
    if "GPU0" not in lines[i]:
        return None  # (the cheap test first: most lines of a paste are no header)
    end = i + 1
    joined = lines[i]
    if _header_parts(lines[i]) is not None:
        while (after := _next_nonblank(lines, end)) is not None and _header_continuation(lines[after]):
            joined, end = joined.rstrip() + " " + lines[after].strip(), after + 1
    header = split_header(joined)
    if header is not None:
        matrix = _Matrix(header_line_no=i + 1, columns=header[0], attributes=header[1])
        if end > i + 1:
            matrix.repairs.append({"repair": "header-wrapped", "lines": end - i, "line": i + 1})
        else:
            matrix.title_columns = title_columns(lines[i], header[1])
        return matrix, end
    matrix = _run_together_header(lines, i)  # type: ignore[assignment]
    return (matrix, i + 1) if matrix is not None else None


def find_matrices(lines: list[str]) -> list[_Matrix]:
    matrices: list[_Matrix] = []
    i = 0
    while i < len(lines):
        found = _header_at(lines, i)
        if found is None:
            i += 1
            continue
        matrix, first_row = found
        matrix.p2p_capability = _p2p_capability_before(lines, i)
        matrix.pcie_only = any(_PCIE_ONLY_COMMAND_RE.search(lines[k]) for k in _lines_above(lines, i))
        i = read_rows(lines, first_row, matrix)
        if not matrix.rows and i == first_row:
            i = first_row
        matrices.append(matrix)
    if not matrices:  # only rows, no header anywhere: read them (never beside a real header)
        for i in range(len(lines)):
            headerless = _headerless_rows(lines, i)
            if headerless is not None:
                headerless.p2p_capability = _p2p_capability_before(lines, i)
                read_rows(lines, i, headerless)
                return [headerless]
    return matrices


def _lines_above(lines: list[str], index: int, count: int = 3) -> list[int]:
    """The indexes of the ``count`` non-blank lines above line ``index``, nearest first."""
    above = []
    for back in range(index - 1, -1, -1):
        if lines[back].strip():
            above.append(back)
            if len(above) == count:
                break
    return above


def _p2p_capability_before(lines: list[str], header_index: int) -> str | None:
    """The capability letter(s) of a ``topo -p2p X`` command on one of the few lines above a header."""
    for back in _lines_above(lines, header_index):
        match = _P2P_COMMAND_RE.search(lines[back])
        if match:
            return match.group(1).lower()
        if split_header(lines[back]) is not None:
            break
    return None


_MAX_BLANK_RUN = 8  # blank lines a matrix may have between its lines (a paste's double spacing)


def _next_nonblank(lines: list[str], start: int) -> int | None:
    """The next non-blank line from ``start`` within a few lines (a longer gap ends the matrix; a
    bounded look keeps a text of a million blank lines linear)."""
    return next((k for k in range(start, min(len(lines), start + _MAX_BLANK_RUN + 1)) if lines[k].strip()), None)


def _continues_row(row_line: str, next_line: str, matrix: _Matrix) -> bool:
    """Whether ``next_line`` is the rest of a row wrapped at the paste's width (80 columns)."""
    tokens = next_line.split()
    if not tokens or tokens[0] in matrix.columns or tokens[0].startswith("GPU0"):
        return False
    if not all(is_row_token(t) for t in tokens):
        return False
    row = split_row(row_line, len(matrix.columns), matrix.attributes, None)
    if len(row.cells) < len(matrix.columns):
        return True
    values = 0
    for token in reversed(row_line.split()):
        if not ATTRIBUTE_VALUE_RE.match(token):
            break
        values += 1
    gpu_row = GPU_RE.match(row_line.split()[0]) is not None  # NIC rows have no affinity values
    return (0 < values or gpu_row) and values < len(matrix.attributes) and all(ATTRIBUTE_VALUE_RE.match(t) for t in tokens)


def read_rows(lines: list[str], start: int, matrix: _Matrix) -> int:
    """Read the rows below a header into ``matrix``; return the index of the first line after them.

    Blank lines between rows are skipped, rows wrapped over several lines are joined."""
    labels = set(matrix.columns)
    i = start
    blank_skipped = wrapped = 0
    while i < len(lines):
        tokens = lines[i].split()
        if not tokens:
            after = _next_nonblank(lines, i)
            label = lines[after].split()[0] if after is not None else None
            if after is None or label not in labels or label in matrix.rows:
                break
            if matrix.rows:  # between the rows; not under the header (a markdown table's '| --- |' rule)
                blank_skipped += after - i
            i = after
            continue
        label = tokens[0]
        if label not in labels or label in matrix.rows:
            break  # (a second matrix with the same devices starts without its own header)
        line, line_no = lines[i], i + 1
        i += 1
        while (after := _next_nonblank(lines, i)) is not None and _continues_row(line, lines[after], matrix):
            line, i, wrapped = line.rstrip() + " " + lines[after].strip(), after + 1, wrapped + 1
        _store_row(matrix, label, line, line_no)
    if matrix.rows and blank_skipped:
        matrix.repairs.append({"repair": "blank-lines", "lines": blank_skipped})
    if matrix.unplaced:
        matrix.repairs.append({"repair": "affinity-unplaced", "rows": list(matrix.unplaced)})
    if wrapped:
        matrix.repairs.append({"repair": "rows-wrapped", "lines": wrapped})
        matrix.title_columns = None
    words = {cell.upper() for cell in set(itertools.chain.from_iterable(matrix.rows.values()))} - {SELF_WORD}
    if words and words <= P2P_WORDS:
        matrix.kind = "p2p"
    return i


def _store_row(matrix: _Matrix, label: str, line: str, line_no: int) -> None:
    row = split_row(line, len(matrix.columns), matrix.attributes, matrix.title_columns)
    matrix.rows[label] = row.cells
    matrix.row_attributes[label] = row.attributes
    matrix.row_line_no[label] = line_no
    for position, token in row.unreadable.items():
        if position < len(matrix.columns):
            matrix.unreadable[(label, matrix.columns[position])] = token
    if row.merged:
        matrix.merged[label] = row.merged
    for token in row.run_together:
        matrix.repairs.append({"repair": "cells-ran-together", "cell": token, "row": label})
    if row.unplaced:
        matrix.unplaced.append(label)


def nic_legend(lines: list[str]) -> dict[str, str]:
    """``{"NIC0": "mlx5_0", ...}`` from a ``NIC Legend:`` block (newer nvidia-smi)."""
    legend: dict[str, str] = {}
    in_legend = False
    for line in lines:
        if line.strip().lower().startswith("nic legend"):
            in_legend = True
            continue
        if in_legend:
            match = _NIC_LEGEND_RE.match(line)
            if match:
                legend[match.group(1)] = match.group(2)
            elif line.strip():
                in_legend = False
    return legend
