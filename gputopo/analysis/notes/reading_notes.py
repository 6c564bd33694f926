"""What the readers noticed, in words: each ``ReadingNote`` code -> a ``Finding`` (severity, message,
fix). The one place these sentences are written; the sources record facts only
(``gputopo.model.reading_notes``).

``with_findings`` adds a topology's notes in words first (``add_reading_findings``: after the
findings it already holds, a snapshot's), then ``diagnose``'s findings; ``tf_crosscheck.tf_findings``
words a TensorFlow view's notes first among its own. A note that carries its words (``worded``: an
older snapshot's, a snapshot's findings merged after another source's notes) is that finding. A
note whose code this version does not know (a newer gputopo's snapshot) or whose facts cannot be
worded (a hand-edited snapshot) is left out: every snapshot gputopo writes also holds its notes in
words, in ``diagnostics``.

Codes (the facts of each: where its source makes it):

- ``nvidia-smi topo -m`` text (``sources.smi.smi_text``, ``smi_text_paste``, ``smi_p2p``):
  ``repaired-paste`` (a damaged paste repaired; each repair in ``paste_repair_words``),
  ``several-topo-matrices``, ``asymmetric-matrix`` (warning), ``nic-rows-missing``,
  ``p2p-capability-assumed``, ``asymmetric-p2p-matrix`` (warning), ``vm-evidence`` and
  ``soc-between-sockets`` (which ``analysis.place.locality`` also reads as facts), ``pcie-only-matrix``;
- other tools' outputs: ``cuda-ordinals-only`` (p2pBandwidthLatencyTest), ``no-pair-measured``
  (nvbandwidth), ``nccl-gpus-by-bus-id`` (an NCCL log); the resolver: ``tf-log-alone``;
- the NVML probe (``sources.host.nvml_notes``): ``gpu-lost`` (warning), ``multi-gpu-board``,
  ``nvml-query-failed`` (worded as ``nvml-<query>-unavailable``, a warning unless the reasons
  only say the GPU or driver does not have it);
- TensorFlow logs (``sources.tf.tflog*``, ``tf_init``): worded in ``reading_notes_tf``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gputopo.analysis.notes.reading_notes_tf import TF_WORDINGS
from gputopo.analysis.notes.reading_notes_tools import TOOL_WORDINGS, Words
from gputopo.model import Finding, ReadingNote, Topology
from gputopo.model.from_json import build
from gputopo.model.reading_notes import SOC_BETWEEN_SOCKETS, VM_EVIDENCE, WORDED
from gputopo.model.words import SEVERITIES
from gputopo.notation import gpu_list


def add_reading_findings(topology: Topology) -> Topology:
    """Add the topology's reading notes in words to its findings (one already there, same code and
    GPUs, is kept once), in the notes' order."""
    for finding in note_findings(topology.reading_notes):
        topology.add_finding(finding)
    return topology


def note_findings(notes: list[ReadingNote]) -> list[Finding]:
    """Each note in words, in order; notes that cannot be worded are left out (see the module)."""
    findings = []
    for note in notes:
        finding = note_finding(note)
        if finding is not None:
            findings.append(finding)
    return findings


def note_finding(note: ReadingNote) -> Finding | None:
    """One note in words; None for a code this version does not know or facts it cannot word."""
    worded = note.facts.get(WORDED)
    try:
        if isinstance(worded, dict):  # a finding as it was worded (an older snapshot's, a merged one's)
            # (checked as a snapshot's finding is: a hand-edited note's words may be of any JSON type)
            finding = build(Finding, {**worded, "code": note.code, "gpus": list(note.gpus),
                                      "evidence": worded.get("evidence") or []}, "worded")
            return finding if finding.severity in SEVERITIES else None
        wording = _WORDINGS.get(note.code)
        if wording is None:
            return None
        severity, message, fix = wording(note.facts, note.gpus)
        return Finding(severity, _code(note), message, gpus=list(note.gpus), fix=fix)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError):
        return None


def vm_line(note: ReadingNote) -> str | None:
    """The words of a ``vm-evidence`` note (``line 3 of topo.txt says 'Hypervisor vendor: KVM'``),
    for ``analysis.place.locality``; None where its facts cannot be worded."""
    finding = note_finding(note) if note.code == VM_EVIDENCE else None
    return finding.message if finding is not None else None


