"""``nvidia-smi topo -m`` (and ``topo -p2p``) text, as people paste it, -> Topology.

Users without gputopo on the machine (or helping someone else) have this text: in issues, chats,
blog posts. It arrives tab-separated (raw), with spaces (web copies), surrounded by shell prompts
and legends, from nvidia-smi versions that say ``SOC`` instead of ``SYS``, with NIC columns named
``mlx5_N`` or ``NICn`` plus a ``NIC Legend:`` block, and with or without the ``CPU Affinity``,
``NUMA Affinity`` and ``GPU NUMA ID`` columns. The parser finds the matrix wherever it is and
reads what it says; it refuses (``InputError``, one line) only what is not such a matrix at all. A
paste cut after some GPU rows is read for what its rows say, the rest unknown and said
(``smi_text_rows``): refusing it would throw away nearly all of a matrix an expert reads.

Cells never contain spaces (``X``, ``NV2``, ``0-11,24-35``, ``N/A``), so rows are split on any
whitespace; only the header needs care, because its attribute titles contain spaces.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

from gputopo.errors import InputError
from gputopo.model import (
    MAX_NVLINKS_PER_PAIR,
    P2P_OK,
    PCIE_PATHS,
    Gpu,
    Nic,
    NicLink,
    ReadingNote,
    Topology,
    is_known_link_type,
)
from gputopo.notation import ascii_int, format_cpu_list, parse_cpu_list
from gputopo.sources.smi.smi_text_links import gpu_links
from gputopo.sources.smi.smi_text_matrix import (
    GPU_RE,
    LINK_WORDS,
    NV_RE,
    P2P_WORDS,
    SELF_WORD,
    UNNAMED_PREFIX,
    _Matrix,
    describe,
    find_matrices,
    nic_legend,
    strip_escapes,
)
from gputopo.sources.smi.smi_text_nvswitch import infer_nvswitch
from gputopo.sources.smi.smi_text_paste import paste_notes, strip_line_prefix, unpipe_table
from gputopo.sources.smi.smi_text_rows import links_with_rowless, rowless_gpus

_P2P_FIELDS = {"r": "p2p_read", "w": "p2p_write", "a": "p2p_atomics", "n": "p2p_nvlink"}

# Worse (slower) first: used to keep the worse word where a matrix disagrees with itself.
_PCIE_RANK = {word: rank for rank, word in enumerate(reversed(PCIE_PATHS))}  # SYS 0 ... PIX 4
_P2P_RANK = {"DR": 0, "CNS": 0, "GNS": 0, "TNS": 0, "NS": 0, "U": 1, "OK": 2}


def link_word_rank(word: str) -> int:
    """Order link words by expected speed: SYS lowest, then NODE, PHB, PXB, PIX, then NV1, NV2..."""
    nv = NV_RE.match(word)
    if nv:
        return 100 + int(nv.group(1))
    return _PCIE_RANK.get(word, -1)


def parse_topo_matrix(text: str, source: str) -> Topology:
    """Read ``nvidia-smi topo -m`` text (plus any ``topo -p2p`` matrices in the same text).

    Raises ``InputError`` with one line saying what was expected and what was found when the text
    holds no such matrix, is binary, or is cut short.
    """
    text, bare_escapes = strip_escapes(text)
    _refuse_non_text(text, source)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    lines, piped = unpipe_table(lines)
    lines, prefix = strip_line_prefix(lines)
    matrices = find_matrices(lines)
    topo_matrices = [m for m in matrices if m.kind == "topo"]
    if not topo_matrices:
        if matrices:
            raise InputError(
                f"{source}: found only a `nvidia-smi topo -p2p` matrix; expected the link matrix of "
                "`nvidia-smi topo -m` as well (paste both)"
            )
        raise InputError(
            f"{source}: expected `nvidia-smi topo -m` output (a header line of GPU0 GPU1 ... columns), "
            f"found {describe(lines)}"
        )
    notes: list[ReadingNote] = []
    if len(topo_matrices) > 1:
        notes.append(ReadingNote("several-topo-matrices", {"source": source, "matrices": len(topo_matrices),
                                                           "line": topo_matrices[0].header_line_no}))
    _find_rows_apart(topo_matrices[0], matrices, lines)
    topology = _build_topology(topo_matrices[0], source, notes)
    repairs = [{"repair": "line-prefix", "prefix": prefix[:40]}] if prefix else []
    repairs += [{"repair": "markdown-table"}] if piped else []
    repairs += list({json.dumps(r, sort_keys=True): r for r in topo_matrices[0].repairs}.values())  # each once
    if bare_escapes:
        repairs.append({"repair": "bare-escapes"})
    legend = nic_legend(lines)
    for nic in topology.nics:
        if nic.name in legend:
            nic.device = legend[nic.name]
    for matrix in matrices:
        if matrix.kind == "p2p":
            _merge_p2p(topology, matrix, source, notes)
    if repairs:
        notes.insert(0, ReadingNote("repaired-paste", {"source": source, "repairs": repairs}))
    matrix = topo_matrices[0]
    soc = any(c.upper() == "SOC" for label in matrix.gpu_columns for c in matrix.rows.get(label, []))
    notes += paste_notes(text, soc, source)
    if topo_matrices[0].pcie_only:
        notes.append(ReadingNote("pcie-only-matrix"))
    else:
        infer_nvswitch(topology)
    topology.reading_notes.extend(notes)
    return topology


# --- reading the text -------------------------------------------------------------------------


def _refuse_non_text(text: str, source: str) -> None:
    if "\x00" in text:
        raise InputError(f"{source} is binary, not `nvidia-smi topo -m` text")
    sample = text[:4096]
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if sample and control / len(sample) > 0.05:
        raise InputError(f"{source} looks binary ({control} control characters in its first {len(sample)}), not text")


# --- building the topology -----------------------------------------------------------------------


_WORDS_SEEN: dict[str, str] = {}  # cell text -> its valid link word


def _cell_word(matrix: _Matrix, row: str, column: str, source: str) -> str:
    """The normalised link word at (row, column); raises on a missing or unknown word."""
    cells = matrix.rows[row]
    position = matrix.position(column)
    line_no = matrix.row_line_no[row]
    if position >= len(cells):
        raise InputError(
            f"{source} line {line_no}: row {row} is cut short: expected {len(matrix.columns)} cells "
            f"({', '.join(matrix.columns)}), found {len(cells)}"
        )
    cell = cells[position]
    known = _WORDS_SEEN.get(cell)
    if known is not None:  # a 576-column matrix has 331,776 cells and a handful of words
        return known
    word = cell.upper()
    if word == "SOC":  # nvidia-smi before 2017 (r384) said SOC for what is now SYS
        word = "SYS"
    nv = NV_RE.match(word)
    if nv and not is_known_link_type(word):  # the snapshot loader refuses it too: one rule, model.words
        raise InputError(
            f"{source} line {line_no}: {cells[position]!r} between {row} and {column} is not a count of "
            f"NVLinks a pair of GPUs can have (NV1 to NV{MAX_NVLINKS_PER_PAIR})"
        )
    if word == SELF_WORD or word in LINK_WORDS or nv:
        if len(_WORDS_SEEN) < 1024:
            _WORDS_SEEN[cell] = word
        return word
    raise InputError(
        f"{source} line {line_no}: unknown link word {cells[position]!r} between {row} and {column} "
        "(expected X, NV#, PIX, PXB, PHB, NODE, SYS or SOC)"
    )


def _symmetric_word(
    matrix: _Matrix, a: str, b: str, source: str, notes: list[ReadingNote], gpus: list[int]
) -> str:
    """The word for the pair (a, b), checking (b, a) where that row exists; keep the worse one. A
    cell that could not be read (``_Matrix.unreadable``) takes the word of its mirror cell."""
    if b in matrix.rows and (a, b) in matrix.unreadable and (b, a) not in matrix.unreadable:
        word = _cell_word(matrix, b, a, source)
        matrix.repairs.append({"repair": "cell-from-mirror", "row": a, "column": b, "cell": matrix.unreadable[(a, b)]})
        return word
    forward = _cell_word(matrix, a, b, source)
    if b not in matrix.rows or (b, a) in matrix.unreadable:
        return forward
    backward = _cell_word(matrix, b, a, source)
    if forward == SELF_WORD or backward == SELF_WORD:
        if forward != backward:
            raise InputError(
                f"{source} line {matrix.row_line_no[a]}: {a} and {b} are marked X (self) on one side only"
            )
        return forward
    if forward == backward:
        return forward
    worse = forward if link_word_rank(forward) <= link_word_rank(backward) else backward
    notes.append(ReadingNote("asymmetric-matrix", {"from": a, "to": b, "forward": forward, "backward": backward,
                                                   "kept": worse}, gpus))
    return worse


def _numa_affinity(value: str | None, source: str, line_no: int) -> tuple[int | None, str | None]:
    """``(the one node, the whole set as a node list)``: ``"0"`` -> (0, "0"); Grace's
    ``"0,3-9,11-17"`` -> (None, "0,3-9,11-17"); ``N/A`` -> (None, None)."""
    if value is None or value.upper() in ("N/A", "-"):
        return None, None
    try:
        nodes = parse_cpu_list(value) if re.fullmatch(r"[\d,\-]+", value) else None
    except ValueError:
        nodes = None
    if not nodes:
        raise InputError(f"{source} line {line_no}: NUMA Affinity {value!r} is not a node number, a node list or N/A")
    return (nodes[0] if len(nodes) == 1 else None), format_cpu_list(nodes)


def _gpu_numa_id(value: str | None) -> int | None:
    """The GPU's own memory as a NUMA node (Grace systems); None for N/A or anything else."""
    return ascii_int(value, 6) if value is not None else None


