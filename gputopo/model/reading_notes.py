"""What a reader noticed while reading: ``ReadingNote``, facts only; analysis words them.

A source gives the topology as read. Where reading it needed a decision the user should know of (a
damaged paste repaired, a TensorFlow log cut short, an NVML query that failed, a line showing a
virtual machine), the reader records a ``ReadingNote``: a stable ``code``, the GPUs it is about,
and ``facts``, plain JSON values (the source's name, line numbers, the repairs made, the cut
places, the query and NVML's reason). No sentence is written here: ``gputopo.analysis.notes.reading_notes``
words each code into a ``Finding`` (severity, message, fix), in one place.

JSON: ``Topology.reading_notes`` and ``TfView.reading_notes`` are lists of ``{"code", "facts",
"gpus"}``. Snapshots written before notes existed carried them as worded findings only (in
``diagnostics``, and as findings in ``tf.notes``); ``upgrade_legacy`` reads those back as notes whose
facts hold the words (``WORDED``), so such a snapshot shows what it showed. Older versions of
gputopo read new snapshots too: they ignore the ``reading_notes`` keys, and ``diagnostics`` holds
the notes in words as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputopo.model.from_json import build
from gputopo.model.parts import Finding


@dataclass
class ReadingNote:
    """One thing a reader noticed while reading (``code``), its facts and the GPUs it is about.

    ``facts`` hold plain JSON values only (strings, numbers, booleans, null, lists and objects of
    them); its strings are data (a file name, a pasted token), never sentences for people."""

    code: str
    facts: dict[str, Any] = field(default_factory=dict)
    gpus: list[int] = field(default_factory=list)


# Codes whose facts analysis reads beyond wording them (``analysis.place.locality``).
VM_EVIDENCE = "vm-evidence"  # a line of the paste shows a virtual machine: {source, line, text}
SOC_BETWEEN_SOCKETS = "soc-between-sockets"  # the matrix says SOC (nvidia-smi before 2017): {}
# The facts of a note that carries a finding as it was worded (an older snapshot's; a snapshot's
# findings merged after another source's notes): {"worded": {"severity", "message", "fix", "evidence", "effect"}}.
WORDED = "worded"
# Findings of older snapshots that analysis reads back as facts.
_LEGACY_FACT_CODES = (VM_EVIDENCE, SOC_BETWEEN_SOCKETS)


def worded_note(finding: Finding) -> ReadingNote:
    """A note that carries a finding as it is worded (an older snapshot's; a snapshot's findings
    merged after another source's notes: ``sources.merge``)."""
    words = {"severity": finding.severity, "message": finding.message, "fix": finding.fix,
             "evidence": list(finding.evidence), "effect": finding.effect}
    return ReadingNote(finding.code, {WORDED: words}, list(finding.gpus))


def upgrade_legacy(data: dict[str, Any]) -> dict[str, Any]:
    """Snapshot JSON written before reading notes existed, with its notes as notes.

    Without a ``reading_notes`` key, the ``vm-evidence`` and ``soc-between-sockets`` findings of
    ``diagnostics`` (which analysis reads as facts) become worded notes; a ``tf`` without
    ``reading_notes`` has its ``notes`` (findings then) read as worded notes. ``data`` is not
    changed; anything of the wrong shape is left for ``build`` to name (``tf.notes[0].message``)."""
    if not isinstance(data, dict):
        return data
    upgraded = data
    diagnostics = data.get("diagnostics")
    if "reading_notes" not in data and isinstance(diagnostics, list):
        notes = [_plain_note(worded_note(build(Finding, item, f"diagnostics[{k}]")))
                 for k, item in enumerate(diagnostics)
                 if isinstance(item, dict) and item.get("code") in _LEGACY_FACT_CODES]
        if notes:
            upgraded = {**upgraded, "reading_notes": notes}
    tf = data.get("tf")
    if isinstance(tf, dict) and "reading_notes" not in tf and isinstance(tf.get("notes"), list):
        notes = [_plain_note(worded_note(build(Finding, item, f"tf.notes[{k}]"))) for k, item in enumerate(tf["notes"])]
        upgraded = {**upgraded, "tf": {**tf, "reading_notes": notes}}
    return upgraded


def _plain_note(note: ReadingNote) -> dict[str, Any]:
    return {"code": note.code, "facts": note.facts, "gpus": note.gpus}
