"""virtual-machine in one wording (gputopo/analysis/causes/vm.py), from a topology or the host: what
it says with one GPU in the guest and with several."""

from __future__ import annotations

from conftest import REPO
from doctor_trees import two_gpus_under_root_ports

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.vm import virtual_machine
from gputopo.sources.doctor_input import evidence_from_files, evidence_of_host


def test_one_gpu_is_said_as_no_peer_to_peer_whoever_saw_the_vm():
    for from_topology in (True, False):
        finding = virtual_machine("KVM", [0], one_gpu=True, from_topology=from_topology)
        assert finding.code == "virtual-machine" and finding.severity == "info"
        assert "one GPU" in finding.message and "KVM" in finding.message


def test_several_gpus_send_the_user_to_the_provider():
    host = virtual_machine("Amazon EC2", [], one_gpu=False, from_topology=False, evidence=["/proc/cpuinfo: hypervisor flag"])
    assert "provider" in host.fix and host.evidence == ["/proc/cpuinfo: hypervisor flag"]
    seen = virtual_machine("all GPUs on one flat bus", [0, 1], one_gpu=False, from_topology=True)
    assert seen.gpus == [0, 1] and "bench-p2p" in seen.fix


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
