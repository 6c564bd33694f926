"""What the paste readers found, as data (gputopo/sources/evidence/pasted_evidence.py)."""

from __future__ import annotations

from gputopo.sources.evidence.pasted_evidence import (
    MAX_SHOWN_CHARS,
    PastedAer,
    PastedEvidence,
    full_bdf,
    shown,
)


def test_bus_ids_and_shown_lines():
    assert full_bdf("40:01.1") == "0000:40:01.1" and full_bdf("0001:3B:00.0") == "0001:3b:00.0"
    assert len(shown("x" * 1000)) == MAX_SHOWN_CHARS and shown("  a line \n") == "a line"


def test_kinds_are_kept_once_in_order_and_corrected_is_the_severity():
    evidence = PastedEvidence()
    for kind in ("dmesg", "lspci -vvv", "dmesg"):
        evidence.add_kind(kind)
    assert evidence.kinds == ["dmesg", "lspci -vvv"]
    assert PastedAer("0000:00:02.0", "pcieport", "corrected", "Data Link Layer", 1, "").corrected
    assert not PastedAer("0000:00:02.0", "pcieport", "uncorrected (fatal)", "Transaction Layer", 2, "").corrected
