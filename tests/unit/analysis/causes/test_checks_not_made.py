"""The check list for pastes (gputopo/analysis/causes/checks_not_made.py): each check no paste
made is listed with what would make it; a live host gets no such rows."""

from __future__ import annotations

from gputopo.analysis.causes.checks_not_made import CHECKS
from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted

DMESG = "[    5.1] NVRM: Xid (PCI:0000:41:00): 79, pid=1, GPU has fallen off the bus."


def test_a_dmesg_paste_lists_acs_links_nvlink_and_fabric_as_not_made():
    report = doctor(HealthEvidence(source="dmesg.txt", pasted=[("dmesg.txt", parse_pasted(DMESG))]))
    status = {c.name: (c.status, c.detail) for c in report.checks}
    for name in ("acs", "pcie-links", "nvlink", "nvswitch-fabric", "environment", "dev-shm"):
        assert status[name][0] == "not-made" and status[name][1].startswith("no "), name
    assert status["acs"][1].startswith("no lspci -vvv")


def test_a_live_host_gets_no_paste_rows():
    assert {name for name, _, _ in CHECKS} >= {"acs", "iommu"}
    report = doctor(HealthEvidence(source="this host", root="/nonexistent"))
    assert not [c for c in report.checks if c.name == "kernel-log"]
