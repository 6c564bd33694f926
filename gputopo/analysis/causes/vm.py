"""``virtual-machine``: a guest's GPUs, in one wording whoever saw the VM: nvidia-smi's flat virtual
PCI topology (``scan``: the ``vm-evidence`` notes, worded by ``virtual_machine``) or the host's DMI /
hypervisor flag (``doctor``: ``check_host``). With one GPU no peer-to-peer happens inside the guest,
so the finding says so instead."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.model import Finding

if TYPE_CHECKING:  # (scan's findings import this module: no doctor evidence readers at its start-up)
    from gputopo.analysis.causes.doctor_report import DoctorReport
    from gputopo.sources.host.host_health import HostHealth

def virtual_machine(what: str, gpus: list[int], *, one_gpu: bool, from_topology: bool,
                    evidence: list[str] | None = None) -> Finding:
    """``what``: the evidence in words (``Amazon EC2 g5.12xlarge``, the hypervisor's PCI layout)."""
    if from_topology and one_gpu:
        message = f"this looks like a virtual machine ({what}) with one GPU: no GPU-to-GPU path is involved"
        fix = None
    elif from_topology:
        message = ("this looks like a virtual machine: nvidia-smi shows the hypervisor's virtual PCI topology, "
                   f"not the host's ({what}); which GPUs share a PCIe switch or a NUMA node on the host is not known")
        fix = "measure how fast the GPUs really copy to each other (`gputopo bench-p2p`); ask the provider for the host's topology"
    elif one_gpu:
        message = (f"This is a virtual machine ({what}) with one GPU: no GPU peer-to-peer happens inside it. "
                   "The PCIe tree, NUMA nodes and ACS seen here are the hypervisor's.")
        fix = ("nothing for one GPU; for an instance with several GPUs, ask the provider whether GPU "
               "peer-to-peer is enabled for that instance type")
    else:
        message = (f"This is a virtual machine ({what}): the PCIe tree, NUMA nodes and ACS seen here are the "
                   "hypervisor's; P2P may be blocked or slow for reasons only the host shows.")
        fix = "ask the provider whether GPU peer-to-peer is enabled for this instance type"
    return Finding("info", "virtual-machine", message, gpus=gpus, fix=fix, evidence=list(evidence or []))


def check_host(host: HostHealth, gpus_seen: int, report: DoctorReport) -> None:
    """A VM: what the guest sees of PCIe, NUMA and ACS is the hypervisor's. With one GPU in the guest
    no peer-to-peer happens inside it, so the finding says so instead of warning about P2P (a real
    one-GPU H200 microVM, tests/hardware/README.md)."""
    if host.is_vm:
        what = " ".join(x for x in (host.dmi_vendor, host.dmi_product) if x) or "the CPU's hypervisor flag"
        report.add(virtual_machine(
            what, [], one_gpu=gpus_seen == 1, from_topology=False,
            evidence=[x for x in (f"/sys/class/dmi/id/sys_vendor: {host.dmi_vendor}" if host.dmi_vendor else None,
                                  "/proc/cpuinfo: hypervisor flag" if host.hypervisor_flag else None) if x]))
    if host.container:
        report.check("container", "ok", f"in a container ({host.container}): the host's /sys may be partly hidden")

