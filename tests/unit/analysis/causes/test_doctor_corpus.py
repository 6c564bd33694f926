"""`gputopo doctor` on the real pasted captures of tests/fixtures/doctor/ (SOURCES.md says where each
came from; EXPECTED.json what an expert concludes, written before gputopo was run on the file): each
conclusion checked fact by fact, no finding naming a device the paste does not show, and the same
conclusions from every capture pasted the ways pastes are mangled (quoted, indented, CRLF ...)."""

from __future__ import annotations

import json
import re

import pytest
from doctor_trees import DOCTOR_FIXTURES, capture

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.xid_aer import APPLICATION_XIDS, NVLINK_XIDS
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted

EXPECTED = json.loads((DOCTOR_FIXTURES / "EXPECTED.json").read_text())
NAMES = sorted(EXPECTED)
KIND_READ = {
    "lspci-vvv": "lspci -vvv", "lspci-tv": "lspci -tv", "dmesg": "dmesg", "cmdline": "/proc/cmdline",
    "setpci-acs": "setpci ECAP_ACS", "nvidia-smi nvlink -s": "nvidia-smi nvlink -s",
    "nvidia-smi nvlink -e": "nvidia-smi nvlink -e", "nvidia-smi -q": "nvidia-smi -q",
}
# A PCI address as a finding writes it (with or without domain and function).
BDF_IN_TEXT = re.compile(r"\b(?:[0-9a-f]{4}:)?[0-9a-f]{2}:[0-9a-f]{2}(?:\.[0-7])?\b")


def _lines(text: str) -> list[str]:
    return text.split("\n")


