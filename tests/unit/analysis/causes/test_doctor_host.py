"""Doctor's host checks (gputopo/analysis/causes/doctor_host.py): what the virtual-machine finding says with
one GPU in the guest and with several; the IOMMU mode a kernel command line sets."""

from __future__ import annotations

import pytest
from conftest import REPO
from doctor_trees import two_gpus_under_root_ports

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.doctor_host import cmdline_iommu, passthrough_or_off, switched_on
from gputopo.sources.doctor_input import evidence_from_files, evidence_of_host

H200 = REPO / "tests/fixtures/hardware/2026-11-26-h200-firecracker-run2"


def _vm_finding(report):
    [finding] = [f for f in report.findings if f.code == "virtual-machine"]
    return finding


def test_a_vm_with_one_gpu_says_no_peer_to_peer_happens_inside_it():
    """The real archive of a one-GPU H200 microVM: warning about P2P there would be untrue."""
    with evidence_from_files([str(H200 / "gather.tar.gz")]) as evidence:
        finding = _vm_finding(doctor(evidence))
    assert finding.severity == "info"
    assert "with one GPU: no GPU peer-to-peer happens inside it" in finding.message
    assert "P2P may be blocked" not in finding.message
    assert finding.evidence == ["/proc/cpuinfo: hypervisor flag"]


def test_a_vm_with_two_gpus_says_p2p_may_be_blocked_for_reasons_only_the_host_shows(tmp_path):
    host = two_gpus_under_root_ports(tmp_path, acs=0)
    host.proc("cpuinfo", "processor\t: 0\nflags\t\t: fpu vme hypervisor sse\n")
    finding = _vm_finding(doctor(evidence_of_host(str(tmp_path), env={})))
    assert "P2P may be blocked or slow for reasons only the host shows" in finding.message
    assert "with one GPU" not in finding.message


# --- the kernel command line: iommu=pt and friends, in the order the kernel reads them ------------



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