def _cpu_affinity(value: str | None, source: str, line_no: int) -> str | None:
    if value is None:
        return None
    try:
        cpus = parse_cpu_list(value)
    except ValueError:
        raise InputError(f"{source} line {line_no}: CPU Affinity {value!r} is not a CPU list like 0-11,24-35") from None
    return format_cpu_list(cpus) if cpus else None


def _attribute(matrix: _Matrix, row: str, title: str) -> str | None:
    titles = [t.lower() for t in matrix.attributes]
    values = matrix.row_attributes.get(row, [])
    if title.lower() not in titles:
        return None
    position = titles.index(title.lower())
    return values[position] or None if position < len(values) else None


def _find_rows_apart(matrix: _Matrix, matrices: list[_Matrix], lines: list[str]) -> None:
    """Where a GPU row the matrix lacks stands further down, apart from it (after a pager's prompt
    or a long gap) and in no other matrix: that row is there, so the paste is not cut there."""
    missing = {c for c in matrix.gpu_columns if c not in matrix.rows}
    if not missing:
        return
    taken = {no for other in matrices for no in other.row_line_no.values()}
    last = max(matrix.row_line_no.values(), default=matrix.header_line_no)
    matrix.rows_apart_line = next((i + 1 for i in range(last, len(lines))
                                   if (words := lines[i].split()) and words[0] in missing and i + 1 not in taken), None)


