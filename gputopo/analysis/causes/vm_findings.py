"""``virtual-machine``: a guest's GPUs, in one wording whoever saw the VM: nvidia-smi's flat virtual
PCI topology (``scan``: the ``vm-evidence`` notes) or the host's DMI / hypervisor flag (``doctor``).
With one GPU no peer-to-peer happens inside the guest, so the finding says so instead."""

from __future__ import annotations

from gputopo.model import Finding


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
