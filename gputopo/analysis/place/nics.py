"""Which network adapters sit near which GPUs: the NIC(s) a GPU should send through.

A GPU talks to another host fastest through a NIC on its own PCIe switch: with GPUDirect RDMA the
NIC reads and writes GPU memory directly. nvidia-smi words the way from a GPU to a NIC as for GPU
pairs: ``PIX`` (one PCIe switch between them) and ``PXB`` (several bridges, no host bridge) are near
and keep GPUDirect RDMA; ``PHB`` and ``NODE`` go through the CPU's host bridge(s) (NCCL disables
GPUDirect RDMA there by default, ``NCCL_NET_GDR_LEVEL``); ``SYS`` crosses the SMP interconnect
between NUMA nodes, where GPUDirect RDMA is lost and every message is staged through host memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.model import PCIE_PATHS, Nic, Topology

NEAR_PATHS = ("PIX", "PXB")  # GPUDirect RDMA works
FAR_PATH = "SYS"  # GPUDirect RDMA is lost


@dataclass
class NearestNics:
    """A GPU's nearest NICs: the best path word it has to any NIC, and the NICs at that path."""

    gpu: int
    path: str | None  # None: no NIC, or no path to any is known
    nics: list[Nic] = field(default_factory=list)

    @property
    def near(self) -> bool:
        return self.path in NEAR_PATHS


def nearest_nics(topology: Topology, gpus: list[int] | None = None) -> list[NearestNics]:
    """For each GPU (all by default, in the order given) the NICs on its best path, in the
    topology's NIC order."""
    by_name = {nic.name: nic for nic in topology.nics}
    paths: dict[int, dict[str, str]] = {}
    for nic_link in topology.nic_links:
        if nic_link.nic in by_name and nic_link.type in PCIE_PATHS:
            paths.setdefault(nic_link.gpu, {})[nic_link.nic] = nic_link.type
    result = []
    for gpu in topology.gpu_indices if gpus is None else gpus:
        mine = paths.get(gpu, {})
        if not mine:
            result.append(NearestNics(gpu=gpu, path=None))
            continue
        best = min(mine.values(), key=PCIE_PATHS.index)
        result.append(NearestNics(gpu=gpu, path=best, nics=[n for n in topology.nics if mine.get(n.name) == best]))
    return result


def nic_label(nic: Nic) -> str:
    """``mlx5_0``, ``NIC0 (mlx5_10)`` or ``NIC3``: the NIC as the source names it, with its RDMA name."""
    rdma = nic.rdma_name
    return nic.name if rdma in (None, nic.name) else f"{nic.name} ({rdma})"