def _code(note: ReadingNote) -> str:
    """The finding's code: the note's, but ``nvml-<query>-unavailable`` for a failed NVML query."""
    if note.code == "nvml-query-failed":
        query = note.facts["query"]
        if not (isinstance(query, str) and _QUERY_WORD.fullmatch(query)):  # a hand-edited note's: no code of it
            raise ValueError(f"not an NVML query word: {query!r:.40}")
        return f"nvml-{query}-unavailable"
    return note.code


# What a query may be called in a finding's code (a code is one word: ``nvml-pcie-width-unavailable``).
_QUERY_WORD = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")


# --- nvidia-smi topo -m text --------------------------------------------------------------------

_P2P_CAPABILITY_NAMES = {"r": "read", "w": "write", "a": "atomics", "n": "NVLink", "p": "PCIe"}


def _plural(n: int, word: str) -> str:
    return f"{word}{'s' if n != 1 else ''}"


def paste_repair_words(repair: dict[str, Any]) -> str:
    """One repair of a damaged paste (``{"repair": kind, ...}``, ``sources.smi.smi_text_matrix``) in words."""
    kind = repair["repair"]
    if kind == "line-prefix":
        return f"every line of the matrix began with {repair['prefix'][:40]!r}: taken off"
    if kind == "bare-escapes":
        return "underline escapes that had lost their ESC byte ('[4m', '[0m') were removed"
    if kind == "cell-from-mirror":
        return f"the unreadable {repair['row']}/{repair['column']} cell ({repair['cell']!r}) was read from the {repair['column']} row"
    if kind == "cell-ran-into-affinity":
        return (f"the {repair['column']} cell and the CPU Affinity ran together in {repair['rows']} "
                f"{_plural(repair['rows'], 'row')} ({repair['example']!r}): read as {'/'.join(repair['words'])} "
                "and the CPU list after it")
    if kind == "nic-cells-left-out":
        cells = [f"{gpu}/{nic} ({token!r})" for gpu, nic, token in repair["cells"]]
        shown = ", ".join(cells[:6]) + (f" and {len(cells) - 6} more" if len(cells) > 6 else "")
        return f"NIC cells that could not be read were left out: {shown} (those GPU-NIC paths are unknown)"
    if kind == "header-ran-together":
        cell = repair["cell"] if len(repair["cell"]) <= 24 else repair["cell"][:21] + "..."
        how = "split into their names" if repair.get("split") else "the columns were read from the rows"
        return f"the header's cells ran together (line {repair['line']}: {cell!r}); {how}"
    if kind == "rows-without-header":
        return _rows_without_header(repair)
    if kind == "header-wrapped":
        return f"the header was wrapped over {repair['lines']} lines (line {repair['line']}); they were joined"
    if kind == "blank-lines":
        return f"{repair['lines']} blank {_plural(repair['lines'], 'line')} between the rows were skipped"
    if kind == "affinity-unplaced":
        return (f"the affinity cells of {', '.join(repair['rows'])} are fewer than the titles and stand under none of "
                "them (an empty cell in a re-spaced paste?): read as unknown")
    if kind == "rows-wrapped":
        return f"rows wrapped over several lines were joined ({repair['lines']} continuation {_plural(repair['lines'], 'line')})"
    if kind == "markdown-table":
        return "a markdown table: its '|' cell borders were read as column separators"
    if kind == "last-row-cut":
        return f"the last row, {repair['row']}, was cut short after {repair['cells']} of {repair['columns']} cells: left out"
    if kind == "rows-missing":
        return _rows_missing(repair)
    if kind == "cells-ran-together":
        return f"cells that ran together ({repair['cell']!r} in row {repair['row']}) were split into their words"
    raise ValueError(f"unknown repair {kind!r}")


def _rows_missing(repair: dict[str, Any]) -> str:
    """What a cut paste still says and what it does not (``sources.smi.smi_text_rows``); where a missing
    row stands further down, apart from the matrix, the paste is not cut, and that is said."""
    missing, indices, apart_line = repair["rows"], repair["gpus"], repair["apart_line"]
    pairs = [f"{a}-{b}" for i, a in enumerate(indices) for b in indices[i + 1 :]]
    one = len(missing) == 1
    unknown = (f"the pair{'s' if len(pairs) > 1 else ''} {', '.join(pairs[:6])}"
               f"{f' and {len(pairs) - 6} more' if len(pairs) > 6 else ''} and " if pairs else "")
    why = (f"the matrix has no row for {', '.join(missing)} (a row stands apart further down, line {apart_line}, "
           "after a line that is no row: not read)" if apart_line is not None
           else f"the paste has no row for {', '.join(missing)} (cut short?)")
    return (
        f"{why}: {'its' if one else 'their'} links to "
        f"the GPUs that have rows were read from those rows; {unknown}{'its' if one else 'their'} CPU and NUMA "
        "affinity are unknown"
    )