def _build_topology(matrix: _Matrix, source: str, notes: list[ReadingNote]) -> Topology:
    gpu_columns = matrix.gpu_columns
    rowless = set(rowless_gpus(matrix, source))
    if any(NV_RE.match(cell.upper()) for cell in set(itertools.chain.from_iterable(matrix.rows.get(label, ()) for label in gpu_columns))):
        matrix.pcie_only = False  # NVLink words: whatever the command line above says, this is `topo -m`
    _resolve_merged_cells(matrix, source, matrix.repairs)
    index_of = {c: int(GPU_RE.match(c).group(1)) for c in gpu_columns}  # type: ignore[union-attr]
    gpus = [Gpu(index=index_of[column]) if column in rowless else _read_gpu(matrix, column, index_of[column], source)
            for column in gpu_columns]

    def careful(a: str, b: str) -> str:
        return _careful_word(matrix, a, b, source, notes, index_of)

    links = links_with_rowless(matrix, index_of, rowless, careful) if rowless else gpu_links(matrix, index_of, careful)
    nics, nic_links = _read_nics(matrix, index_of, source, notes)
    return Topology(
        gpus=gpus,
        links=links,
        nics=nics,
        nic_links=nic_links,
        source="nvidia-smi",
        source_detail=source,
        label=f"nvidia-smi topo -m text from {source}",
    )


