"""Snapshots across versions: one written before reading notes existed (the notes only in words, in
``diagnostics`` and ``tf.notes``) shows what a new one shows, and a new one keeps its notes in words
in ``diagnostics`` for older versions, which ignore ``reading_notes``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES

CORPUS = OWN_FIXTURES / "corpus"


def _as_older(data: dict) -> dict:
    """A snapshot as gputopo wrote it before reading notes: no ``reading_notes`` keys, and the TF
    view's notes as the findings they became."""
    data = {key: value for key, value in data.items() if key != "reading_notes"}
    if data.get("tf"):
        tf = {key: value for key, value in data["tf"].items() if key != "reading_notes"}
        codes = {note["code"] for note in data["tf"]["reading_notes"]}
        tf["notes"] = [finding for finding in data["diagnostics"] if finding["code"] in codes]
        data["tf"] = tf
    return data


def _without_notes(text: str) -> dict:
    data = json.loads(text)
    data.pop("reading_notes", None)
    if data.get("tf"):
        data["tf"].pop("reading_notes", None)
        data["tf"].pop("notes", None)
    return data


def _vm_paste(tmp_path: Path) -> list[str]:
    paste = tmp_path / "vm.txt"
    paste.write_text("Hypervisor vendor: KVM\n" + (CORPUS / "topo" / "dgx1_p100_8gpu_nv1_mangled_header_soc.txt").read_text())
    return ["--from", str(paste)]


def _cut_tf_log(tmp_path: Path) -> list[str]:
    return ["--machine", "dgx1", "--tf-log", str(OWN_FIXTURES / "tf_logs" / "broken_cut_lines_missing_rows.log")]


@pytest.mark.parametrize("source", [_vm_paste, _cut_tf_log], ids=["vm-paste", "cut-tf-log"])
def test_an_older_snapshot_shows_what_a_new_one_shows(cli, tmp_path, source):
    (tmp_path / "new").mkdir()
    (tmp_path / "old").mkdir()
    new, old = tmp_path / "new" / "snap.json", tmp_path / "old" / "snap.json"
    saved = cli("scan", *source(tmp_path), "--save", str(new))
    assert saved.exit_code == 0, saved.output
    data = json.loads(new.read_text())
    assert data["reading_notes"] or data["tf"]["reading_notes"]
    worded = {f["code"] for f in data["diagnostics"]}
    assert {n["code"] for n in data["reading_notes"] + (data["tf"] or {}).get("reading_notes", [])} <= worded
    old.write_text(json.dumps(_as_older(data)))
    for command in (["scan"], ["recommend", "--gpus", "2"], ["recommend", "--gpus", "2", "--json"]):
        shown = [cli(command[0], "--from", str(path), *command[1:]) for path in (new, old)]
        assert shown[0].exit_code == shown[1].exit_code == 0
        assert shown[0].stdout.replace("/new/", "/old/") == shown[1].stdout
    scans = [cli("scan", "--from", str(path), "--json").stdout.replace("/new/", "/old/") for path in (new, old)]
    assert _without_notes(scans[0]) == _without_notes(scans[1])


def test_a_vm_paste_saved_before_reading_notes_is_still_a_virtual_machine(cli, tmp_path):
    new = tmp_path / "snap.json"
    assert cli("scan", *_vm_paste(tmp_path), "--save", str(new)).exit_code == 0
    old = tmp_path / "old.json"
    old.write_text(json.dumps(_as_older(json.loads(new.read_text()))))
    data = json.loads(cli("scan", "--from", str(old), "--json").stdout)
    codes = [f["code"] for f in data["diagnostics"]]
    assert "virtual-machine" in codes and "vm-evidence" in codes and "cross-socket" not in codes
    assert [n["code"] for n in data["reading_notes"]] == ["vm-evidence", "soc-between-sockets"]  # read back from their words