def _cells_ran_together(glued: list[dict[str, Any]]) -> str:
    """Cells that ran together in several rows (a separator lost on every line): one clause."""
    first: dict[str, str] = {}
    for repair in glued:
        first.setdefault(repair["cell"], repair["row"])
    shown = ", ".join(f"{cell!r} in row {row}" for cell, row in list(first.items())[:4])
    return f"cells that ran together in {len(glued)} rows were split into their words ({shown})"


def _rows_without_header(repair: dict[str, Any]) -> str:
    if repair["header_line"] is not None:
        said = f"the header (line {repair['header_line']}) does not match the rows"
    else:
        said = f"no header line above the rows (line {repair['line']})"
    first, last = repair["gpus"]
    said += f": the columns {first}..{last} were read from the rows"
    if by_nvlink := repair.get("gpus_by_nvlink"):
        said += f" ({', '.join(by_nvlink)}, which have no row, by their NVLink cells: only GPUs have NVLinks)"
    if repair["unnamed_nics"]:
        said += f"; {repair['unnamed_nics']} NIC {_plural(repair['unnamed_nics'], 'column')} left out (no header names them)"
    if repair["attributes"]:
        said += f"; the cells after the links read as {', '.join(repair['attributes'])} (nvidia-smi's order)"
    return said


def _repaired_paste(facts: dict[str, Any], gpus: list[int]) -> Words:
    glued = [repair for repair in facts["repairs"] if repair["repair"] == "cells-ran-together"]
    said = []
    for repair in facts["repairs"]:  # cells that ran together in several rows: one clause, where the first was
        if repair["repair"] != "cells-ran-together" or len(glued) == 1:
            said.append(paste_repair_words(repair))
        elif repair is glued[0]:
            said.append(_cells_ran_together(glued))
    words = list(dict.fromkeys(said))
    return "info", f"{facts['source']}: the paste was damaged; " + "; ".join(words), None


def _several_matrices(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']} holds {facts['matrices']} `nvidia-smi topo -m` matrices; the first "
            f"(line {facts['line']}) is used"), None)


def _asymmetric_matrix(facts: dict[str, Any], gpus: list[int]) -> Words:
    a, b = facts["from"], facts["to"]
    return ("warning", (f"the matrix disagrees with itself: {a}->{b} is {facts['forward']} but {b}->{a} is "
            f"{facts['backward']}; using the worse, {facts['kept']}"),
            "capture `nvidia-smi topo -m` again; a real matrix is symmetric")


def _nic_rows_missing(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"the text has no rows for {', '.join(facts['nics'])} (cut short?); "
            "their paths were read from the GPU rows"), None)


def _p2p_capability_assumed(facts: dict[str, Any], gpus: list[int]) -> Words:
    why = (f"its command asks for `{facts['asked']}`, several capabilities, and the text does not say which one "
           "it shows" if facts.get("asked") else "it has no command line above it saying which capability it shows")
    return ("info", f"the `nvidia-smi topo -p2p` matrix at line {facts['line']}: {why}; it was read as P2P read",
            f"{'run one capability per command' if facts.get('asked') else 'paste the command line'} "
            "(`nvidia-smi topo -p2p r`, `w`, `a` or `n`) with its output")


def _asymmetric_p2p_matrix(facts: dict[str, Any], gpus: list[int]) -> Words:
    a, b = facts["from"], facts["to"]
    return ("warning", (f"P2P {_P2P_CAPABILITY_NAMES[facts['capability']]} is {facts['forward']} for {a}->{b} but "
            f"{facts['backward']} for {b}->{a}; using {facts['kept']}"), None)


def _vm_evidence(facts: dict[str, Any], gpus: list[int]) -> Words:
    return "info", f"line {facts['line']} of {facts['source']} says {facts['text']!r}", None


def _soc_between_sockets(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", ("the matrix says SOC (nvidia-smi before 2017), which its legend defines as PCIe plus the SMP link "
            "between CPU sockets: GPUs joined by SOC are read as on different CPU sockets, unless the matrix is a virtual "
            "machine's flat view (then where they sit on the host is not known: see virtual-machine)"), None)


def _pcie_only_matrix(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", ("the matrix is `nvidia-smi topo -mp` (PCIe paths only): whether the GPUs are also NVLinked, "
            "it does not show"), "paste `nvidia-smi topo -m` as well")


