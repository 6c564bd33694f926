"""The one door for input files: every kind of text gputopo reads, how it is recognised, and how a
file becomes a ``Topology``.

A ``Reader`` says how to recognise its kind by *content* (never by file name) and reads only what
that kind says. A paste often holds several outputs in a row (``nvidia-smi topo -m`` followed by a
``p2pBandwidthLatencyTest`` run): every reader whose ``sniff`` matches reads its own part, ignoring
the other lines, and the parts are merged as views of one host (``gputopo.sources.merge``).

Structured files (a gputopo snapshot, a ``gputopo report`` page) are whole documents: they are
read on their own, never mixed with text readers.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any, Callable

from gputopo.errors import InputError, NothingToRead
from gputopo.fileio import read_text_input
from gputopo.model import ReadingNote, Topology
from gputopo.model.from_json import FREE_TEXT_FIELDS
from gputopo.quoting import one_line
from gputopo.sources.pasted import undecorated_lines

MAX_DESCRIBED_CHARS = 60
# nvidia-smi's summary table (``| NVIDIA-SMI 535.54.03   Driver Version: 535.54.03 ...``), looked for in
# the text's first 64 KiB: GPUs and their use, not their wiring.
_SMI_SUMMARY_RE = re.compile(r"NVIDIA-SMI [0-9][0-9.]{0,20}[ \t]{1,80}Driver Version:")
MAX_SUMMARY_SEARCH = 1 << 16
_SNAPSHOT_HEAD_RE = re.compile(r'\s*\{\s*"schema"\s*:\s*"gputopo\.')


@dataclass(frozen=True)
class Reader:
    """One kind of input: its name for people, how to recognise it, how to read it."""

    kind: str  # what users call it: "nvidia-smi topo -m", "p2pBandwidthLatencyTest", ...
    sniff: Callable[[str], bool]  # cheap and linear: does the text hold this kind's output anywhere?
    read: Callable[[str, str], Topology]  # (text, source label) -> what this kind says, as a Topology


def _sniff_topo_matrix(text: str) -> bool:
    from gputopo.sources.smi.smi_p2p import sniff as p2p_alone
    from gputopo.sources.smi.smi_text import sniff

    return sniff(text) and not p2p_alone(text)  # a `topo -p2p` matrix alone is its own kind


def _read_topo_matrix(text: str, source: str) -> Topology:
    from gputopo.sources.smi.smi_text import parse_topo_matrix

    return parse_topo_matrix(text, source=source)


# Text readers, in priority order: where several match one paste, the first one's answers win a
# disagreement (and the disagreement becomes a finding).
def _reader_of(module: str) -> Reader:
    """The Reader of ``gputopo.sources.<module>`` (which holds ``KIND``, ``sniff`` and ``read``)."""
    import importlib

    loaded = importlib.import_module(f"gputopo.sources.{module}")
    return Reader(loaded.KIND, loaded.sniff, loaded.read)


READERS: tuple[Reader, ...] = (
    Reader("nvidia-smi topo -m", _sniff_topo_matrix, _read_topo_matrix),
    *(_reader_of(module) for module in (
        "smi.smi_p2p", "tools.nccl_xml", "tools.p2pbw", "tools.nvbandwidth", "tools.nvbandwidth_json", "tools.nccl_log",
        "tools.nccl_tests", "smi.nvlink", "smi.smi_q", "tools.cuda_peers",
    )),
)

# Whole documents, recognised before any text reader.
DOCUMENT_KINDS = ("gputopo snapshot (JSON from `gputopo scan --save`)", "gputopo report page (HTML)")


def kinds_read() -> list[str]:
    """Every kind of input ``--from`` reads, for help and error messages."""
    return [*DOCUMENT_KINDS, *(reader.kind for reader in READERS)]


def read_file(path: str) -> Topology:
    """Read ``path`` ('-' = standard input), bounded, and turn it into a Topology (as read: no
    findings but those about reading itself). A ``gputopo gather`` archive is read by
    ``gputopo.sources.archives.gathered``."""
    from gputopo.sources.archives.archive import is_archive

    if path != "-" and is_archive(path):
        from gputopo.sources.archives.gathered import read_gathered

        return names_on_one_line(read_gathered(path, read_text))
    text = read_text_input(path, what="topology file")
    label = "standard input" if path == "-" else path
    return names_on_one_line(read_text(text, label))


# What a reader may fill with text from its input, other than free text and the pair table's words.
_NAMED_PARTS = ("gpus", "nics", "nic_links", "fabric")


def names_on_one_line(topology: Topology) -> Topology:
    """``topology`` with every control character (newline, escape, C1 codes) dropped from the names
    its readers took from the input (a NIC in a ``topo -m`` legend or an NCCL XML ``<net name>``,
    a GPU's name, a bus id, the host), as NVML's are at its door: a snapshot ``--save`` writes then
    always reads back (one such name made it refuse its own file: ``control character``). Free text
    (messages, evidence, notes) keeps its lines, as a snapshot does."""
    for name in _NAMED_PARTS:
        cleaned = _one_line(getattr(topology, name), 0)
        if cleaned is not getattr(topology, name):
            setattr(topology, name, cleaned)
    if topology.fabric is not None:  # fresh lookups (a node's id may have changed)
        topology.fabric = type(topology.fabric)(nodes=list(topology.fabric.nodes), edges=list(topology.fabric.edges))
    for f in dataclasses.fields(topology):
        value = getattr(topology, f.name)
        if isinstance(value, str) and f.name not in FREE_TEXT_FIELDS:
            setattr(topology, f.name, one_line(value))
    return topology


def _one_line(value: Any, depth: int) -> Any:
    if isinstance(value, str):
        return one_line(value)
    if depth > 8:  # (our model nests a few levels; nothing here comes from a document's nesting)
        return value
    if isinstance(value, list):  # in place: the topology's lists keep their identity (its caches key on it)
        for position, item in enumerate(value):
            cleaned = _one_line(item, depth + 1)
            if cleaned is not item:
                value[position] = cleaned
        return value
    if isinstance(value, dict):
        return {_one_line(k, depth + 1): _one_line(v, depth + 1) for k, v in value.items()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.name not in FREE_TEXT_FIELDS:
                item = getattr(value, f.name)
                if item is not None and not isinstance(item, (int, float, bool)):
                    setattr(value, f.name, _one_line(item, depth + 1))
    return value


def read_text(text: str, label: str) -> Topology:
    """What ``text`` says, by content: a snapshot, a report page, or any mix of the text kinds."""
    from gputopo.sources.snapshot import (
        looks_like_report,
        looks_like_snapshot,
        parse_snapshot,
        report_snapshot_text,
    )

    if not text.strip():
        raise InputError(f"{label} is empty: expected one of {', '.join(kinds_read())}")
    if looks_like_report(text):
        text = report_snapshot_text(text, source=label)
    # A snapshot names its schema first (``to_dict``); other JSON (``nvbandwidth -j``) is a text
    # kind's, and JSON that no reader takes is read as a snapshot for its precise error.
    pasted = text  # as given: what doctor reads (a prefix shared by every line may be its evidence)
    if not _SNAPSHOT_HEAD_RE.match(text[:200]):  # a decoration on every line (a quote, bold, a host label) is no output's
        text = "\n".join(undecorated_lines(text))
    matched = [] if _SNAPSHOT_HEAD_RE.match(text[:200]) else [reader for reader in READERS if reader.sniff(text)]
    if not matched and looks_like_snapshot(text):
        topology = parse_snapshot(text, source=label)
        topology.source_detail = topology.source_detail or label
        return topology
    if not matched:
        from gputopo.sources.evidence.pasted_health import parse_pasted

        # Evidence doctor reads (lspci, dmesg, env, CUDA errors ...), judged on the text as doctor gets it:
        # a prefix every line shares is taken off above as a decoration, but in a kernel log where every
        # line is the driver's (``kernel: NVRM: Xid ...``) that prefix is what makes it one.
        health = parse_pasted(pasted).kinds or parse_pasted(text).kinds
        if health:
            raise InputError(f"{label} holds health evidence ({', '.join(health[:4])}), not a topology: "
                             f"`gputopo doctor --from {label}` reads it")
        if _SMI_SUMMARY_RE.search(text[:MAX_SUMMARY_SEARCH]):
            raise InputError(f"{label} is nvidia-smi's summary table, which does not say how the GPUs are wired: "
                             "paste `nvidia-smi topo -m` (and `nvidia-smi -q` for each GPU's PCIe link)")
        raise InputError(f"{label} is not a kind gputopo reads ({describe_text(text)}); it reads: {', '.join(kinds_read())}")
    read = [(reader, _read_part(reader, text, label, alone=len(matched) == 1)) for reader in matched]
    empty = [(reader, part) for reader, part in read if isinstance(part, NothingToRead)]
    read = [(reader, part) for reader, part in read if not isinstance(part, NothingToRead)]
    if not read:  # every output in the paste is empty: the first one's reason
        raise empty[0][1]
    if len(read) == 1:
        topology = read[0][1]
    else:
        from gputopo.sources.merge import merge_views

        topology = merge_views([part for _, part in read], [f"{label} ({reader.kind})" for reader, _ in read])
    for reader, exc in empty:  # said, never dropped silently
        topology.reading_notes.append(ReadingNote("paste-part-empty", {"source": label, "kind": reader.kind, "reason": str(exc)}))
    return topology


def _read_part(reader: Reader, text: str, label: str, alone: bool) -> Topology | NothingToRead:
    """One reader's part of a paste; its one-line error names the kind when others matched too
    (no part of a paste is dropped silently). A part whose lines carry nothing its reader takes
    (``NothingToRead``) beside other outputs is returned as that reason, for a reading note."""
    try:
        return reader.read(text, label)
    except NothingToRead as exc:
        if alone:
            raise
        return exc
    except InputError as exc:
        if alone:
            raise
        raise InputError(f"{label} holds several outputs; its {reader.kind} part cannot be read: {exc}") from None


def describe_text(text: str) -> str:
    """What the text looks like, in a few words, for the one-line refusal."""
    sample = text[:4096]
    control = sum(1 for ch in sample if ord(ch) < 32 and ch not in "\t\n\r\f\v")
    if "\x00" in sample or control > len(sample) // 20:
        return "it looks binary"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:  # nothing left once a paste's quoting is taken off ("> ")
        return "no text but blank lines and quoting"
    first = lines[0]
    if first.startswith("{") or first.startswith("["):
        return "JSON that is not a gputopo snapshot" if first.startswith("[") else "JSON"
    shown = first if len(first) <= MAX_DESCRIBED_CHARS else first[: MAX_DESCRIBED_CHARS - 3] + "..."
    shown = "".join(ch if ch.isprintable() else "?" for ch in shown)
    return f"{len(lines)} non-blank line{'s' if len(lines) != 1 else ''} starting with {shown!r}"
