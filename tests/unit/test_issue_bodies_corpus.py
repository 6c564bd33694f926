"""Whole issue bodies of tests/fixtures/corpus/issue_bodies/ (SOURCES.md says where each came from;
EXPECTED.json what an expert concludes from the paste alone): several outputs in one paste, between
prose, prompts, markdown fences, ``<details>``/``<pre>`` blocks and bold labels. Each is read by
``doctor --from`` and ``scan --from`` as pasted and dressed as tickets dress it (CRLF, quote markers,
a fence, a prompt, an indent, bold or a host label on every line, tabs for spaces): doctor names the
expected cause (and none of the wrong ones), scan reads every part it knows and says "unknown" for
the rest, recommend picks the expected pair. Files not read right yet are listed in
tests/fixtures/corpus/KNOWN_GAPS.md (section issue_bodies) as strict xfails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, corpus_known_gaps

from gputopo.analysis.causes.doctor import doctor
from gputopo.errors import InputError
from gputopo.sources.doctor_input import evidence_from_files
from gputopo.sources.registry import read_text

CORPUS = OWN_FIXTURES / "corpus" / "issue_bodies"
EXPECTED = json.loads((CORPUS / "EXPECTED.json").read_text())
NAMES = sorted(EXPECTED)
GAPS = corpus_known_gaps()

# The findings that say each cause of EXPECTED.json (any one of them).
CAUSE_CODES = {
    "p2p-not-supported": {"p2p-ns", "p2p-gns", "p2p-cns", "p2p-tns", "nccl-p2p-refused",
                          "cuda-peer-access-unsupported", "cuda-peer-access-no"},
    "nccl-sysfs-path": {"nccl-sysfs-path"},
    "acs-redirect": {"acs-redirect"},
    "fabric-manager": {"fabric-not-ready"},
    "gdr-disabled": {"gdr-disabled", "nvidia-peermem-missing"},
    "p2p-off-by-setting": {"env-nccl-p2p-disable", "env-nccl-p2p-level", "nccl-p2p-off-by-setting"},
    "shm-too-small": {"shm-too-small"},
}
LOUD = ("warning", "error", "fatal")


def _lines(text: str) -> list[str]:
    return text.split("\n")


DRESSINGS = {
    "as pasted": lambda t: t,
    "CRLF": lambda t: t.replace("\n", "\r\n"),
    "quoted": lambda t: "\n".join(("> " + line) if line.strip() else ">" for line in _lines(t)),
    "fenced": lambda t: "```text\n" + t.rstrip("\n") + "\n```\n",
    "prompt": lambda t: "\n".join(("$ " + line) if line.strip() else line for line in _lines(t)),
    "nested quote": lambda t: "\n".join("> > " + line for line in _lines(t)),
    "indented": lambda t: "\n".join("    " + line for line in _lines(t)),  # a markdown code block by indent
    "tabs for spaces": lambda t: t.replace("    ", "\t"),
    "bold": lambda t: "\n".join(f"**{line}**" if line.strip() else line for line in _lines(t)),
    "host prefix": lambda t: "\n".join(("node-7: " + line) if line.strip() else line for line in _lines(t)),
}


def _case(name: str, dressing: str, reader: str):
    """A gap names a paste (``name``), one dressing of it (``name [dressing]``), or one of the two
    readings of it (``name (doctor)``, ``name (scan)``): scan may read right what doctor does not."""
    key = name if dressing == "as pasted" else f"{name} [{dressing}]"
    gap = GAPS.get(key) or GAPS.get(name) or GAPS.get(f"{name} ({reader})")
    marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
    return pytest.param(name, dressing, id=key, marks=marks)


DOCTOR_CASES = [_case(n, d, "doctor") for n in NAMES for d in DRESSINGS]
SCAN_CASES = [_case(n, d, "scan") for n in NAMES for d in DRESSINGS]


def _dressed(name: str, dressing: str, tmp_path: Path) -> Path:
    path = tmp_path / name
    path.write_bytes(DRESSINGS[dressing]((CORPUS / name).read_text(encoding="utf-8")).encode("utf-8"))
    return path


def doctor_verdict(path: Path, expected: dict) -> list[str]:
    """What is wrong with doctor's reading of ``path`` for this expectation (empty: right)."""
    try:
        with evidence_from_files([str(path)]) as evidence:
            report = doctor(evidence)
    except InputError as exc:  # only where the expert found nothing doctor reads
        return [] if expected.get("doctor_reads") is False else [f"refused: {exc}"]
    if expected.get("doctor_reads") is False:
        return ["read a paste that holds nothing doctor reads"]
    codes = {f.code for f in report.findings}
    wrong = [f"claims {sorted(codes & set(expected['must_not']))}"] if codes & set(expected["must_not"]) else []
    cause = expected["cause"]
    if cause == "healthy":
        loud = [f"{f.severity} {f.code}" for f in report.findings if f.severity in LOUD]
        wrong += [f"healthy, yet {loud}"] if loud else []
    elif cause != "unknown" and not codes & CAUSE_CODES[cause]:
        wrong.append(f"{cause}: none of {sorted(CAUSE_CODES[cause])} among {sorted(codes)}")
    return wrong


