"""The decoration people add around ``nvidia-smi topo -m`` text, found by structure and taken off.

A matrix is a header (``GPU0 GPU1 ... CPU Affinity ...``) and rows (``GPU0  X  NV18 ...``); what
surrounds it varies with where it was pasted from. These helpers work on lines and cells, not on
any one decoration:

- ``unpipe_table``: a matrix written as a markdown table (``| GPU0 | X | NV4 |``), read as the
  tab-separated lines nvidia-smi prints;
- ``strip_line_prefix``: a prefix every matrix line shares (``# ``, ``> ``, ``| ``, a log prefix
  with a time stamp, a prompt) is whatever stands before ``GPU0`` on the header (or first row); it
  is taken off every line that carries it, digits matching any digits (time stamps change);
- ``split_run_together``: two cells whose separator was lost (``NODENODE``, ``PIXNODE``,
  ``SYSSYS``, ``NV18NV18``) split by the vocabulary of link (or P2P) words;
- ``place_by_column``: the attribute cells of a space-aligned row with an empty cell (a Slurm
  cpuset's empty ``CPU Affinity``), placed under the header title they stand below, or not at all;
- ``text_facts``: what any line of the paste says about the machine (a hypervisor, the old legend's
  ``SOC`` = "between CPU sockets"), for ``gputopo.analysis.place.locality`` (``paste_notes``: as reading notes).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any

from gputopo.model import PCIE_PATHS, ReadingNote
from gputopo.model.reading_notes import SOC_BETWEEN_SOCKETS, VM_EVIDENCE

LINK_WORDS = set(PCIE_PATHS) | {"SOC"}
P2P_WORDS = {"OK", "CNS", "GNS", "TNS", "DR", "NS", "U"}
SELF_WORD = "X"
NV_RE = re.compile(r"^NV(\d+)$")
UNNAMED_PREFIX = "?"  # columns of rows pasted without a header that nothing names
# A link word's first letters run into a CPU list: "PH0-115" (PHB, then CPUs 0-115).
_MERGED_CELL_RE = re.compile(r"^([A-Za-z]{1,4})(\d[\d,\-]*)$")

# "GPU0" as a word: the anchor of a header or of the first row.
_GPU0_RE = re.compile(r"(?<![A-Za-z0-9_])GPU0(?![0-9])")
GPU_ROW_LABEL_RE = re.compile(r"GPU\d{1,4}")
_LINK_VOCABULARY_RE = re.compile(r"X|NV\d{1,3}|PIX|PXB|PHB|NODE|SYS|SOC", re.IGNORECASE)
_P2P_VOCABULARY_RE = re.compile(r"X|OK|CNS|GNS|TNS|DR|NS|U", re.IGNORECASE)
_DEVICE_NAME_RE = re.compile(r"GPU\d{1,4}|NIC\d{1,4}|mlx\d_(?:bond_)?\d{1,4}", re.IGNORECASE)
ATTRIBUTE_VALUE_RE = re.compile(r"^(?:\d[\d,\-]*|N/A|-)$", re.IGNORECASE)
_PLACE_SLACK = 2  # columns a value may stand off its title's first column

# VM evidence a paste may carry next to the matrix (lscpu, dmidecode, /sys/class/dmi, systemd-detect-virt).
_VM_LINE_RES = (
    re.compile(r"Hypervisor vendor:[ \t]*\S+", re.IGNORECASE),
    re.compile(r"(?:Manufacturer|Product Name|sys_vendor|product_name|System Vendor|Vendor):[ \t]*"
               r"(?:QEMU|KVM|VMware[^\n]{0,40}|innotek GmbH|VirtualBox|Xen|Bochs|OpenStack[^\n]{0,20}|"
               r"Microsoft Corporation Virtual Machine|Virtual Machine|Standard PC \([^)\n]{0,30}\))", re.IGNORECASE),
    re.compile(r"systemd-detect-virt\S{0,40}[ \t]*\n?[ \t]*(?:kvm|qemu|vmware|microsoft|xen|oracle|amazon)\b", re.IGNORECASE),
)
# The legend of nvidia-smi before r384: "SOC  = Connection traversing PCIe as well as the SMP link
# between CPU sockets(e.g. QPI)".
_SOC_LEGEND_RE = re.compile(r"^[ \t*#>|]*SOC[ \t]*=.{0,80}between CPU sockets", re.IGNORECASE | re.MULTILINE)


def _prefix_pattern(prefix: str) -> re.Pattern[str]:
    core = prefix.strip()
    parts = []
    for chunk in re.split(r"(\d+|\s+)", core):
        if not chunk:
            continue
        if chunk.isdigit():
            parts.append(r"\d+")
        elif chunk.isspace():
            parts.append(r"\s+")
        else:
            parts.append(re.escape(chunk))
    return re.compile(r"^\s*" + "".join(parts) + r"[ \t]?")


def _anchor_prefix(lines: list[str]) -> str | None:
    """What stands before ``GPU0`` on the first line that starts a matrix (header or row)."""
    for line in lines:
        match = _GPU0_RE.search(line)
        if match is None:
            continue
        rest = line[match.start() :].split()
        if len(rest) < 2:
            continue
        starts_matrix = rest[1].upper() == "X" or _GPU0_RE.match(rest[0]) and (
            rest[1].upper().startswith("GPU1") or rest[0].upper().startswith("GPU0GPU1"))
        if starts_matrix or (rest[0] == "GPU0" and len(rest) >= 2 and rest[1].upper() in ("CPU", "NIC0", "MLX5_0")):
            return line[: match.start()]
    return None


_PIPE_ROW_RE = re.compile(r"^([^|]*)\|(.*)\|\s*$")  # what stands before the first border: a shared prefix
_PIPE_RULE_RE = re.compile(r"^\s*:?-{3,}:?\s*$")
_PIPE_GPU_CELL_RE = re.compile(r"\|\s*GPU\d{1,4}\s*\|")


def unpipe_table(lines: list[str]) -> tuple[list[str], bool]:
    """A matrix written as a markdown table (``| GPU0 | X | NV4 |``, a ``| --- |`` rule under the
    header) as nvidia-smi's own tab-separated lines, any prefix before the first border kept for
    ``strip_line_prefix``; whether it was one. Only where two or more such rows name a GPU: a lone
    pipe elsewhere in a paste is left alone."""
    split = {i: (m.group(1), [cell.strip() for cell in m.group(2).split("|")])
             for i, line in enumerate(lines) if "|" in line and (m := _PIPE_ROW_RE.match(line))}
    rows = [cells for i, (_, cells) in split.items() if _PIPE_GPU_CELL_RE.search(lines[i])
            and any(GPU_ROW_LABEL_RE.fullmatch(cell) for cell in cells[:2])]
    if len(rows) < 2:
        return lines, False
    # A border-style prefix ("| " before each line) gives every line one more empty first cell.
    extra = all(cells[0] == "" and len(cells) > 1 and GPU_ROW_LABEL_RE.fullmatch(cells[1]) for cells in rows)
    out = list(lines)
    for i, (prefix, cells) in split.items():
        cells = cells[1:] if extra and cells and not cells[0] else cells
        rule = all(_PIPE_RULE_RE.match(cell) or not cell for cell in cells)
        out[i] = "" if rule else prefix + "\t".join(cells)
    return out, True


def strip_line_prefix(lines: list[str]) -> tuple[list[str], str | None]:
    """The lines without the prefix the matrix lines share; the prefix as shown (None: none)."""
    prefix = _anchor_prefix(lines)
    if prefix is None or not prefix.strip() or len(prefix) > 200:
        return lines, None
    pattern = _prefix_pattern(prefix)
    core = " ".join(prefix.split())
    stripped = []
    for line in lines:
        match = pattern.match(line)
        if match:
            stripped.append(line[match.end() :])
        elif line.strip() and core.startswith(" ".join(line.split())):
            stripped.append("")  # the prefix alone, its trailing blank lost: a blank line
        else:
            stripped.append(line)
    return stripped, prefix.strip()


def split_run_together(token: str) -> list[str] | None:
    """``NODENODE`` -> ``["NODE", "NODE"]``; None when the token is not two or more known words."""
    for vocabulary in (_LINK_VOCABULARY_RE, _P2P_VOCABULARY_RE):
        words = []
        position = 0
        while position < len(token):
            match = vocabulary.match(token, position)
            if match is None:
                break
            words.append(match.group(0).upper())
            position = match.end()
        if position == len(token) and len(words) >= 2:
            return words
    return None


def split_device_names(token: str) -> list[str] | None:
    """A header cell of several device names run together (``NIC3NIC4``), split; else None."""
    words = []
    position = 0
    while position < len(token):
        match = _DEVICE_NAME_RE.match(token, position)
        if match is None:
            return None
        words.append(match.group(0))
        position = match.end()
    return words if len(words) >= 2 else None


def title_columns(header: str, titles: list[str]) -> list[int] | None:
    """The first column of each attribute title in the header line (tabs expanded), or None."""
    expanded = header.expandtabs(8)
    columns = []
    position = 0
    for title in titles:
        match = re.compile(r"\s+".join(map(re.escape, title.split())), re.IGNORECASE).search(expanded, position)
        if match is None:
            return None
        columns.append(match.start())
        position = match.end()
    return columns


def place_by_column(line: str, values: list[str], columns: list[int]) -> list[str] | None:
    """Each attribute value under the title whose first column it starts at (within a column or
    two); ``""`` for titles with nothing below them. None where a value stands under no title (the
    paste is not aligned: nothing can be placed safely)."""
    expanded = line.expandtabs(8)
    placed = [""] * len(columns)
    position = len(expanded)
    starts = []
    for value in reversed(values):  # the attribute values are the last cells of the row
        position = expanded.rfind(value, 0, position)
        if position < 0:
            return None
        starts.append(position)
    starts.reverse()
    for value, start in zip(values, starts):
        near = [k for k, column in enumerate(columns) if abs(start - column) <= _PLACE_SLACK]
        if not near and start > columns[-1]:
            near = [len(columns) - 1]  # right of the last title (nvidia-smi's extra empty cell before GPU NUMA ID)
        if len(near) != 1 or placed[near[0]]:
            return None
        placed[near[0]] = value
    return placed


def tab_stop_fields(line: str, values: list[str]) -> list[str] | None:
    """The attribute fields of a tab-separated row whose tabs were expanded to spaces (every cell
    starts on a tab stop, 8 columns apart), empty ones kept: an empty cell is a tab stop with nothing
    on it. None where the row is not laid out on tab stops."""
    tokens = [(m.start(), m.group(0)) for m in re.finditer(r"\S+", line)]
    if len(tokens) < len(values) + 2 or [t for _, t in tokens[-len(values) :]] != values:
        return None
    first = tokens[1][0] - (1 if tokens[1][1].upper() == SELF_WORD else 0)
    offset = first % 8

    def on_stop(start: int, token: str) -> bool:
        return (start - offset - (1 if token.upper() == SELF_WORD else 0)) % 8 == 0

    if not all(on_stop(start, token) for start, token in tokens[1:]):
        return None
    start, token = tokens[-len(values) - 1]
    expected = _next_stop(start + len(token) + (1 if token.upper() == SELF_WORD else 0), offset)
    fields: list[str] = []
    for start, token in tokens[-len(values) :]:
        gap = start - expected
        if gap < 0 or gap % 8:
            return None
        fields += [""] * (gap // 8) + [token]
        expected = _next_stop(start + len(token), offset)
    return fields


def _next_stop(column: int, offset: int) -> int:
    """Where a tab typed at ``column`` moves to (tab stops every 8 columns from ``offset``)."""
    return column + 8 - (column - offset) % 8


def text_facts(text: str, source: str) -> tuple[dict[str, Any] | None, bool]:
    """``(the first line that shows a virtual machine: {source, line, text (its first 60
    characters)}, whether the old legend defines SOC as between CPU sockets)`` from the whole paste."""
    vm_line = None
    for pattern in _VM_LINE_RES:
        match = pattern.search(text)
        if match:
            line_no = text.count("\n", 0, match.start()) + 1
            shown = " ".join(match.group(0).split())
            vm_line = {"source": source, "line": line_no, "text": shown[:60]}
            break
    return vm_line, _SOC_LEGEND_RE.search(text) is not None


@functools.lru_cache(maxsize=4096)  # a 576-column matrix has 331,776 cells and a handful of words
def is_cell_word(word: str) -> bool:
    upper = word.upper()
    return upper == SELF_WORD or upper in LINK_WORDS or upper in P2P_WORDS or bool(NV_RE.match(upper))


def is_row_token(token: str) -> bool:
    """A token that can stand in a matrix row after its label (a wrapped row's rest has only these)."""
    merged = _MERGED_CELL_RE.match(token)
    return (is_cell_word(token) or bool(ATTRIBUTE_VALUE_RE.match(token)) or split_run_together(token) is not None
            or merged is not None and any(word.startswith(merged.group(1).upper()) for word in LINK_WORDS))


@dataclass
class RowCells:
    """One matrix row split into its device cells and attribute cells, with what was repaired."""

    cells: list[str] = field(default_factory=list)
    attributes: list[str] = field(default_factory=list)
    unreadable: dict[int, str] = field(default_factory=dict)  # device position -> the token there
    run_together: list[str] = field(default_factory=list)  # tokens split by the vocabulary
    merged: str | None = None  # the last device cell run into the CPU Affinity (PH0-115)
    unplaced: bool = False  # attribute values that stand under no title: read as unknown
    placed: bool = False  # attribute values placed by column


def _tab_fields(line: str) -> list[str] | None:
    """The fields of a raw, tab-separated row (empty ones kept), or None for a re-spaced copy."""
    if "\t" not in line:
        return None
    parts = [part.strip() for part in line.strip().split("\t")]
    if len(" ".join(parts).split()) != len(parts) - parts.count(""):  # a part with a space inside
        return None
    return parts


def split_row(line: str, device_count: int, titles: list[str], columns: list[int] | None) -> RowCells:
    """Split a row (its label first) into ``device_count`` device cells and the attribute cells.

    The attribute cells are the trailing values (CPU lists, node numbers, N/A); the cells before
    them are link words, split where two ran together. A token that is no word leaves its cell
    unreadable (and, when the count no longer adds up, every cell after it)."""
    tab_fields = _tab_fields(line)
    body = (tab_fields if tab_fields is not None else line.split())[1:]
    k = len(body)
    while k > 0 and (ATTRIBUTE_VALUE_RE.match(body[k - 1]) or (tab_fields is not None and body[k - 1] == "")):
        k -= 1
    attribute_fields = body[k:]
    row = RowCells()
    device_fields = [f for f in body[:k] if f]
    bad: list[int] = []
    if all(map(is_cell_word, device_fields)):  # (the usual row: every token a word, nothing to repair)
        row.cells, device_fields = list(device_fields), []
    for position, token in enumerate(device_fields):
        words = None if is_cell_word(token) else split_run_together(token)
        merged = _MERGED_CELL_RE.match(token) if words is None and not is_cell_word(token) else None
        if is_cell_word(token):
            row.cells.append(token)
        elif words:
            row.cells.extend(words)
            row.run_together.append(token)
        elif merged and position == len(device_fields) - 1 and titles and any(
                word.startswith(merged.group(1).upper()) for word in LINK_WORDS | {"NV"}):
            row.cells.append(UNNAMED_PREFIX + merged.group(1).upper())
            row.merged = token
            attribute_fields.insert(0, merged.group(2))
        else:
            bad.append(len(row.cells))
            row.cells.append(token)
    cut = bool(bad) and bad[-1] == len(row.cells) - 1 and not attribute_fields and len(row.cells) < device_count
    if bad and not cut:  # (a row cut in its last word is cut short, said as such by the caller)
        if len(row.cells) == device_count:
            row.unreadable = {p: row.cells[p] for p in bad}
        else:  # the bad token may stand for any number of cells: nothing after it is placed
            first = bad[0]
            raw = row.cells[first]
            row.cells = row.cells[:first] + [raw] * max(0, device_count - first)
            row.unreadable = {p: raw for p in range(first, device_count)}
    row.attributes = _attribute_cells(line, attribute_fields, tab_fields is not None, titles, columns, row)
    return row


def _attribute_cells(line: str, values: list[str], tabs: bool, titles: list[str], columns: list[int] | None,
                     row: RowCells) -> list[str]:
    if tabs:
        # nvidia-smi writes an extra empty cell before GPU NUMA ID (0\t\tN/A): dropped here.
        gpu_numa_last = bool(titles) and titles[-1].lower() == "gpu numa id"
        if gpu_numa_last and len(values) == len(titles) + 1 and values[-2] == "":
            del values[-2]
        return values
    if not values or len(values) >= len(titles):
        return values
    fields = tab_stop_fields(line, values)
    if fields is not None:  # raw output whose tabs became spaces: empty cells are empty tab stops
        return _attribute_cells(line, fields, True, titles, columns, row)
    placed = place_by_column(line, values, columns) if columns else None
    if placed is None:
        row.unplaced = True
        return []
    row.placed = True
    return placed


def paste_notes(text: str, soc: bool, source: str) -> list[ReadingNote]:
    """What the paste shows beyond the matrix, for ``gputopo.analysis.place.locality``: a line that shows a
    virtual machine; the old word SOC (``soc``: the matrix uses it), which nvidia-smi's legend
    defined as between CPU sockets."""
    notes = []
    vm_line, _ = text_facts(text, source)
    if vm_line:
        notes.append(ReadingNote(VM_EVIDENCE, vm_line))
    if soc:
        notes.append(ReadingNote(SOC_BETWEEN_SOCKETS))
    return notes
