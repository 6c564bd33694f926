"""``ReadingNote``: facts in JSON both ways, and older snapshots' worded notes read back as notes."""

from __future__ import annotations

import json

import pytest

from gputopo.model import Finding, ReadingNote, TfView, Topology
from gputopo.model.from_json import MAX_PLAIN_DEPTH
from gputopo.model.reading_notes import (
    SOC_BETWEEN_SOCKETS,
    VM_EVIDENCE,
    WORDED,
    upgrade_legacy,
    worded_note,
)
from gputopo.sources.reference import load_reference


def _round_trip(topology: Topology) -> Topology:
    return Topology.from_dict(json.loads(json.dumps(topology.to_dict())))


def test_notes_and_their_facts_round_trip_on_the_topology_and_the_tf_view():
    facts = {"source": "paste\twith a tab.txt", "line": 3, "ratio": 0.5, "cut": True, "missing": None,
             "repairs": [{"repair": "cells-ran-together", "cell": "NODENODE", "row": "GPU5"}], "pairs": [[0, 1]]}
    topology = Topology(reading_notes=[ReadingNote("repaired-paste", facts, [0, 1]), ReadingNote("pcie-only-matrix")],
                        tf=TfView(reading_notes=[ReadingNote("tf-log-cut", {"source": "x.log", "cuts": []})]))
    data = topology.to_dict()
    assert data["reading_notes"][0] == {"code": "repaired-paste", "facts": facts, "gpus": [0, 1]}
    assert data["reading_notes"][1] == {"code": "pcie-only-matrix", "facts": {}, "gpus": []}
    assert "notes" not in data["tf"] and data["tf"]["reading_notes"][0]["code"] == "tf-log-cut"
    again = _round_trip(topology)
    assert again.reading_notes == topology.reading_notes and again.tf.reading_notes == topology.tf.reading_notes


@pytest.mark.parametrize(
    ("facts", "error"),
    [
        ({"x": float("nan")}, r"reading_notes\[0\]\.facts\.x: must be a finite number, got NaN"),
        ({"x": 2**70}, r"reading_notes\[0\]\.facts\.x: .* is out of range"),
        ({"x\n": 1}, r"reading_notes\[0\]\.facts key: control character"),
        ({"deep": json.loads("[" * (MAX_PLAIN_DEPTH + 1) + "]" * (MAX_PLAIN_DEPTH + 1))}, r"nested more than 8 deep"),
    ],
)
def test_facts_are_plain_bounded_json(facts, error):
    data = Topology(reading_notes=[ReadingNote("x", facts)]).to_dict()
    with pytest.raises(ValueError, match=error):
        Topology.from_dict(data)


def test_facts_nested_to_the_bound_are_read():
    deep = json.loads("[" * MAX_PLAIN_DEPTH + "]" * MAX_PLAIN_DEPTH)
    assert _round_trip(Topology(reading_notes=[ReadingNote("x", {"deep": deep})])).reading_notes[0].facts["deep"] == deep


def test_a_note_needs_its_code():
    with pytest.raises(ValueError, match=r"reading_notes\[0\]\.code: missing"):
        Topology.from_dict({**Topology().to_dict(), "reading_notes": [{"facts": {}}]})


def test_worded_note_keeps_everything_a_finding_says():
    finding = Finding("warning", "doctor-acs", "ACS redirects", [0, 1], "turn it off", ["/sys/.../config: ACS"], "0-1 slow")
    note = worded_note(finding)
    assert (note.code, note.gpus) == ("doctor-acs", [0, 1])
    assert note.facts == {WORDED: {"severity": "warning", "message": "ACS redirects", "fix": "turn it off",
                                   "evidence": ["/sys/.../config: ACS"], "effect": "0-1 slow"}}


def _old_snapshot() -> dict:
    """A snapshot as gputopo wrote it before reading notes: the notes only in words."""
    data = load_reference("two-socket-4gpu").to_dict()
    data.pop("reading_notes")
    data["diagnostics"] = [
        {"severity": "info", "code": VM_EVIDENCE, "message": "line 1 of vm.txt says 'Hypervisor vendor: KVM'", "gpus": []},
        {"severity": "info", "code": "repaired-paste", "message": "vm.txt: the paste was damaged; ...", "gpus": []},
        {"severity": "info", "code": SOC_BETWEEN_SOCKETS, "message": "the matrix says SOC ...", "gpus": []},
    ]
    data["tf"] = {"devices": [{"ordinal": 0}], "peer": [[True]],
                  "notes": [{"severity": "info", "code": "tf-log-cut", "message": "x.log is cut short in 1 place", "gpus": []}]}
    return data


def test_an_older_snapshots_worded_notes_are_read_back_as_notes():
    old = _old_snapshot()
    topology = Topology.from_dict(old)
    assert [f.code for f in topology.diagnostics] == [VM_EVIDENCE, "repaired-paste", SOC_BETWEEN_SOCKETS]  # as they were
    # The two analysis reads as facts come back as notes carrying their words; the rest stay findings.
    assert [(n.code, n.facts[WORDED]["message"]) for n in topology.reading_notes] == [
        (VM_EVIDENCE, "line 1 of vm.txt says 'Hypervisor vendor: KVM'"), (SOC_BETWEEN_SOCKETS, "the matrix says SOC ...")]
    (tf_note,) = topology.tf.reading_notes
    assert tf_note.code == "tf-log-cut" and tf_note.facts[WORDED]["message"] == "x.log is cut short in 1 place"
    assert old == _old_snapshot()  # the JSON given is not changed


def test_a_snapshot_with_reading_notes_is_not_upgraded():
    data = _old_snapshot()
    data["reading_notes"] = []
    data["tf"]["reading_notes"] = []
    assert upgrade_legacy(data) is data
    topology = Topology.from_dict(data)
    assert topology.reading_notes == [] and topology.tf.reading_notes == []


def test_an_older_snapshots_damaged_tf_note_is_named():
    data = _old_snapshot()
    data["tf"]["notes"][0].pop("message")
    with pytest.raises(ValueError, match=r"tf\.notes\[0\]\.message: missing"):
        Topology.from_dict(data)
