"""One judgement whichever door the paste came in by (issue 30): for every fixture that both
`scan --from` and `doctor --from` read, every finding scan makes of the machine (its code and the
GPUs it names) is among doctor's. (How a reader read the paste, its reading notes, may differ:
doctor strips a ticket's dressing before reading, so it repairs less.) doctor says more (the checks of health evidence); it never says less, or
otherwise, of what scan reads."""

from __future__ import annotations

import json

import pytest
from conftest import OWN_FIXTURES

CORPUS = OWN_FIXTURES / "corpus"
FILES = sorted(p for folder in ("topo", "topo_p2p", "p2pbw", "nvbandwidth", "nccl_log", "nccl_tests", "nccl_xml",
                                "nvlink", "smi_q", "doctor_pastes")
               for p in (CORPUS / folder).glob("*")
               if p.name not in ("SOURCES.md", "EXPECTED.md", "EXPECTED.json") and p.is_file()) + \
    sorted(p for p in (OWN_FIXTURES / "doctor").rglob("*.txt") if p.is_file())


@pytest.mark.parametrize("path", FILES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_doctor_says_every_finding_scan_makes_of_the_same_paste(cli, path):
    scan = cli("scan", "--from", str(path), "--json")
    doctor = cli("doctor", "--from", str(path), "--json")
    if scan.exit_code != 0 or doctor.exit_code not in (0, 1):
        pytest.skip(f"not read by both (scan {scan.exit_code}, doctor {doctor.exit_code})")
    from gputopo.analysis.notes.reading_notes import _WORDINGS

    scanned = {(f["code"], tuple(f["gpus"])) for f in json.loads(scan.output)["diagnostics"] if f["code"] not in _WORDINGS}
    doctored = {(f["code"], tuple(f["gpus"])) for f in json.loads(doctor.output)["findings"]}
    assert scanned <= doctored, sorted(scanned - doctored)


def test_most_fixtures_are_read_by_both(cli):
    """The comparison above is no vacuous pass: most fixtures reach it."""
    both = sum(cli("scan", "--from", str(p), "--json").exit_code == 0 for p in FILES[::5])
    assert both >= len(FILES[::5]) // 2
