"""`gputopo doctor --from` on every real paste of tests/fixtures/corpus/doctor_pastes/ (SOURCES.md
says where each came from; EXPECTED.json what an expert concludes from the paste alone): the cause
each conclusion names is a finding (a code per cause), a healthy paste gets no warning or error, every
check of a live run is listed (made or not), and the same conclusion comes from each paste dressed
the ways tickets dress it (CRLF, tabs for spaces, shell prompts, markdown fences and bold, a host
prefix on every line, long lines cut). Files doctor does not read right yet are listed in
tests/fixtures/corpus/KNOWN_GAPS.md (section doctor_pastes) and run as strict xfails."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, corpus_known_gaps

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.checks_not_made import CHECKS
from gputopo.sources.doctor_input import evidence_from_files

CORPUS = OWN_FIXTURES / "corpus" / "doctor_pastes"
EXPECTED = json.loads((CORPUS / "EXPECTED.json").read_text())
NAMES = sorted(EXPECTED)
GAPS = corpus_known_gaps()

# The findings that say each cause of EXPECTED.json (any one of them, any severity).
CAUSE_CODES = {
    "acs-redirect": {"acs-redirect"},
    "fabric-manager": {"fabric-not-ready"},
    "fabric-unhealthy": {"fabric-degraded"},
    "gdr-disabled": {"gdr-disabled", "nvidia-peermem-missing"},
    "gpu-lost": {"gpu-fallen-off-bus", "xid-79"},
    "iommu": {"iommu-translating", "iommu-fault"},  # the IOMMU translates (or faults on) GPU DMA
    "nvlink-inactive": {"nvlink-inactive"},
    "nvlink-xid": {"xid-145", "xid-149"},  # Blackwell NVLink errors (RLW, NETIR), or an Xid that names them
    "p2p-not-supported": {"p2p-ns", "p2p-gns", "p2p-cns", "p2p-tns", "nccl-p2p-refused",
                          "cuda-peer-access-unsupported", "cuda-peer-access-no"},
    "p2p-off-by-setting": {"env-nccl-p2p-disable", "env-nccl-p2p-level", "nccl-p2p-off-by-setting"},
    "p2p-topology-limited": {"cuda-peer-access-no", "p2p-ns", "p2p-cns"},
    "pcie-aer": {"pcie-aer-corrected", "pcie-aer-uncorrected", "pcie-aer-not-recovered", "pcie-errors-logged"},
    "pcie-link": {"pcie-link-narrow", "pcie-link-slow", "pcie-link-limited"},
    "shm-too-small": {"shm-too-small"},
    "too-many-peers": {"cuda-too-many-peers"},
    "xid-memory": {"xid-48", "xid-63", "xid-64", "xid-92", "xid-94", "xid-95"},  # GPU memory (ECC, remapping) Xids
}
LINE_CUT = 200  # a wide terminal or a ticket's code box


def _lines(text: str) -> list[str]:
    return text.split("\n")


DRESSINGS = {
    "as pasted": lambda t: t,
    "CRLF": lambda t: t.replace("\n", "\r\n"),
    "tabs for spaces": lambda t: t.replace("    ", "\t"),
    "spaces for tabs": lambda t: t.replace("\t", "    "),
    "shell prompt": lambda t: "\n".join(("$ " + line) if line.strip() else line for line in _lines(t)),
    "root prompt": lambda t: "\n".join(("# " + line) if line.strip() else line for line in _lines(t)),
    "markdown fence": lambda t: "```text\n" + t.rstrip("\n") + "\n```\n",
    "markdown bold": lambda t: "\n".join(f"**{line}**" if line.strip() else line for line in _lines(t)),
    "host prefix": lambda t: "\n".join(("node-7: " + line) if line.strip() else line for line in _lines(t)),
    "lines cut": lambda t: "\n".join(line[:LINE_CUT] for line in _lines(t)),
}


def _report(path: Path):
    with evidence_from_files([str(path)]) as evidence:
        return doctor(evidence)


def _verdict(report, expected: dict) -> list[str]:
    """What is wrong with ``report`` for this expectation (empty: right)."""
    cause = expected["cause"]
    wrong = []
    if cause == "healthy":
        loud = [f"{f.severity} {f.code}" for f in report.findings if f.severity in ("warning", "error", "fatal")]
        if loud:
            wrong.append(f"healthy, yet {loud}")
    else:
        codes = {f.code for f in report.findings}
        # An Xid logged as the aftermath of another ("Xid 45 ... caused by previous Xid 149") says that
        # cause in its finding ("caused (the driver says) by earlier Xids 145 and 149: ..."): the Xids it names.
        codes |= {f"xid-{n}" for f in report.findings if f.code.startswith("xid-") and " caused " in f.message
                  for n in re.findall(r"\b\d+\b", f.message.split(" caused ", 1)[1].split(":", 1)[0])}
        if not codes & CAUSE_CODES[cause]:
            wrong.append(f"{cause}: none of {sorted(CAUSE_CODES[cause])} among {sorted(codes)}")
    if not any(c.name.startswith("recognise") and c.status == "ok" for c in report.checks):
        wrong.append("nothing recognised")
    return wrong


def _case(name: str, dressing: str):
    key = name if dressing == "as pasted" else f"{name} [{dressing}]"
    gap = GAPS.get(key) or GAPS.get(name)
    marks = [pytest.mark.xfail(strict=True, reason=gap)] if gap else []
    return pytest.param(name, dressing, id=key, marks=marks)


@pytest.mark.parametrize(("name", "dressing"), [_case(n, d) for n in NAMES for d in DRESSINGS])
def test_doctor_concludes_as_the_expert(name, dressing, tmp_path):
    text = (CORPUS / name).read_text(encoding="utf-8")
    path = tmp_path / name
    path.write_bytes(DRESSINGS[dressing](text).encode("utf-8"))
    report = _report(path)
    assert _verdict(report, EXPECTED[name]) == []


@pytest.mark.parametrize("name", NAMES)
def test_every_check_is_listed_made_or_not(name):
    report = _report(CORPUS / name)
    made = {re.sub(r"[-_ ]+", " ", c.name.lower()) for c in report.checks}
    codes = {f.code for f in report.findings}
    for check, families, _ in CHECKS:
        listed = any(m.startswith(check.replace("-", " ")) for m in made)
        assert listed or any(c.startswith(families) for c in codes) or (check == "p2p-status" and any(
            c.name.startswith("recognise") and "scan --from" in (c.detail or "") for c in report.checks)), check
    assert not [c for c in report.checks if c.status == "not-made" and not c.detail], "a not-made row says why"


def test_every_expected_file_is_there_and_every_file_expected():
    assert sorted(p.name for p in CORPUS.glob("*.txt")) == NAMES
    assert {e["cause"] for e in EXPECTED.values()} <= set(CAUSE_CODES) | {"healthy"}


def test_known_gaps_name_files_of_this_corpus():
    ours = [k for k in GAPS if k.split(" [")[0] in EXPECTED]
    assert all(k.split(" [")[0] in EXPECTED for k in ours)


@pytest.mark.parametrize("name", ["nccl1510_node1_exports_ib_gid_index_roce.txt", "nvtop6_gtx1080ti_idle_gen1_x16.txt"])
def test_scan_names_doctor_for_a_health_only_paste(name):
    from gputopo.errors import InputError
    from gputopo.sources.registry import read_text

    with pytest.raises(InputError, match=r"health evidence .*`gputopo doctor --from "):
        read_text((CORPUS / name).read_text(), name)


def test_an_nvtop_paste_names_the_query_that_shows_the_link_it_can_do():
    """Review 3: nvtop's header got "add pcie.link.gen.max,... to the query", but nvtop has no query."""
    check = next(c for c in _report(CORPUS / "nvtop6_gtx1080ti_idle_gen1_x16.txt").checks if c.name == "pcie-links")
    assert "to the query" not in check.detail and "nvtop shows only the current link" in check.detail
    assert "pcie.link.width.max --format=csv" in check.detail
    csv = next(c for c in _report(CORPUS / "smi_csv_egpu_gtx1060_p8_gen1_x4_thunderbolt.txt").checks
               if c.name == "pcie-links")
    assert "add pcie.link.gen.max,pcie.link.width.max to the query" in csv.detail
