"""The parts of a topology: GPUs, NICs, links (with P2P capabilities and measurements), findings."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from gputopo.model.words import P2P_OK, nvlink_count_of
from gputopo.notation import expand_number_list


@functools.lru_cache(maxsize=256)
def _node_set(text: str) -> frozenset[int] | None:
    """A node list read once per distinct text (asked for every pair of GPUs)."""
    try:
        return frozenset(expand_number_list(text))
    except ValueError:
        return None


@dataclass
class GpuProcess:
    """A compute process using a GPU when the topology was read (NVML only)."""

    pid: int
    name: str | None = None  # the process's name; None where NVML would not say (another user's, gone)
    used_memory_bytes: int | None = None  # None where the driver does not account it (Windows WDDM, MIG)


@dataclass
class Gpu:
    """One GPU as the driver numbers it (NVML / nvidia-smi index, which is PCI bus order)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None  # normalised dddd:bb:dd.f
    memory_total_bytes: int | None = None
    numa_node: int | None = None  # the one NUMA node the GPU hangs off, where there is one
    cpu_affinity: str | None = None  # cpulist, e.g. "0-11,24-35"
    # The whole NUMA affinity set as nvidia-smi prints it ("0,3-9,11-17" on Grace), as a node list.
    numa_affinity: str | None = None
    gpu_numa_id: int | None = None  # the GPU's own memory as a NUMA node (Grace: 2, 10, 18, 26)
    socket: int | None = None  # CPU socket (physical package) where the source knows it
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    nvlink_version: str | None = None  # "2.0", "3.0", "4.0" (the NVLink generation as a version)
    nvlink_active_links: int | None = None
    mig_mode: bool | None = None
    compute_capability: str | None = None  # "8.0"
    host: str | None = None  # set for multi-host topologies
    # Live state when the topology was read (NVML or `nvidia-smi -q`; None: not known, e.g. every other source).
    memory_used_bytes: int | None = None
    utilization_percent: int | None = None  # share of the last sample period a kernel ran
    processes: list[GpuProcess] | None = None  # compute processes; [] none, None not known
    # The performance state: 0 is P0 (the most performance) ... 15 is P15 (the least); read with the
    # PCIe link, it tells an idle GPU's lowered link speed from a link that trained down.
    performance_state: int | None = None
    # Where a GPU is for Slurm and the NVLink fabric (None: the source does not say): its device
    # file's minor number (/dev/nvidiaN, nvmlDeviceGetMinorNumber), which need not be its index; and
    # the NVLink domain it is in (nvmlDeviceGetGpuFabricInfo's clusterUuid and cliqueId, MNNVL).
    # The NVML probe reads the minor number; no reader fills the fabric ids yet (docs/json.md).
    minor_number: int | None = None
    fabric_cluster_uuid: str | None = None
    fabric_clique_id: int | None = None

    @property
    def numa_nodes(self) -> set[int] | None:
        """The NUMA nodes the GPU is affine to (its affinity set, else its one node); None if unknown."""
        if self.numa_affinity:
            nodes = _node_set(self.numa_affinity)
            return None if nodes is None else set(nodes)
        return None if self.numa_node is None else {self.numa_node}

    def pcie_below_max(self, field: str) -> tuple[int, int] | None:
        """``(current, max)`` where the PCIe ``field`` ("width" or "gen") runs below its maximum, else None."""
        current, maximum = getattr(self, f"pcie_{field}_current"), getattr(self, f"pcie_{field}_max")
        if current is not None and maximum is not None and current < maximum:
            return current, maximum
        return None


@dataclass
class Nic:
    """A network adapter shown in the topology (``mlx5_0``, ``NIC0``)."""

    name: str
    device: str | None = None  # the real device name where a legend maps NICn -> mlx5_n
    pci_bus_id: str | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None
    netdev: str | None = None  # its network interface (``ib0``, ``enp12s0np0``) where sysfs says
    rdma_device: str | None = None  # its RDMA device (``mlx5_0``) as NCCL_IB_HCA names it, where known

    @property
    def rdma_name(self) -> str | None:
        """The RDMA device name: as read from sysfs, else the legend's (NIC0 -> mlx5_0), else the
        column name where it is not a bare ``NICn`` placeholder."""
        if self.rdma_device or self.device:
            return self.rdma_device or self.device
        placeholder = self.name[:3].upper() == "NIC" and self.name[3:].isdigit()
        return None if placeholder else self.name


