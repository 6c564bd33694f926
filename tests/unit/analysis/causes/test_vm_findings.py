"""virtual-machine in one wording (gputopo/analysis/causes/vm_findings.py), from a topology or the host."""

from __future__ import annotations

from gputopo.analysis.causes.vm_findings import virtual_machine


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
