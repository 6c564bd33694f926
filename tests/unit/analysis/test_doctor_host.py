"""Doctor's host checks (gputopo/analysis/doctor_host.py): here, what the virtual-machine finding says
with one GPU in the guest and with several."""

from __future__ import annotations

from conftest import REPO
from doctor_trees import two_gpus_under_root_ports

from gputopo.analysis.doctor import doctor
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