def _careful_word(matrix: _Matrix, a: str, b: str, source: str, notes: list[ReadingNote], index_of: dict[str, int]) -> str:
    """The word of the pair (a, b) where its cells need a closer look (``smi_text_links``): what
    ``_symmetric_word`` decides; for a == b, the diagonal's check."""
    if a == b:
        if _cell_word(matrix, a, a, source) != SELF_WORD:
            raise InputError(f"{source} line {matrix.row_line_no[a]}: expected X on the diagonal for {a}")
        return SELF_WORD
    word = _symmetric_word(matrix, a, b, source, notes, sorted((index_of[a], index_of[b])))
    if word == SELF_WORD:
        raise InputError(f"{source} line {matrix.row_line_no[a]}: {a} and {b} are different GPUs but marked X")
    return word


def _resolve_merged_cells(matrix: _Matrix, source: str, repairs: list[dict[str, Any]]) -> None:
    """Give each last device cell that ran into the CPU Affinity (``PH0-115``) its link word: the
    word in that device's own row, else the one word its letters can start; say what was read."""
    column = matrix.columns[-1]
    words = set()
    for label, merged in matrix.merged.items():
        letters = matrix.rows[label][-1][len(UNNAMED_PREFIX) :]
        other = matrix.rows.get(column, [])
        position = matrix.position(label)
        mirror = other[position].upper() if position < len(other) else ""
        candidates = [mirror] if mirror.startswith(letters) and mirror in LINK_WORDS else [
            w for w in sorted(LINK_WORDS) if w.startswith(letters)]
        if len(candidates) != 1:
            raise InputError(
                f"{source} line {matrix.row_line_no[label]}: the cell {merged!r} ran into the CPU Affinity "
                f"and its link word to {column} cannot be told"
            )
        matrix.rows[label][-1] = candidates[0]
        words.add(candidates[0])
    if matrix.merged:
        repairs.append({"repair": "cell-ran-into-affinity", "column": column, "rows": len(matrix.merged),
                        "example": next(iter(matrix.merged.values())), "words": sorted(words)})


def _read_gpu(matrix: _Matrix, column: str, index: int, source: str) -> Gpu:
    line_no = matrix.row_line_no[column]
    numa_node, numa_affinity = _numa_affinity(_attribute(matrix, column, "NUMA Affinity"), source, line_no)
    return Gpu(
        index=index,
        numa_node=numa_node,
        numa_affinity=numa_affinity,
        gpu_numa_id=_gpu_numa_id(_attribute(matrix, column, "GPU NUMA ID")),
        cpu_affinity=_cpu_affinity(_attribute(matrix, column, "CPU Affinity"), source, line_no),
    )