MANGLINGS = {
    "CRLF": lambda t: t.replace("\n", "\r\n"),
    "trailing spaces": lambda t: "\n".join(line + "   " if line else line for line in _lines(t)),
    "markdown quote": lambda t: "\n".join(("> " + line) if line.strip() else ">" for line in _lines(t)),
    "code block indent": lambda t: "\n".join("    " + line for line in _lines(t)),
    "tabs for indentation": lambda t: "\n".join(re.sub(r"^((?:    )+)", lambda m: "\t" * (len(m.group(1)) // 4), line)
                                                for line in _lines(t)),
}


def _judge(text: str, name: str):
    parsed = parse_pasted(text)
    return parsed, doctor(HealthEvidence(source=name, pasted=[(name, parsed)]))


def _found(report, code: str, severity: str | None = None):
    return [f for f in report.findings if f.code == code and (severity is None or f.severity == severity)]


def _codes(report, severity: str) -> list[str]:
    return [f.code for f in report.findings if f.severity == severity]


def _check_acs(expected: dict, report) -> None:
    acs = _found(report, "acs-redirect")
    if "acs_redirect_on" in expected:
        assert sorted(f.fix.split("setpci -s ")[1].split()[0] for f in acs) == expected["acs_redirect_on"]
    if "acs_redirect_on_count" in expected:
        assert len(acs) == 1 and f"at {expected['acs_redirect_on_count']} device(s)" in acs[0].message


def _check_links(expected: dict, report) -> None:
    narrow = _found(report, "pcie-link-narrow")
    if isinstance(expected.get("downtrained"), dict):
        assert sorted(f.message.split()[4] for f in narrow) == sorted(expected["downtrained"])
    if expected.get("downtrained") == []:
        assert narrow == []
    if "downtrained_unnamed" in expected:
        assert len([f for f in narrow if "not named" in f.message]) == expected["downtrained_unnamed"]
    if "slow_unnamed" in expected:
        slow = _found(report, "pcie-link-slow-maybe-idle", "info")
        assert len([f for f in slow if "not named" in f.message]) == expected["slow_unnamed"]


def _check_links_made(expected: dict, report) -> None:
    if "pcie_links_check" in expected:
        (check,) = [c for c in report.checks if c.name == "pcie-links"]
        assert check.status == expected["pcie_links_check"], check
    for bdf, limit in expected.get("link_limited", {}).items():  # the kernel's boot-time bandwidth line
        code, severity = ("pcie-link-narrow", "warning") if limit["by"] == "width" else ("pcie-link-limited", "info")
        (one,) = _found(report, code, severity)
        assert bdf in one.message and limit["at"] in one.message
    if "link_errors_logged" in expected:  # CESta with link error bits set: a warning per device (or the unnamed)
        assert len(_found(report, "pcie-errors-logged", "warning")) == expected["link_errors_logged"]


def _check_kernel_log(expected: dict, report) -> None:
    if "iommu_faults" in expected:
        (fault,) = _found(report, "iommu-fault", "error")
        assert f"{sum(expected['iommu_faults'].values())} DMA" in fault.message
        assert all(bdf in fault.message for bdf in expected["iommu_faults"])
    if "fallen_off_bus" in expected:
        assert [f.message.split()[1] for f in _found(report, "gpu-fallen-off-bus", "error")] == expected["fallen_off_bus"]
    xids = [f for f in report.findings if f.code.startswith("xid-")]
    causes = expected.get("caused_by", {})
    for pci, counts in expected.get("xids", {}).items():
        for code, times in counts.items():
            # One finding per Xid and class of cause names every GPU that logged it, with its count.
            (one,) = [f for f in xids if f.code == f"xid-{code}" and pci in f.message]
            # an application's Xid (13, 31, 43) with no cause the driver names is a warning of the job
            alone_of_the_job = int(code) in APPLICATION_XIDS and pci not in causes
            assert one.severity == ("warning" if alone_of_the_job else "error")
            assert (f"{pci} ({times} times)" in one.message) is (times > 1)
            cause = causes.get(pci)
            assert (cause is not None) is ("earlier Xid" in one.message)
            assert cause is None or re.search(rf"earlier Xids? [^:]*\b{cause}\b", one.message)
    if "xids" in expected:
        classes = {(code, "nvlink" if causes.get(pci) in NVLINK_XIDS else causes.get(pci))
                   for pci, counts in expected["xids"].items() for code in counts}
        assert len(xids) == len(classes)
    for code, times in expected.get("xids_unnamed", {}).items():
        # A line whose address the poster blanked out (``PCI:...``) names no GPU: said so, never as an address.
        # An Xid the expert reads as one event with another (``xid_events``) is said in that Xid's finding.
        event = expected.get("xid_events", {}).get(code)
        (one,) = [f for f in xids if f.code == f"xid-{event or code}"]
        assert event is None or f"and Xid {code} for" in one.message
        assert "a GPU whose PCI address the paste does not show" in one.message and "PCI ..." not in one.message
        assert (f"({times} times)" in one.message) is (times > 1)
    if "aer_uncorrected" in expected:
        uncorrected = _found(report, "pcie-aer-uncorrected", "error")
        assert sorted(f.message.split()[2] for f in uncorrected) == expected["aer_uncorrected"]
    for bdf, count in expected.get("aer_corrected", {}).items():
        (corrected,) = [f for f in _found(report, "pcie-aer-corrected", "warning") if bdf in f.message]
        assert f"logged {count} corrected" in corrected.message
    for bdf in expected.get("aer_not_recovered", []):
        assert any(bdf in f.message and "could not recover" in f.message for f in report.findings if f.severity == "error")


def _check_iommu(expected: dict, parsed, report) -> None:
    if "default_domain" in expected:
        assert parsed.default_domain[0] == expected["default_domain"]
    if "iommu_mode" not in expected:
        return
    passthrough = [c for c in report.checks if c.name.startswith("iommu") and c.status == "ok"]
    if expected["iommu_mode"] == "passthrough":
        assert passthrough and "passthrough" in passthrough[0].detail
        assert not _found(report, "iommu-translating")
    elif expected["iommu_mode"] is None:
        assert not passthrough and not _found(report, "iommu-translating")
        assert any(c.name.startswith("iommu") and c.status == "not-made" for c in report.checks)


def _check_smi(expected: dict, report) -> None:
    if "inactive_links" in expected:
        ((gpu, links),) = expected["inactive_links"].items()
        (inactive,) = _found(report, "nvlink-inactive")
        assert inactive.gpus == [int(gpu)] and f"{'link' if len(links) == 1 else 'links'} {', '.join(map(str, links))} <inactive>" in inactive.message
    for gpu, links in expected.get("nvlink_errors", {}).items():
        (erring,) = [f for f in _found(report, "nvlink-errors", "warning") if f.gpus == [int(gpu)]]
        for link, counters in links.items():
            assert f"link {link}: " in erring.message
            assert all(f"{name} {count}" in erring.message for name, count in counters.items())
    if "nvlink_errors" in expected:
        assert len(_found(report, "nvlink-errors")) == len(expected["nvlink_errors"])
    state = expected.get("fabric_state")
    if state is not None and state != "Completed":
        (ready,) = _found(report, "fabric-not-ready", "error")
        assert f"State {state}" in ready.message and "802" in ready.message
    if state == "Completed" and expected.get("fabric_status", "Success") != "Success":
        # Registration ran and the fabric refused the GPU: an error naming the status, no "start Fabric Manager".
        (refused,) = _found(report, "fabric-not-ready", "error")
        assert f"Status {expected['fabric_status']}" in refused.message and "with an error" in refused.message
        assert "systemctl enable" not in refused.fix
        return
    if state == "Completed":
        assert not _found(report, "fabric-not-ready")
        summary = expected.get("fabric_health_summary")
        degraded = _found(report, "fabric-degraded", "warning")
        assert (len(degraded) == 1 and summary in degraded[0].message) if summary not in (None, "Healthy") else not degraded


@pytest.mark.parametrize("name", NAMES)
def test_real_pasted_captures_match_the_expert(name):
    expected = EXPECTED[name]
    parsed, report = _judge(capture(name), name)
    assert KIND_READ[expected["kind"]] in parsed.kinds, f"{name} is not read as {expected['kind']}: {parsed.kinds}"
    if expected.get("acs_redirect_on") == [] or expected["kind"] in ("lspci-tv", "cmdline") or expected.get(
            "iommu_mode") == "passthrough" or expected.get("downtrained") == [] and "acs_redirect_on" not in expected:
        assert _codes(report, "error") == [] and _codes(report, "warning") == []
    _check_acs(expected, report)
    _check_links(expected, report)
    _check_links_made(expected, report)
    _check_kernel_log(expected, report)
    _check_iommu(expected, parsed, report)
    _check_smi(expected, report)


@pytest.mark.parametrize("name", NAMES)
def test_no_finding_names_a_device_the_paste_does_not_show(name):
    text = capture(name).lower()
    _, report = _judge(capture(name), name)
    for finding in report.findings:
        for token in BDF_IN_TEXT.findall(f"{finding.message} {finding.fix or ''}".lower()):
            short = token.split(":", 1)[1] if token.count(":") == 2 else token
            assert short in text, (finding.code, token)


def _conclusions(report) -> tuple:
    return (sorted((f.severity, f.code, f.message, tuple(f.gpus)) for f in report.findings),
            sorted((c.name, c.status) for c in report.checks if not c.name.startswith("recognise")))


@pytest.mark.parametrize("mangling", sorted(MANGLINGS))
@pytest.mark.parametrize("name", NAMES)
def test_a_mangled_paste_is_judged_the_same(name, mangling):
    text = capture(name)
    _, before = _judge(text, name)
    parsed, after = _judge(MANGLINGS[mangling](text), name)
    assert parsed.kinds, (name, mangling)
    assert _conclusions(after) == _conclusions(before), (name, mangling)
