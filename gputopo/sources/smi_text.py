"""``nvidia-smi topo -m`` (and ``topo -p2p``) text, as people paste it, -> Topology.

Users without gputopo on the machine (or helping someone else) have this text: in issues, chats,
blog posts. It arrives tab-separated (raw), with spaces (web copies), surrounded by shell prompts
and legends, from nvidia-smi versions that say ``SOC`` instead of ``SYS``, with NIC columns named
``mlx5_N`` or ``NICn`` plus a ``NIC Legend:`` block, and with or without the ``CPU Affinity``,
``NUMA Affinity`` and ``GPU NUMA ID`` columns. The parser finds the matrix wherever it is and
reads what it says; it refuses (``InputError``, one line) only what is not such a matrix at all or
is cut short, because a half matrix would silently give wrong recommendations.

Cells never contain spaces (``X``, ``NV2``, ``0-11,24-35``, ``N/A``), so rows are split on any
whitespace; only the header needs care, because its attribute titles contain spaces.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.errors import InputError
from gputopo.model import (
    P2P_OK,
    PCIE_PATHS,
    Finding,
    Gpu,
    Link,
    Nic,
    NicLink,
    Topology,
    make_link,
    nvlink_count_of,
)
from gputopo.notation import format_cpu_list, parse_cpu_list

# Header titles after the device columns, longest first so "GPU NUMA ID" is not read as a GPU.
ATTRIBUTE_TITLES = ("GPU NUMA ID", "CPU Affinity", "NUMA Affinity")
_TITLE_PATTERN = "|".join(r"\s+".join(map(re.escape, t.split())) for t in ATTRIBUTE_TITLES)
_ATTRIBUTE_RE = re.compile(_TITLE_PATTERN, re.IGNORECASE)
_HEADER_CELL_RE = re.compile(_TITLE_PATTERN + r"|\S+", re.IGNORECASE)

# nvidia-smi underlines the header with ANSI escapes (ESC[4m ... ESC[0m), also when its output is
# redirected to a file; captures saved that way keep them.
_ANSI_ESCAPE_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_GPU_RE = re.compile(r"^GPU(\d+)$")
_NV_RE = re.compile(r"^NV(\d+)$")
_NIC_LEGEND_RE = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")
# `nvidia-smi topo -p2p r` (also --p2p, -p2p=r); the letter says which capability the matrix shows.
_P2P_COMMAND_RE = re.compile(r"(?:-p2p|--p2p(?:status)?)[=\s]+([rwnap])\b", re.IGNORECASE)
_P2P_FIELDS = {"r": "p2p_read", "w": "p2p_write", "a": "p2p_atomics", "n": "p2p_nvlink"}
_P2P_CAPABILITY_NAMES = {"r": "read", "w": "write", "a": "atomics", "n": "NVLink", "p": "PCIe"}

LINK_WORDS = set(PCIE_PATHS) | {"SOC"}
P2P_WORDS = {"OK", "CNS", "GNS", "TNS", "DR", "NS", "U"}
SELF_WORD = "X"

# Worse (slower) first: used to keep the worse word where a matrix disagrees with itself.
_PCIE_RANK = {word: rank for rank, word in enumerate(reversed(PCIE_PATHS))}  # SYS 0 ... PIX 4
_P2P_RANK = {"DR": 0, "CNS": 0, "GNS": 0, "TNS": 0, "NS": 0, "U": 1, "OK": 2}


@dataclass
class _Matrix:
    """One matrix block as found in the text, before it becomes model objects."""

    header_line_no: int  # 1-based, for error messages
    columns: list[str]  # device columns in header order (GPU0, ..., mlx5_0 / NIC0)
    attributes: list[str]  # attribute titles after them
    rows: dict[str, list[str]] = field(default_factory=dict)  # row label -> device cells
    row_attributes: dict[str, list[str]] = field(default_factory=dict)  # row label -> attribute cells
    row_line_no: dict[str, int] = field(default_factory=dict)
    kind: str = "topo"  # "topo" (link words) or "p2p" (status words)
    p2p_capability: str | None = None  # r/w/a/n/p, from the command line before it

    @property
    def gpu_columns(self) -> list[str]:
        return [c for c in self.columns if _GPU_RE.match(c)]


def link_word_rank(word: str) -> int:
    """Order link words by expected speed: SYS lowest, then NODE, PHB, PXB, PIX, then NV1, NV2..."""
    nv = _NV_RE.match(word)
    if nv:
        return 100 + int(nv.group(1))
    return _PCIE_RANK.get(word, -1)


def parse_topo_matrix(text: str, source: str) -> Topology:
    """Read ``nvidia-smi topo -m`` text (plus any ``topo -p2p`` matrices in the same text).

    Raises ``InputError`` with one line saying what was expected and what was found when the text
    holds no such matrix, is binary, or is cut short.
    """
    text = _ANSI_ESCAPE_RE.sub("", text)
    _refuse_non_text(text, source)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    matrices = _find_matrices(lines, source)
    topo_matrices = [m for m in matrices if m.kind == "topo"]
    if not topo_matrices:
        if matrices:
            raise InputError(
                f"{source}: found only a `nvidia-smi topo -p2p` matrix; expected the link matrix of "
                "`nvidia-smi topo -m` as well (paste both)"
            )
        raise InputError(
            f"{source}: expected `nvidia-smi topo -m` output (a header line of GPU0 GPU1 ... columns), "
            f"found {_describe(lines)}"
        )
    findings: list[Finding] = []
    if len(topo_matrices) > 1:
        findings.append(
            Finding(
                "info",
                "several-topo-matrices",
                f"{source} holds {len(topo_matrices)} `nvidia-smi topo -m` matrices; the first "
                f"(line {topo_matrices[0].header_line_no}) is used",
            )
        )
    topology = _build_topology(topo_matrices[0], source, findings)
    nic_legend = _nic_legend(lines)
    for nic in topology.nics:
        if nic.name in nic_legend:
            nic.device = nic_legend[nic.name]
    for matrix in matrices:
        if matrix.kind == "p2p":
            _merge_p2p(topology, matrix, source, findings)
    for finding in findings:
        topology.add_finding(finding)
    return topology


# --- finding the matrices ------------------------------------------------------------------------


def _refuse_non_text(text: str, source: str) -> None:
    if "\x00" in text:
        raise InputError(f"{source} is binary, not `nvidia-smi topo -m` text")
    sample = text[:4096]
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if sample and control / len(sample) > 0.05:
        raise InputError(f"{source} looks binary ({control} control characters in its first {len(sample)}), not text")


def _describe(lines: list[str]) -> str:
    """A short description of what the text starts with, for error messages."""
    first = next((line.strip() for line in lines if line.strip()), "")
    if not first:
        return "only blank lines"
    if len(first) > 60:
        first = first[:57] + "..."
    return f"{sum(1 for line in lines if line.strip())} non-blank lines starting with {first!r}"


def _split_header(line: str) -> tuple[list[str], list[str]] | None:
    """``(device columns, attribute titles)`` if ``line`` is a matrix header, else ``None``.

    A header is GPU0 (and maybe more GPUn) first, then other device columns (NICs), then the
    attribute titles, which contain spaces and are matched as phrases.
    """
    stripped = line.strip()
    if not stripped.startswith("GPU0"):
        return None
    match = _ATTRIBUTE_RE.search(stripped)
    device_part = stripped[: match.start()] if match else stripped
    attributes: list[str] = []
    if match:
        rest = stripped[match.start() :]
        for title_match in _HEADER_CELL_RE.finditer(rest):
            attributes.append(" ".join(title_match.group(0).split()))
    columns = device_part.split()
    if any(c.upper() in LINK_WORDS or c.upper() in P2P_WORDS or c == SELF_WORD or _NV_RE.match(c) for c in columns):
        return None  # a matrix row (GPU0  X  NV1 ...) whose header was not pasted
    gpu_numbers = [int(m.group(1)) for m in (_GPU_RE.match(c) for c in columns) if m]
    if not gpu_numbers or gpu_numbers != list(range(len(gpu_numbers))):
        return None
    return columns, attributes


def _find_matrices(lines: list[str], source: str) -> list[_Matrix]:
    matrices: list[_Matrix] = []
    i = 0
    while i < len(lines):
        header = _split_header(lines[i])
        if header is None:
            i += 1
            continue
        columns, attributes = header
        matrix = _Matrix(header_line_no=i + 1, columns=columns, attributes=attributes)
        matrix.p2p_capability = _p2p_capability_before(lines, i)
        i = _read_rows(lines, i + 1, matrix, source)
        matrices.append(matrix)
    return matrices


def _p2p_capability_before(lines: list[str], header_index: int) -> str | None:
    """The capability letter of a ``topo -p2p X`` command on one of the few lines above a header."""
    for back in range(header_index - 1, max(-1, header_index - 4), -1):
        match = _P2P_COMMAND_RE.search(lines[back])
        if match:
            return match.group(1).lower()
        if _split_header(lines[back]) is not None:
            break
    return None


def _read_rows(lines: list[str], start: int, matrix: _Matrix, source: str) -> int:
    """Read the rows below a header into ``matrix``; return the index of the first line after them."""
    labels = set(matrix.columns)
    n = len(matrix.columns)
    i = start
    while i < len(lines):
        tokens = lines[i].split()
        if not tokens or tokens[0] not in labels:
            break
        label = tokens[0]
        if label in matrix.rows:
            break  # a second matrix with the same devices starts without its own header
        cells = tokens[1 : 1 + n]
        attribute_cells = _tab_attribute_cells(lines[i], n, matrix.attributes)
        matrix.rows[label] = cells
        matrix.row_attributes[label] = tokens[1 + n :] if attribute_cells is None else attribute_cells
        matrix.row_line_no[label] = i + 1
        i += 1
    words = {cell.upper() for cells in matrix.rows.values() for cell in cells if cell.upper() != SELF_WORD}
    if words and words <= P2P_WORDS:
        matrix.kind = "p2p"
    return i


def _tab_attribute_cells(line: str, device_count: int, titles: list[str]) -> list[str] | None:
    """The attribute cells of a raw, tab-separated row, empty ones kept (``None`` if not such a row).

    nvidia-smi leaves a cell empty where it knows no value (CPU Affinity on some hosts: ``\t\t0``);
    splitting on any whitespace would shift the NUMA node into the CPU Affinity column. It also
    writes an extra empty cell before GPU NUMA ID (``0\t\tN/A``), which is dropped here.
    """
    if "\t" not in line:
        return None
    parts = [part.strip() for part in line.strip().split("\t")]
    devices = parts[1 : 1 + device_count]
    if len(devices) != device_count or any(not cell or len(cell.split()) != 1 for cell in devices):
        return None  # not cleanly tab-separated (a hand-edited or re-spaced copy)
    cells = parts[1 + device_count :]
    if any(len(cell.split()) > 1 for cell in cells):
        return None
    gpu_numa_last = bool(titles) and titles[-1].lower() == "gpu numa id"
    if gpu_numa_last and len(cells) == len(titles) + 1 and cells[-2] == "":
        del cells[-2]
    return cells


def _nic_legend(lines: list[str]) -> dict[str, str]:
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


# --- building the topology -----------------------------------------------------------------------


def _cell_word(matrix: _Matrix, row: str, column: str, source: str) -> str:
    """The normalised link word at (row, column); raises on a missing or unknown word."""
    cells = matrix.rows[row]
    position = matrix.columns.index(column)
    line_no = matrix.row_line_no[row]
    if position >= len(cells):
        raise InputError(
            f"{source} line {line_no}: row {row} is cut short: expected {len(matrix.columns)} cells "
            f"({', '.join(matrix.columns)}), found {len(cells)}"
        )
    word = cells[position].upper()
    if word == "SOC":  # nvidia-smi before 2017 (r384) said SOC for what is now SYS
        word = "SYS"
    if word == SELF_WORD or word in LINK_WORDS or _NV_RE.match(word):
        return word
    raise InputError(
        f"{source} line {line_no}: unknown link word {cells[position]!r} between {row} and {column} "
        "(expected X, NV#, PIX, PXB, PHB, NODE, SYS or SOC)"
    )


def _symmetric_word(
    matrix: _Matrix, a: str, b: str, source: str, findings: list[Finding], gpus: list[int]
) -> str:
    """The word for the pair (a, b), checking (b, a) where that row exists; keep the worse one."""
    forward = _cell_word(matrix, a, b, source)
    if b not in matrix.rows:
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
    findings.append(
        Finding(
            "warning",
            "asymmetric-matrix",
            f"the matrix disagrees with itself: {a}->{b} is {forward} but {b}->{a} is {backward}; "
            f"using the worse, {worse}",
            gpus=gpus,
            fix="capture `nvidia-smi topo -m` again; a real matrix is symmetric",
        )
    )
    return worse


def _numa_node(value: str | None, source: str, line_no: int) -> int | None:
    if value is None or value.upper() in ("N/A", "-"):
        return None
    if value.isdigit():
        return int(value)
    try:
        nodes = parse_cpu_list(value) if re.fullmatch(r"[\d,\-]+", value) else None
    except ValueError:
        nodes = None
    if nodes and len(nodes) == 1:
        return nodes[0]
    if nodes:
        return None  # affine to several NUMA nodes: no single node to report
    raise InputError(f"{source} line {line_no}: NUMA Affinity {value!r} is not a node number or N/A")


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


def _build_topology(matrix: _Matrix, source: str, findings: list[Finding]) -> Topology:
    gpu_columns = matrix.gpu_columns
    nic_columns = [c for c in matrix.columns if c not in gpu_columns]
    missing = [c for c in gpu_columns if c not in matrix.rows]
    if missing:
        found = [c for c in gpu_columns if c in matrix.rows]
        raise InputError(
            f"{source}: the matrix is cut short: its header (line {matrix.header_line_no}) lists "
            f"{len(gpu_columns)} GPUs but rows were found only for {', '.join(found) or 'none'} "
            f"(missing {', '.join(missing)})"
        )
    for column in gpu_columns:
        cells = matrix.rows[column]
        if len(cells) < len(matrix.columns):
            raise InputError(
                f"{source} line {matrix.row_line_no[column]}: row {column} is cut short: expected "
                f"{len(matrix.columns)} cells ({', '.join(matrix.columns)}), found {len(cells)}"
            )
    index_of = {c: int(_GPU_RE.match(c).group(1)) for c in gpu_columns}  # type: ignore[union-attr]

    gpus: list[Gpu] = []
    for column in gpu_columns:
        line_no = matrix.row_line_no[column]
        gpus.append(
            Gpu(
                index=index_of[column],
                numa_node=_numa_node(_attribute(matrix, column, "NUMA Affinity"), source, line_no),
                cpu_affinity=_cpu_affinity(_attribute(matrix, column, "CPU Affinity"), source, line_no),
            )
        )

    links: list[Link] = []
    for pos, a in enumerate(gpu_columns):
        if _cell_word(matrix, a, a, source) != SELF_WORD:
            raise InputError(f"{source} line {matrix.row_line_no[a]}: expected X on the diagonal for {a}")
        for b in gpu_columns[pos + 1 :]:
            pair = sorted((index_of[a], index_of[b]))
            word = _symmetric_word(matrix, a, b, source, findings, pair)
            if word == SELF_WORD:
                raise InputError(f"{source} line {matrix.row_line_no[a]}: {a} and {b} are different GPUs but marked X")
            links.append(
                make_link(
                    index_of[a],
                    index_of[b],
                    word,
                    nvlink_count=nvlink_count_of(word),
                    pcie_path=None if _NV_RE.match(word) else word,
                )
            )

    nics: list[Nic] = []
    nic_links: list[NicLink] = []
    absent_nic_rows = [c for c in nic_columns if c not in matrix.rows]
    for nic in nic_columns:
        numa_value = _attribute(matrix, nic, "NUMA Affinity") if nic in matrix.rows else None
        cpu_value = _attribute(matrix, nic, "CPU Affinity") if nic in matrix.rows else None
        line_no = matrix.row_line_no.get(nic, matrix.header_line_no)
        nics.append(
            Nic(
                name=nic,
                numa_node=_numa_node(numa_value, source, line_no),
                cpu_affinity=_cpu_affinity(cpu_value, source, line_no),
            )
        )
        for gpu_column in gpu_columns:
            word = _symmetric_word(matrix, gpu_column, nic, source, findings, [index_of[gpu_column]])
            if word == SELF_WORD:
                raise InputError(
                    f"{source} line {matrix.row_line_no[gpu_column]}: {gpu_column} and {nic} are marked X (self)"
                )
            nic_links.append(NicLink(gpu=index_of[gpu_column], nic=nic, type=word))
    if absent_nic_rows:
        findings.append(
            Finding(
                "info",
                "nic-rows-missing",
                f"the text has no rows for {', '.join(absent_nic_rows)} (cut short?); "
                "their paths were read from the GPU rows",
            )
        )

    return Topology(
        gpus=gpus,
        links=links,
        nics=nics,
        nic_links=nic_links,
        source="nvidia-smi",
        source_detail=source,
        label=f"nvidia-smi topo -m text from {source}",
    )


def _merge_p2p(topology: Topology, matrix: _Matrix, source: str, findings: list[Finding]) -> None:
    """Fill the links' P2P fields from a ``topo -p2p`` matrix (which capability: the command line)."""
    capability = matrix.p2p_capability
    if capability is None:
        capability = "r"
        findings.append(
            Finding(
                "info",
                "p2p-capability-assumed",
                f"the `nvidia-smi topo -p2p` matrix at line {matrix.header_line_no} has no command line "
                "above it saying which capability it shows; it was read as P2P read",
                fix="paste the command line (`nvidia-smi topo -p2p r`, `w`, `a` or `n`) with its output",
            )
        )
    attribute = _P2P_FIELDS.get(capability)
    if attribute is None:  # `p` (PCIe/prop): no field in the model
        return
    known = set(topology.gpu_indices)
    gpu_columns = [c for c in matrix.gpu_columns if c in matrix.rows]
    index_of = {c: int(_GPU_RE.match(c).group(1)) for c in gpu_columns}  # type: ignore[union-attr]
    links = topology.link_map()
    for pos, a in enumerate(gpu_columns):
        for b in gpu_columns[pos + 1 :]:
            ia, ib = index_of[a], index_of[b]
            if ia not in known or ib not in known:
                continue
            words = []
            for row, column in ((a, b), (b, a)):
                cells = matrix.rows[row]
                position = matrix.columns.index(column)
                if position < len(cells) and cells[position].upper() in P2P_WORDS:
                    words.append(cells[position].upper())
            if not words:
                continue
            worse = min(words, key=lambda w: _P2P_RANK[w])
            if len(set(words)) > 1:
                findings.append(
                    Finding(
                        "warning",
                        "asymmetric-p2p-matrix",
                        f"P2P {_P2P_CAPABILITY_NAMES[capability]} is {words[0]} for {a}->{b} but "
                        f"{words[1]} for {b}->{a}; using {worse}",
                        gpus=[ia, ib],
                    )
                )
            setattr(links[(ia, ib)], attribute, P2P_OK if worse == "OK" else worse)