def _read_nics(
    matrix: _Matrix, index_of: dict[str, int], source: str, notes: list[ReadingNote]
) -> tuple[list[Nic], list[NicLink]]:
    gpu_columns = matrix.gpu_columns
    nic_columns = [c for c in matrix.columns if c not in gpu_columns and not c.startswith(UNNAMED_PREFIX)]
    nics: list[Nic] = []
    nic_links: list[NicLink] = []
    unreadable: list[list[str]] = []
    for nic in nic_columns:
        numa_value = _attribute(matrix, nic, "NUMA Affinity") if nic in matrix.rows else None
        cpu_value = _attribute(matrix, nic, "CPU Affinity") if nic in matrix.rows else None
        line_no = matrix.row_line_no.get(nic, matrix.header_line_no)
        nics.append(
            Nic(
                name=nic,
                numa_node=_numa_affinity(numa_value, source, line_no)[0],
                cpu_affinity=_cpu_affinity(cpu_value, source, line_no),
            )
        )
        for gpu_column in gpu_columns:
            if gpu_column not in matrix.rows:  # a row-less GPU: its path to this NIC is in the NIC's row, if any
                if nic in matrix.rows:
                    nic_links.append(NicLink(gpu=index_of[gpu_column], nic=nic,
                                             type=_symmetric_word(matrix, nic, gpu_column, source, notes, [])))
                continue
            if (gpu_column, nic) in matrix.unreadable and (nic not in matrix.rows or (nic, gpu_column) in matrix.unreadable):
                unreadable.append([gpu_column, nic, matrix.unreadable[(gpu_column, nic)]])
                continue  # a damaged NIC cell: the GPU's other paths are still read
            word = _symmetric_word(matrix, gpu_column, nic, source, notes, [index_of[gpu_column]])
            if word == SELF_WORD:
                raise InputError(
                    f"{source} line {matrix.row_line_no[gpu_column]}: {gpu_column} and {nic} are marked X (self)"
                )
            nic_links.append(NicLink(gpu=index_of[gpu_column], nic=nic, type=word))
    if unreadable:
        matrix.repairs.append({"repair": "nic-cells-left-out", "cells": unreadable})
    absent_nic_rows = [c for c in nic_columns if c not in matrix.rows]
    if absent_nic_rows:
        notes.append(ReadingNote("nic-rows-missing", {"nics": absent_nic_rows}))
    return nics, nic_links


def _merge_p2p(topology: Topology, matrix: _Matrix, source: str, notes: list[ReadingNote]) -> None:
    """Fill the links' P2P fields from a ``topo -p2p`` matrix (which capability: the command line)."""
    capability = matrix.p2p_capability
    if capability is None or len(capability) > 1:  # no command, or one asking for several (`-p2p rw`)
        facts = {"line": matrix.header_line_no, **({"asked": capability} if capability else {})}
        capability = "r"
        notes.append(ReadingNote("p2p-capability-assumed", facts))
    attribute = _P2P_FIELDS.get(capability)
    if attribute is None:  # `p` (PCIe/prop): no field in the model
        return
    known = set(topology.gpu_indices)
    gpu_columns = [c for c in matrix.gpu_columns if c in matrix.rows]
    index_of = {c: int(GPU_RE.match(c).group(1)) for c in gpu_columns}  # type: ignore[union-attr]
    links = topology.link_map()
    for pos, a in enumerate(gpu_columns):
        for b in gpu_columns[pos + 1 :]:
            ia, ib = index_of[a], index_of[b]
            if ia not in known or ib not in known:
                continue
            words = []
            for row, column in ((a, b), (b, a)):
                cells = matrix.rows[row]
                position = matrix.position(column)
                if position < len(cells) and cells[position].upper() in P2P_WORDS:
                    words.append(cells[position].upper())
            if not words:
                continue
            worse = min(words, key=lambda w: _P2P_RANK[w])
            if len(set(words)) > 1:
                notes.append(ReadingNote("asymmetric-p2p-matrix", {
                    "capability": capability, "from": a, "to": b, "forward": words[0], "backward": words[1],
                    "kept": worse}, [ia, ib]))
            setattr(links[(ia, ib)], attribute, P2P_OK if worse == "OK" else worse)


# --- recognising the kind ---------------------------------------------------------------------

_GPU_TOKEN_RE = re.compile(r"^GPU\d{1,4}$")


def sniff(text: str) -> bool:
    """Whether ``text`` holds a ``nvidia-smi topo -m`` (or ``topo -p2p``) matrix anywhere: a row
    that names a GPU and holds the self cell ``X``, whatever decoration precedes it. Linear."""
    for line in text.splitlines():
        tokens = line.split()
        if "X" in tokens and any(_GPU_TOKEN_RE.match(token) for token in tokens):
            return True
    return False
