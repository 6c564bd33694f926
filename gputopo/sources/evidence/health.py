"""Everything ``gputopo doctor`` reads, gathered in one ``HealthEvidence`` (plain data for
``analysis.causes.doctor``): the PCIe paths of the GPUs sysfs lists, the host's health, NVML's health (or
why it could not be read), and pasted evidence files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from gputopo.errors import NvmlUnavailable
from gputopo.model import Topology
from gputopo.sources.host.host_health import HostHealth, read_host_health
from gputopo.sources.host.nvml_health import NvmlHealth, read_nvml_health
from gputopo.sources.evidence.pasted_health import PastedEvidence
from gputopo.sources.host.pcie_health import GpuPciePath, gpu_pcie_paths, nvidia_gpus
from gputopo.sources.evidence.slurm_gres_text import SlurmGresText
from gputopo.sources.host.sysfs import INFINIBAND_DIR
from gputopo.sources.host.tree import Root, as_tree


@dataclass
class HealthEvidence:
    """What doctor judges. ``source`` names where it came from ("this host", an archive, a file)."""

    source: str = "this host"
    root: str | None = None  # what was read, as named to people (None: pasted files only)
    gpu_bdfs: list[str] = field(default_factory=list)
    paths: dict[str, GpuPciePath | None] = field(default_factory=dict)
    host: HostHealth | None = None
    nvml: NvmlHealth | None = None
    nvml_unavailable: str | None = None  # why NVML was not read (None: read, or not asked)
    rdma_nics: list[str] = field(default_factory=list)
    pasted: list[tuple[str, PastedEvidence]] = field(default_factory=list)  # (label, evidence)
    # smi text outputs found in a gathered tree: name -> text (nvidia-smi nvlink -s, topo -m ...)
    recorded_outputs: dict[str, str] = field(default_factory=dict)
    # The topology those outputs give (topo -m with topo -p2p r), where a gathered tree has them.
    topology: Topology | None = None
    # Pasted files that are no health evidence but another tool's output ``scan --from`` reads (an
    # NCCL log, nvbandwidth, topo -m ...): (label, its topology as read); analysis judges them.
    read_as_topology: list[tuple[str, Topology]] = field(default_factory=list)
    # Such outputs pasted beside health evidence that their reader refused: (label, its reason).
    unread_outputs: list[tuple[str, str]] = field(default_factory=list)
    # Slurm's view of the GPUs (``slurmd -G``, ``scontrol show node``): (label, as read); judged
    # against the wiring in analysis/causes/slurm_check.py.
    slurm_gres: list[tuple[str, SlurmGresText]] = field(default_factory=list)

    def bdf_to_index(self) -> dict[str, int]:
        """Bus id -> NVML index, where NVML was read."""
        if self.nvml is None:
            return {}
        return {g.pci_bus_id: g.index for g in self.nvml.gpus if g.pci_bus_id}


def read_health(root: Root = "/", env: Mapping[str, str] | None = None, *,
                nvml: Any = None, use_nvml: bool = True, source: str = "this host") -> HealthEvidence:
    """Read every source under ``root`` (and NVML where ``use_nvml``: a live host, not an archive)."""
    tree = as_tree(root)
    bdfs = nvidia_gpus(tree)
    evidence = HealthEvidence(source=source, root=getattr(tree, "root", tree.label), gpu_bdfs=bdfs,
                              paths=gpu_pcie_paths(bdfs, tree), host=read_host_health(tree, env))
    evidence.rdma_nics = tree.listdir(INFINIBAND_DIR) or []
    if use_nvml:
        try:
            evidence.nvml = read_nvml_health(nvml)
        except NvmlUnavailable as exc:
            evidence.nvml_unavailable = str(exc).split(";")[0]
        if evidence.nvml is not None and not evidence.gpu_bdfs:
            # No sysfs (a container without /sys/bus/pci): NVML's bus ids still name the GPUs.
            evidence.gpu_bdfs = [g.pci_bus_id for g in evidence.nvml.gpus if g.pci_bus_id]
            evidence.paths = gpu_pcie_paths(evidence.gpu_bdfs, tree)
    return evidence
