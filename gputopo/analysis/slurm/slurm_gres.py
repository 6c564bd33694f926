"""What a host's gres.conf says of its GPUs: device file, type, cores and links, in Slurm's order.

Slurm numbers a node's GPUs by PCI bus id, smallest first, and ``Links=`` lists, per GPU, the
connections to GPU 0, 1, ... in that order (``-1`` itself, ``0`` none; gres.conf(5)). Each GPU's line
carries one device file, so ``Links=`` may be given (a line with ``Links=`` holds one GPU).

NVLink: ``Links=`` counts the NVLinks between the two GPUs (the ``N`` of ``NV<N>``), so a DGX-1 says
``2`` for its NV2 pairs and ``1`` for NV1. NVSwitch: the GPUs reach each other through the switches,
and AutoDetect=nvml counts a link only when its far end is another GPU's PCI id, so it sees ``0`` to
every peer. Written here is what the wiring is: every peer the same count (the ``N`` of ``NV<N>``),
so Slurm's "most linked first" selection sees all pairs equal, which they are; with AutoDetect=nvml
on the same lines Slurm would find the two disagree and drop the GPU, so the file says
``AutoDetect=off``. PCIe: ``0`` unless ``pcie_weight`` is given, then GPUs under one PCIe switch
tree (``PIX``/``PXB``, no host bridge between them) get that count, so Slurm prefers them together.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.analysis.slurm.slurm_cores import slurm_cores
from gputopo.model import Gpu, Topology
from gputopo.quoting import slurm_gres_type, slurm_node

PCIE_SWITCH_WORDS = ("PIX", "PXB")


@dataclass
class GresGpu:
    """One GPU's gres.conf line."""

    index: int  # the source's GPU number (nvidia-smi's)
    pci_bus_id: str | None
    name: str | None
    type: str | None  # the Type= word (quoting.slurm_gres_type); None: no Type=
    minor: int  # N of /dev/nvidiaN
    minor_known: bool  # False: the source gives no minor number and the index is used
    cores: list[int] | None  # Slurm logical core indices; None: no Cores=
    links: list[int]  # Links=, one entry per GPU of the node in Slurm's order


@dataclass
class GresNode:
    """One node's GPUs in Slurm's order, and what the reader of the file should know."""

    node: str | None  # NodeName=; None: the lines apply to whichever node reads the file
    gpus: list[GresGpu]
    nvswitch: bool  # its GPUs are joined through NVSwitch
    notes: list[str] = field(default_factory=list)


def _bus_key(bus_id: str) -> tuple[int, ...]:
    domain, bus, rest = bus_id.split(":")
    device, function = rest.split(".")
    return (int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))


def slurm_order(gpus: list[Gpu]) -> tuple[list[Gpu], bool]:
    """The GPUs in Slurm's device order (PCI bus id, smallest first) and whether the bus ids gave it
    (False: some bus id is unknown, so the source's index order is kept)."""
    try:
        return sorted(gpus, key=lambda g: _bus_key(g.pci_bus_id or "")), True
    except ValueError:
        return sorted(gpus, key=lambda g: g.index), False


def _link_count(topology: Topology, a: int, b: int, pcie_weight: int | None) -> tuple[int, bool]:
    """``Links=`` for the pair and whether the source says nothing of it (unknown)."""
    if not topology.has_link(a, b):
        return 0, True
    link = topology.link(a, b)
    if link.nvlink_count > 0:
        return link.nvlink_count, False
    words = (link.type, link.pcie_path)
    if pcie_weight and any(word in PCIE_SWITCH_WORDS for word in words):
        return pcie_weight, False
    return 0, link.type == "UNKNOWN"


def _hosts(topology: Topology) -> list[tuple[str | None, list[Gpu]]]:
    """A topology's GPUs per host: one group per ``Gpu.host`` (a rack of trays), else the whole."""
    if not any(gpu.host for gpu in topology.gpus):
        return [(topology.host, list(topology.gpus))]
    groups: dict[str | None, list[Gpu]] = {}
    for gpu in topology.gpus:
        groups.setdefault(gpu.host or topology.host, []).append(gpu)
    return list(groups.items())


def gres_node(topology: Topology, host: str | None, gpus: list[Gpu], pcie_weight: int | None = None) -> GresNode:
    """One node's gres.conf lines (module docstring)."""
    ordered, by_bus = slurm_order(gpus)
    node = slurm_node(host) if host is not None else None
    notes: list[str] = []
    if not by_bus:
        notes.append("the source lacks some PCI bus ids: GPUs in its index order, which is nvidia-smi's "
                     "(PCI bus order unless CUDA_DEVICE_ORDER or the driver says otherwise)")
    cores = slurm_cores(ordered)
    notes.append(cores.basis)
    unknown_minor = [gpu.index for gpu in ordered if gpu.minor_number is None]
    if unknown_minor:
        notes.append("the source gives no device minor number for GPU(s) " + ",".join(map(str, unknown_minor))
                     + ": File=/dev/nvidiaN assumes N is the GPU's index (true on most hosts; "
                     "`nvidia-smi -q | grep Minor` says)")
    nvswitch = any(topology.link(a.index, b.index).nvswitch for a in ordered for b in ordered
                   if a.index < b.index and topology.has_link(a.index, b.index))
    lines: list[GresGpu] = []
    unknown_pairs = 0
    for gpu in ordered:
        links = []
        for other in ordered:
            if other.index == gpu.index:
                links.append(-1)
                continue
            count, unknown = _link_count(topology, gpu.index, other.index, pcie_weight)
            unknown_pairs += unknown
            links.append(count)
        minor = gpu.minor_number if gpu.minor_number is not None else gpu.index
        lines.append(GresGpu(gpu.index, gpu.pci_bus_id, gpu.name, slurm_gres_type(gpu.name), minor,
                             gpu.minor_number is not None, cores.cores.get(gpu.index), links))
    if unknown_pairs:
        notes.append("the source does not say how some GPU pairs are linked: Links= says 0 for them")
    if any(line.type is None for line in lines):
        notes.append("some GPU names are unknown or have no letter or digit: those lines have no Type=")
    if nvswitch:
        notes.append("NVSwitch: every peer is written with the GPU's NVLink count, where AutoDetect=nvml "
                     "would see 0 (it counts only links whose far end is a GPU)")
    return GresNode(node, lines, nvswitch, notes)


def gres_nodes(topologies: list[Topology], pcie_weight: int | None = None) -> list[GresNode]:
    """Every node's gres.conf lines: one per ``--from`` host, or per tray of a multi-host topology."""
    nodes = []
    for topology in topologies:
        groups = _hosts(topology)
        for host, gpus in groups:
            nodes.append(gres_node(topology, host, gpus, pcie_weight))
    return nodes
