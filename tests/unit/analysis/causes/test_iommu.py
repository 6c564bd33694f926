"""Whether the IOMMU translates (gputopo/analysis/causes/iommu.py): the mode a kernel command line sets,
what a pasted kernel log says the kernel did before what the command line asked, a GRUB config worded
as a configuration, and the IOMMU's DMA faults fixed with the vendor's own switch."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES
from doctor_trees import capture

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.iommu import cmdline_iommu, passthrough_or_off, switched_on
from gputopo.sources.doctor_input import evidence_from_files
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_an_amd_vi_page_fault_is_fixed_with_the_amd_switch_only():
    """The fault line names AMD-Vi: no `intel_iommu=off` in its fix."""
    (fault,) = [f for f in _report(capture("dmesg_amd_vi_io_page_fault_nvidia.txt")).findings if f.code == "iommu-fault"]
    assert "`amd_iommu=off`" in fault.fix and "intel_iommu" not in fault.fix and "iommu=pt" in fault.fix


@pytest.mark.parametrize(("cmdline", "said"), [
    ("BOOT_IMAGE=/vmlinuz root=/dev/sda1 intel_iommu=on iommu=pt", "passthrough"),
    ("intel_iommu=on iommu=pt iommu.passthrough=0", None),  # the later setting wins: translated
    ("iommu.passthrough=0 iommu=pt", "passthrough"),
    ("iommu=pt iommu=nopt", None),
    ("amd_iommu=on iommu=soft,pt", "passthrough"),  # x86 iommu= takes a comma list
    ("iommu.passthrough=Y", "passthrough"),  # kstrtobool: y, t, 1, on
    ("iommu.passthrough=on", "passthrough"),
    ("iommu.passthrough=off intel_iommu=on", None),
    ("iommu.passthrough=maybe", None),  # refused by the kernel: the default stays
    ("intel_iommu=off", "off"),
    ("amd_iommu=off,fullflush", "off"),
    ("amd_iommu=off iommu=pt", "off"),  # off whatever the default domain (aikitoria#12's words)
    ("iommu=off", "off"),
    ("quiet splash", None),
    (None, None),
])
def test_passthrough_is_what_the_last_setting_says(cmdline, said):
    assert passthrough_or_off(cmdline) == said


def test_a_vendor_option_list_with_on_switches_the_iommu_on():
    assert switched_on(cmdline_iommu("intel_iommu=on,sm_on"))
    assert not switched_on(cmdline_iommu("intel_iommu=sm_off"))
    assert not switched_on(cmdline_iommu("iommu=pt"))


def test_doctor_warns_where_a_later_setting_undoes_iommu_pt(tmp_path):
    paste = tmp_path / "cmdline.txt"
    paste.write_text("BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=UUID=1 ro intel_iommu=on iommu=pt iommu.passthrough=0\n")
    with evidence_from_files([str(paste)]) as evidence:
        assert "iommu-translating" in [f.code for f in doctor(evidence).findings]
    paste.write_text("BOOT_IMAGE=/boot/vmlinuz-6.8.0 root=UUID=1 ro intel_iommu=on iommu.passthrough=0 iommu=pt\n")
    with evidence_from_files([str(paste)]) as evidence:
        assert "iommu-translating" not in [f.code for f in doctor(evidence).findings]


TRANSLATED = "[    0.163549] iommu: Default domain type: Translated\n"


AT_WORK = "[    0.281000] DMAR: IOMMU enabled\n"


CMDLINE_ON = "[    0.000000] Command line: BOOT_IMAGE=/vmlinuz ro intel_iommu=on\n"


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


def test_a_vm_without_an_iommu_prints_translated_too():
    """gputopo's own H200 Firecracker run: dmesg says `Default domain type: Translated`, while doctor on the
    same VM found /sys/kernel/iommu_groups empty (no IOMMU at all): the line alone proves no translation."""
    run = OWN_FIXTURES / "hardware" / "2026-11-26-h200-firecracker-run3"
    assert "no IOMMU groups: no IOMMU is active" in (run / "doctor.txt").read_text()
    report = _report((run / "dmesg.txt").read_text(), "dmesg.txt")
    assert [f.code for f in report.findings if f.severity != "info"] == []
    assert [(c.name, c.status) for c in report.checks if c.name.startswith("iommu")] == [("iommu (dmesg)", "not-made")]


def test_grub_iommu_pt_is_quiet_and_on_without_pt_warns_as_configuration():
    report = _report('GRUB_CMDLINE_LINUX_DEFAULT="amd_iommu=on iommu=pt"')
    assert report.findings == [] and any(c.name == "iommu (GRUB config)" and c.status == "ok" for c in report.checks)
    (finding,) = _report('GRUB_CMDLINE_LINUX="intel_iommu=on"').findings
    assert finding.code == "iommu-translating" and "/proc/cmdline" in finding.message