@dataclass
class Measurement:
    """Copy bandwidth measured for one pair of GPUs (``a -> b`` is ``Link.a -> Link.b``), and by what.

    The headline figures (``a_to_b_gbps`` ...) are the ones to judge the link by; ``p2p_enabled``
    says whether they were taken with peer access on (``None``: the tool does not say). Figures a
    tool took with peer access off (p2pBandwidthLatencyTest's ``P2P=Disabled`` matrices: copies
    staged through host memory) are kept beside them in ``p2p_off_*``."""

    a_to_b_gbps: float | None = None
    b_to_a_gbps: float | None = None
    bidirectional_gbps: float | None = None
    latency_us: float | None = None  # the worse direction
    via_host_gbps: float | None = None
    device_kind: str = "GPU"  # "GPU" or "CPU" (logical CPU devices measure host memory)
    size_bytes: int | None = None
    repeats: int | None = None
    method: str | None = None  # the tool: "bench-p2p", "p2pBandwidthLatencyTest", "nvbandwidth"
    test: str | None = None  # which of its tests: "P2P=Enabled", "device_to_device_memcpy_read_ce"
    origin: str | None = None  # the file (or label) it was read from
    p2p_enabled: bool | None = None
    p2p_off_a_to_b_gbps: float | None = None
    p2p_off_b_to_a_gbps: float | None = None
    p2p_off_bidirectional_gbps: float | None = None
    p2p_off_latency_us: float | None = None
    # How much the repeated samples of the headline figures varied: (max - min) / median, the wider
    # direction (bench-p2p keeps each pair's samples); None where the tool gives one figure only.
    spread: float | None = None


@dataclass
class Link:
    """How two GPUs ``a < b`` are connected, and what peer-to-peer (P2P) access they allow."""

    a: int
    b: int
    type: str  # nvidia-smi word: NV<n>, PIX, PXB, PHB, NODE, SYS
    nvlink_count: int = 0
    # The NVLinks go through NVSwitch (all-to-all fabric); None where the source cannot tell
    # (nvidia-smi text of a few GPUs with NV18 to each other).
    nvswitch: bool | None = False
    pcie_path: str | None = None  # the PCIe path word even where NVLink exists (NVML knows both)
    p2p_read: str | None = None  # "ok" or a P2P status word (CNS, GNS, TNS, DR, NS, U); None: unknown
    p2p_write: str | None = None
    p2p_atomics: str | None = None
    p2p_nvlink: str | None = None
    measured: Measurement | None = None
    # What `gputopo doctor` found wrong on this pair's path ("acs", "downtrained", "nvlink-down",
    # "iommu", "p2p-disabled"); empty where nothing was found or doctor did not run.
    health: list[str] = field(default_factory=list)

    @property
    def is_nvlink(self) -> bool:
        return self.nvlink_count > 0

    @property
    def can_peer(self) -> bool | None:
        """Whether P2P reads and writes are supported; ``None`` where the source did not say."""
        known = [word for word in (self.p2p_read, self.p2p_write) if word is not None]
        if not known:
            return None
        return all(word == P2P_OK for word in known)


@dataclass
class NicLink:
    """How a GPU reaches a NIC (PCIe path word)."""

    gpu: int
    nic: str
    type: str


@dataclass
class Finding:
    """A plain-language diagnostic about the topology."""

    severity: str  # "info", "warning", "error"
    code: str  # stable slug, e.g. "cross-socket"
    message: str
    gpus: list[int] = field(default_factory=list)
    fix: str | None = None
    # Optional (doctor): what was read, where ("/sys/bus/pci/devices/0000:02:08.0/config: ACS control
    # ReqRedir+ CmpltRedir+"), and what it does to which GPU pairs. Absent from older snapshots.
    evidence: list[str] = field(default_factory=list)
    effect: str | None = None
    # The code of the finding that explains this one (ACS redirect set by the kernel because the
    # IOMMU is on; P2P slower than staged copies because of either), where the evidence shows it.
    caused_by: str | None = None
    # "fault" (fix it), "design" (the machine is built so: placement advice) or "note": set by
    # gputopo.analysis.causes.finding_kinds from its one table (None: not yet classified; older snapshots).
    kind: str | None = None


# The Disagreement subject that records how two sources' GPUs were matched (not a disagreement).
GPU_NUMBERING_SUBJECT = "GPU numbering"


@dataclass
class Disagreement:
    """Two sources of one host that say different things about the same fact (``--from`` given
    several times, or a paste holding several outputs): what was kept and what was not."""

    subject: str  # "GPU 2 name", "link 0-1 type", "GPU 3 (by PCI bus id 0000:1b:00.0)"
    kept: str | None  # the value kept, as text
    kept_from: str  # the source it came from
    other: str | None  # the value not kept
    other_from: str
    gpus: list[int] = field(default_factory=list)


def make_link(a: int, b: int, link_type: str, **kwargs: Any) -> Link:
    """A ``Link`` with ``a < b`` and ``nvlink_count`` derived from an ``NV<n>`` type word."""
    lo, hi = (a, b) if a < b else (b, a)
    kwargs.setdefault("nvlink_count", nvlink_count_of(link_type))
    return Link(a=lo, b=hi, type=link_type, **kwargs)
