"""What Slurm says it has of a node's GPUs: ``slurmd -G`` output and ``scontrol show node -d`` text.

``slurmd -G`` prints one line per GRES device as slurmd configured it (gres.conf merged with
AutoDetect's findings), e.g. (Slurm 22.05, the format of ``tests/system/test_slurm_gres.py``)::

    slurmd-node1: Gres Name=gpu Type=a100 Count=1 Index=0 ID=7696487 File=/dev/nvidia0 Cores=0-31 CoreCnt=64 Links=-1,0,0,0

``scontrol show node [-d] NODE`` gives per node ``NodeName=node1 ...`` then ``Gres=gpu:a100:8(S:0-1)``.
Read here as plain data (facts, no judgement: ``analysis/causes/slurm_check.py`` judges them against the
wiring). Lines of other kinds are skipped; every value is checked before it is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.notation import parse_cpu_list

_GRES_LINE = re.compile(r"^(?:slurmd(?:-(?P<node>[A-Za-z0-9._-]+))?:\s+)?(?:\w+:\s+)?Gres\s+(?P<fields>Name=\S+.*)$")
_NODE_LINE = re.compile(r"^NodeName=(?P<node>[A-Za-z0-9._-]+)\s")
_NODE_GRES = re.compile(r"^\s*Gres=(?P<gres>\S+)")
_DEVICE = re.compile(r"/dev/nvidia(\d{1,4})$")
MAX_LINES = 100_000


@dataclass
class SlurmGpu:
    """One GPU as ``slurmd -G`` lists it."""

    node: str | None
    index: int  # Slurm's device index (PCI bus order)
    type: str | None
    file: str | None
    minor: int | None  # N of /dev/nvidiaN, where File= is one
    cores: list[int] | None  # Slurm logical core indices; None: no Cores= (any core)
    links: list[int] | None  # None: no Links=
    line: int  # 1-based line in the text


@dataclass
class SlurmNodeGres:
    """A node's ``Gres=`` as ``scontrol show node`` prints it: (type or None, count) per entry."""

    node: str
    entries: list[tuple[str | None, int]]
    line: int


@dataclass
class SlurmGresText:
    gpus: list[SlurmGpu] = field(default_factory=list)
    nodes: list[SlurmNodeGres] = field(default_factory=list)


def sniff(text: str) -> bool:
    """Whether ``text`` holds a ``slurmd -G`` GPU line or a ``scontrol show node`` Gres= line."""
    if re.search(r"(?m)^(?:\S+:\s+)*Gres\s+Name=gpu\b", text):
        return True
    return bool(re.search(r"(?m)^NodeName=\S", text)) and bool(re.search(r"(?m)^\s+Gres=gpu[:(\s]", text))


def _fields(text: str) -> dict[str, str]:
    return dict(word.split("=", 1) for word in text.split() if "=" in word)


def _int_list(text: str | None) -> list[int] | None:
    if text is None or not re.fullmatch(r"-?\d{1,5}(,-?\d{1,5})*", text):
        return None
    return [int(n) for n in text.split(",")]


def _gpu(match: re.Match, number: int) -> SlurmGpu | None:
    fields = _fields(match.group("fields"))
    if fields.get("Name") != "gpu" or not _ascii_digits(fields.get("Index") or "") or len(fields["Index"]) > 5:
        return None
    file = fields.get("File")
    device = _DEVICE.search(file or "")
    try:
        cores = parse_cpu_list(fields["Cores"]) if "Cores" in fields else None
    except ValueError:
        cores = None
    kind = fields.get("Type")
    return SlurmGpu(match.group("node"), int(fields["Index"]), kind if kind and kind != "(null)" else None, file,
                    int(device.group(1)) if device else None, cores, _int_list(fields.get("Links")), number)


def _node_gres(node: str, text: str, number: int) -> SlurmNodeGres | None:
    entries: list[tuple[str | None, int]] = []
    for entry in re.sub(r"\([^)]*\)", "", text).split(","):
        parts = entry.split(":")
        if parts[0] != "gpu":
            continue
        count = parts[-1] if len(parts) > 1 and _ascii_digits(parts[-1]) else None
        if count is None or len(count) > 5:
            return None
        entries.append((parts[1] if len(parts) == 3 else None, int(count)))
    return SlurmNodeGres(node, entries, number) if entries else None


def read(text: str) -> SlurmGresText:
    """Every GPU line and node ``Gres=`` of ``text`` (module docstring)."""
    result = SlurmGresText()
    node: str | None = None
    for number, line in enumerate(text.splitlines()[:MAX_LINES], start=1):
        line = line.rstrip()
        if (match := _GRES_LINE.match(line)) is not None:
            gpu = _gpu(match, number)
            if gpu is not None:
                result.gpus.append(gpu)
        elif (match := _NODE_LINE.match(line)) is not None:
            node = match.group("node")
        elif node is not None and (match := _NODE_GRES.match(line)) is not None:
            gres = _node_gres(node, match.group("gres"), number)
            if gres is not None:
                result.nodes.append(gres)
    return result


def _ascii_digits(text: str) -> bool:
    """Digits 0-9 only (``str.isdigit`` takes ``²`` and ``٣``, which ``int`` refuses or reads as 3)."""
    return text.isascii() and text.isdigit()
