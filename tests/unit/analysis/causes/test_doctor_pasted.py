"""Pasted evidence judged (gputopo/analysis/causes/doctor_pasted.py): whether the IOMMU translates, from what
the kernel says it did before what the command line asked; a link that never trained is no narrow link."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES
from doctor_trees import capture

from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted

TRANSLATED = "[    0.163549] iommu: Default domain type: Translated\n"
AT_WORK = "[    0.281000] DMAR: IOMMU enabled\n"
CMDLINE_ON = "[    0.000000] Command line: BOOT_IMAGE=/vmlinuz ro intel_iommu=on\n"


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def _iommu(report):
    return ([f.code for f in report.findings],
            [(c.name, c.status) for c in report.checks if c.name.startswith("iommu")])


@pytest.mark.parametrize(("text", "said"), [
    (TRANSLATED, ([], [("iommu (dmesg)", "not-made")])),  # printed with or without an IOMMU
    (TRANSLATED + AT_WORK, (["iommu-translating"], [])),
    (CMDLINE_ON, (["iommu-translating"], [])),
    (CMDLINE_ON + "[    0.640000] iommu: Default domain type: Passthrough\n", ([], [("iommu (dmesg)", "ok")])),
    ("[    0.000000] Command line: BOOT_IMAGE=/vmlinuz ro intel_iommu=on iommu.passthrough=0 iommu.passthrough=1\n",
     ([], [("iommu (cmdline)", "ok")])),
])
def test_what_the_kernel_did_decides_then_what_it_was_asked(text, said):
    assert _iommu(_report(text)) == said


def test_the_real_translated_default_without_an_iommu_at_work_is_not_called_translating():
    report = _report(capture("cmdline_and_dmesg_default_domain_translated_vm.txt"))
    (check,) = [c for c in report.checks if c.name.startswith("iommu")]
    assert report.findings == [] and check.status == "not-made" and "no IOMMU at work" in check.detail


def test_a_link_that_never_trained_is_said_as_a_check_not_judged():
    report = _report(capture("lspci_vvv_root_port_empty_slot_width_x0.txt"))
    assert report.findings == []
    (check,) = [c for c in report.checks if c.name.startswith("pcie link")]
    assert check.name == "pcie link 0000:00:1c.0" and check.status == "not-made" and "no link trained" in check.detail


def test_a_vm_without_an_iommu_prints_translated_too():
    """gputopo's own H200 Firecracker run: dmesg says `Default domain type: Translated`, while doctor on the
    same VM found /sys/kernel/iommu_groups empty (no IOMMU at all): the line alone proves no translation."""
    run = OWN_FIXTURES / "hardware" / "2026-11-26-h200-firecracker-run3"
    assert "no IOMMU groups: no IOMMU is active" in (run / "doctor.txt").read_text()
    report = _report((run / "dmesg.txt").read_text(), "dmesg.txt")
    assert [f.code for f in report.findings if f.severity != "info"] == []
    assert [(c.name, c.status) for c in report.checks if c.name.startswith("iommu")] == [("iommu (dmesg)", "not-made")]


def test_a_fragment_without_lnkcap_is_judged_by_lspcis_marks_and_unnamed():
    report = _report(capture("lspci_vvv_fragment_lnksta_5gt_x1_downgraded_no_header_geerling480.txt"))
    (narrow,) = [f for f in report.findings if f.code == "pcie-link-narrow"]
    assert narrow.severity == "warning" and "a device (not named in the paste) runs at x1 of its maximum" in narrow.message
    assert "LnkCap line with the maximum is not in the paste" in narrow.message and "xNone" not in narrow.message
    # The speed, downgraded too, is said apart: maybe idle (no performance state in an lspci paste).
    (slow,) = [f for f in report.findings if f.code == "pcie-link-slow-maybe-idle"]
    assert slow.severity == "info" and "runs at Gen2 of its maximum" in slow.message
    (check,) = [c for c in report.checks if c.name == "pcie-links"]
    assert check.status == "problem" and "without their LnkCap line" in check.detail


def test_links_read_at_their_maximum_make_the_check_instead_of_saying_none_were_pasted():
    """Every link of this paste is at its LnkCap: the check is made and ok, never 'no LnkCap/LnkSta lines'."""
    report = _report(capture("lspci_pp_vvv_amd_switch_downstream_port_acs_on.txt"))
    (check,) = [c for c in report.checks if c.name == "pcie-links"]
    assert check.status == "ok" and check.detail.startswith("3 link reading(s) (LnkSta")


def test_lnksta_without_lnkcap_or_marks_is_not_judged_and_cesta_link_errors_are_a_warning():
    report = _report(capture("lspci_vvv_diff_two_runs_lnksta_gen1_gen2_x1_no_lnkcap_geerling4.txt"))
    (check,) = [c for c in report.checks if c.name == "pcie-links"]
    assert check.status == "not-made" and "not what they can do" in check.detail
    assert not [f for f in report.findings if f.code.startswith("pcie-link")]
    (logged,) = report.findings
    assert (logged.severity, logged.code) == ("warning", "pcie-errors-logged")
    assert "devices the paste does not name (2 lines) has BadDLLP+, BadTLP+, Rollover+ and Timeout+ set" in logged.message
    named = _report("0000:01:00.0 VGA compatible controller: NVIDIA Corporation GA102\n"
                    "\t\tCESta:\tRxErr+ BadTLP- BadDLLP- Rollover- Timeout- AdvNonFatalErr-\n")
    assert "(CESta) of GPU 0000:01:00.0 has RxErr+ set" in named.findings[0].message


def test_a_link_held_down_at_boot_names_the_port_and_is_no_idle_guess():
    (limited,) = _report(capture("dmesg_pci_bandwidth_limited_gen3_slot_gen4_card_amdgputop33.txt")).findings
    assert (limited.severity, limited.code) == ("info", "pcie-link-limited")
    assert "0000:0b:00.0 held to Gen3 of its Gen4 by the PCIe link at 0000:00:03.1" in limited.message
    assert "idle" not in limited.message and "sudo lspci -vv -s 0000:00:03.1" in limited.fix
    (narrow,) = _report(capture("dmesg_boot_pci_bandwidth_limited_x1_of_x16_pi_vega_geerling712.txt")).findings
    assert narrow.code == "pcie-link-narrow" and "(limited at boot by the link at 0000:00:00.0) runs at x1 of x16" in narrow.message