# --- the resolver (other tools' outputs: reading_notes_tools) -----------------------------------------------------------


def _tf_log_alone(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", ("NVML is not available here (no NVIDIA driver), so TensorFlow's view is read on its own: it says "
            "which GPUs could peer, not how they are wired"),
            "run the same command on the GPU host, or add --from SNAPSHOT saved there with `gputopo scan --save`")


# --- the NVML probe -------------------------------------------------------------------------------

# Reasons that mean "this GPU/driver simply does not have it": reported as info, not warning.
_BENIGN_REASONS = {"not supported", "not in this driver"}
# What each query kind fills in ("NVML could not report the <what> of GPUs ...").
_QUERY_WHAT = {
    "handle": "handle (the GPU could not be opened)",
    "name": "name",
    "uuid": "UUID",
    "pci": "PCI bus id",
    "memory": "memory size and use",
    "utilization": "utilisation",
    "processes": "running compute processes",
    "numa": "NUMA node",
    "cpu-affinity": "CPU affinity",
    "pcie-gen": "PCIe link generation",
    "pcie-width": "PCIe link width",
    "nvlink": "NVLink state",
    "nvlink-version": "NVLink version",
    "nvlink-remote": "NVLink remote ends",
    "mig": "MIG mode",
    "compute-capability": "CUDA compute capability",
    "topology": "PCIe path (common ancestor)",
    "p2p": "P2P capabilities",
}
_QUERY_FIX = {
    "no permission": "run gputopo as a user with access to /dev/nvidia* (or as root) to see these fields",
    "not in this driver": "a newer NVIDIA driver / nvidia-ml-py reports this field",
}


def _gpu_lost(facts: dict[str, Any], gpus: list[int]) -> Words:
    (gpu,) = gpus
    where = f" ({facts['bus_id']})" if facts["bus_id"] else ""
    return ("warning", (f"GPU {gpu}{where} fell off the bus (NVML: GPU is lost); its remaining fields and "
            "links are unknown"),
            f"check `dmesg` for Xid 79, then reset the GPU (nvidia-smi -r -i {gpu}) or reboot; reseat it if it recurs")


def _multi_gpu_board(facts: dict[str, Any], gpus: list[int]) -> Words:
    pairs = ", ".join(f"{a}-{b}" for a, b in facts["pairs"])
    return "info", f"GPU pairs {pairs} sit on one multi-GPU board (NVML: INTERNAL); shown as PIX", None


def _nvml_query_failed(facts: dict[str, Any], gpus: list[int]) -> Words:
    failed = facts["failed"]
    reasons = sorted({entry["reason"] for entry in failed})
    pairs = sorted(tuple(entry["pair"]) for entry in failed if "pair" in entry)
    if pairs:
        subject = "pairs " + ", ".join(f"{a}-{b}" for a, b in pairs)
    else:
        gpus = sorted({entry["gpu"] for entry in failed})
        subject = ("GPU " if len(gpus) == 1 else "GPUs ") + gpu_list(gpus)
    severity = "info" if set(reasons) <= _BENIGN_REASONS else "warning"
    fix = next((_QUERY_FIX[r] for r in reasons if r in _QUERY_FIX), None)
    what = _QUERY_WHAT.get(facts["query"], facts["query"])
    return severity, f"NVML could not report the {what} of {subject} ({'; '.join(reasons)}); shown as unknown", fix


_WORDINGS: dict[str, Callable[[dict[str, Any], list[int]], Words]] = {
    "repaired-paste": _repaired_paste,
    "several-topo-matrices": _several_matrices,
    "asymmetric-matrix": _asymmetric_matrix,
    "nic-rows-missing": _nic_rows_missing,
    "p2p-capability-assumed": _p2p_capability_assumed,
    "asymmetric-p2p-matrix": _asymmetric_p2p_matrix,
    VM_EVIDENCE: _vm_evidence,
    SOC_BETWEEN_SOCKETS: _soc_between_sockets,
    "pcie-only-matrix": _pcie_only_matrix,
    **TOOL_WORDINGS,
    "tf-log-alone": _tf_log_alone,
    "gpu-lost": _gpu_lost,
    "multi-gpu-board": _multi_gpu_board,
    "nvml-query-failed": _nvml_query_failed,
    **TF_WORDINGS,
}

# Every code this version words (a test checks that every note a source makes is among them).
NOTE_CODES = frozenset(_WORDINGS)