def _pair(key: str) -> tuple[int, int]:
    a, b = key.split("-")
    return int(a), int(b)


def scan_verdict(path: Path, expected: dict | None) -> list[str]:
    """What is wrong with scan's reading (empty: right). ``expected`` None: nothing to read (refused)."""
    text = path.read_bytes().decode("utf-8")
    try:
        topology = read_text(text, path.name)
    except InputError as exc:
        return [] if expected is None else [f"refused: {exc}"]
    if expected is None:
        return [f"read {len(topology.gpus)} GPUs from a paste without a topology"] if topology.gpus else []
    wrong = []
    count = len(topology.gpus)
    if "gpus" in expected and count != expected["gpus"]:
        wrong.append(f"{count} GPUs, expected {expected['gpus']}")
    if count < expected.get("gpus_at_least", 0):
        wrong.append(f"{count} GPUs, expected at least {expected['gpus_at_least']}")
    for key, word in expected.get("links", {}).items():
        link = topology.link(*_pair(key))
        if link is None or link.type != word:
            wrong.append(f"{key}: {link.type if link else None}, expected {word}")
    for key in expected.get("unknown_pairs", []):
        link = topology.link(*_pair(key))
        if link is not None and link.type != "UNKNOWN":
            wrong.append(f"{key}: {link.type}, which the paste does not show")
    for key, word in expected.get("p2p", {}).items():
        link = topology.link(*_pair(key))
        if link is None or (link.p2p_read or "").upper() != word:
            wrong.append(f"{key}: P2P {link.p2p_read if link else None}, expected {word}")
    for key, gbps in expected.get("measured", {}).items():
        link = topology.link(*_pair(key))
        if link is None or link.measured is None or link.measured.a_to_b_gbps != pytest.approx(gbps):
            wrong.append(f"{key}: measured {link.measured if link else None}, expected {gbps}")
    for index, node in expected.get("numa", {}).items():
        gpu = topology.gpu(int(index))
        if gpu is None or gpu.numa_node != node:
            wrong.append(f"GPU{index}: NUMA {gpu.numa_node if gpu else None}, expected {node}")
    for index, bus in expected.get("bus_ids", {}).items():
        gpu = topology.gpu(int(index))
        if gpu is None or gpu.pci_bus_id != bus:
            wrong.append(f"GPU{index}: bus {gpu.pci_bus_id if gpu else None}, expected {bus}")
    return wrong


@pytest.mark.parametrize(("name", "dressing"), DOCTOR_CASES)
def test_doctor_concludes_as_the_expert(name, dressing, tmp_path):
    assert doctor_verdict(_dressed(name, dressing, tmp_path), EXPECTED[name]) == []


@pytest.mark.parametrize(("name", "dressing"), SCAN_CASES)
def test_scan_reads_every_part_it_knows(name, dressing, tmp_path):
    assert scan_verdict(_dressed(name, dressing, tmp_path), EXPECTED[name]["scan"]) == []


@pytest.mark.parametrize("name", [n for n in NAMES if EXPECTED[n]["best2"]])
def test_recommend_picks_the_expected_pair(name, cli):
    result = cli("recommend", "--from", str(CORPUS / name), "--gpus", "2", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["groups"][0]["gpus"] in EXPECTED[name]["best2"]


def test_every_expected_file_is_there_and_every_file_expected():
    assert sorted(p.name for p in CORPUS.glob("*.txt")) == NAMES
    assert {e["cause"] for e in EXPECTED.values()} <= set(CAUSE_CODES) | {"healthy", "unknown"}
    assert all(f"| {name} |" in (CORPUS / "SOURCES.md").read_text() for name in NAMES)
