"""The fabric graph: how one machine is built, as a tree of what contains what (CPU socket, NUMA
node, host bridge, root port, switch ports, bridges, GPUs and NICs) and edges for the links that are
not PCIe (NVLink, to a GPU or an NVSwitch; C2C; the link between sockets).

As NCCL's ``src/graph`` and hwloc keep it: nodes with their place, links between them, and the
pair words (``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``) *derived* from where two devices meet in
the tree, as NCCL's ``ncclTopoComputePaths`` derives a path's type, rather than stored per pair.
Every source that knows the tree fills it (sysfs on a live host or in a gathered archive, NCCL's
topology XML); a source that gives only pair words (``nvidia-smi topo -m`` text) leaves it None.

A PCIe hop's health sits on the node below the hop (its link: generation and width, current and
max; its ACS control word where read), so a check written once over the tree names the node and,
through ``gpus_below``, every GPU (and pair) the hop carries.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

# Node kinds. Containment (``parent``) runs socket > numa > host-bridge > root-port > switch ports /
# bridges > device; a GPU or NIC is always a leaf.
SOCKET, NUMA, HOST_BRIDGE, ROOT_PORT, BRIDGE, GPU, NIC, NVSWITCH, DEVICE = (
    "socket", "numa", "host-bridge", "root-port", "bridge", "gpu", "nic", "nvswitch", "device")
NODE_KINDS = (SOCKET, NUMA, HOST_BRIDGE, ROOT_PORT, BRIDGE, GPU, NIC, NVSWITCH, DEVICE)
# Edge kinds (links that are not the PCIe tree's own).
NVLINK, C2C, SMP = "nvlink", "c2c", "smp"
EDGE_KINDS = (NVLINK, C2C, SMP)
_PCI_KINDS = (HOST_BRIDGE, ROOT_PORT, BRIDGE, GPU, NIC, DEVICE)


@dataclass
class FabricNode:
    """One element of the machine. ``id`` is unique in the fabric: ``pci:0000:19:08.0``,
    ``host:pci0000:00``, ``numa:0``, ``socket:1``, ``gpu:3`` (a GPU known only by index),
    ``nvswitch:0``. PCIe link fields describe the hop *above* this node (to its parent)."""

    id: str
    kind: str
    parent: str | None = None
    bdf: str | None = None
    gpu: int | None = None  # the GPU's index, for a GPU
    nic: str | None = None  # the NIC's name, for a NIC
    numa_node: int | None = None
    secondary_bus: int | None = None  # a bridge's bus range (lspci's secondary..subordinate)
    subordinate_bus: int | None = None
    link_gts_current: float | None = None
    link_gts_max: float | None = None
    link_width_current: int | None = None
    link_width_max: int | None = None
    acs_control: int | None = None  # the ACS control word where it was read (root only)


@dataclass
class FabricEdge:
    """A link outside the PCIe tree between two nodes: NVLink (``count`` links, ``active`` of them
    up where known), C2C, or the interconnect between sockets / NUMA nodes."""

    a: str
    b: str
    kind: str
    count: int | None = None
    active: int | None = None


@dataclass
class Fabric:
    """The graph (see the module docstring). Lookups are built once and kept while the lists keep
    their length (sources fill a fabric, then only read it)."""

    nodes: list[FabricNode] = field(default_factory=list)
    edges: list[FabricEdge] = field(default_factory=list)

    # --- lookups ---------------------------------------------------------------------------------

    def _index(self) -> dict[str, FabricNode]:
        cached = getattr(self, "_by_id", None)
        if cached is None or cached[0] != len(self.nodes):
            cached = (len(self.nodes), {node.id: node for node in self.nodes})
            object.__setattr__(self, "_by_id", cached)
        return cached[1]

    def node(self, node_id: str | None) -> FabricNode | None:
        return None if node_id is None else self._index().get(node_id)

    def add(self, node: FabricNode) -> FabricNode:
        """``node``, or the node of that id already there (filled in where it lacked a field)."""
        known = self.node(node.id)
        if known is None:
            self.nodes.append(node)
            return node
        for name, value in vars(node).items():
            if not name.startswith("_") and value is not None and getattr(known, name) is None:
                setattr(known, name, value)
        return known

    def gpu_node(self, index: int) -> FabricNode | None:
        return next((node for node in self.nodes if node.kind == GPU and node.gpu == index), None)

    def ancestors(self, node_id: str) -> list[FabricNode]:
        """The nodes above ``node_id``, nearest first (bounded by the node count: a loop ends it)."""
        found: list[FabricNode] = []
        current = self.node(self.node(node_id).parent) if self.node(node_id) else None
        while current is not None and len(found) <= len(self.nodes):
            found.append(current)
            current = self.node(current.parent)
        return found

    def children(self, node_id: str) -> list[FabricNode]:
        return [node for node in self.nodes if node.parent == node_id]

    def below(self, node_id: str) -> Iterator[FabricNode]:
        """Every node under ``node_id`` (not itself)."""
        kids: dict[str | None, list[FabricNode]] = {}
        for node in self.nodes:
            kids.setdefault(node.parent, []).append(node)
        stack, seen = list(kids.get(node_id, [])), set()
        while stack:
            node = stack.pop()
            if node.id in seen:
                continue
            seen.add(node.id)
            yield node
            stack.extend(kids.get(node.id, []))

    def gpus_below(self, node_id: str) -> list[int]:
        """The indices of the GPUs under ``node_id``: those whose traffic crosses its upstream hop."""
        return sorted(node.gpu for node in self.below(node_id) if node.kind == GPU and node.gpu is not None)

    # --- pair words, derived --------------------------------------------------------------------

    def pci_path(self, node_id: str) -> list[str] | None:
        """``[host bridge, root port, ..., device]`` ids from the host bridge down, or None where the
        node hangs under no host bridge (its place in the PCIe tree is not known)."""
        chain = [self.node(node_id), *self.ancestors(node_id)]
        pci = [node.id for node in chain if node is not None and node.kind in _PCI_KINDS]
        if not pci or self.node(pci[-1]).kind != HOST_BRIDGE:
            return None
        return list(reversed(pci))

    def numa_of(self, node_id: str) -> int | None:
        node = self.node(node_id)
        for candidate in [node, *self.ancestors(node_id)] if node else []:
            if candidate.numa_node is not None:
                return candidate.numa_node
        return None

    def path_word(self, a_id: str, b_id: str) -> str | None:
        """nvidia-smi's word for the PCIe way between two devices, from where they meet in the tree:
        PIX (at most one PCIe switch between them), PXB (several bridges), PHB (their host bridge),
        NODE (host bridges of one NUMA node), SYS (NUMA nodes apart); None where not known."""
        path_a, path_b = self.pci_path(a_id), self.pci_path(b_id)
        if path_a is None or path_b is None:
            return None
        numa_a, numa_b = self.numa_of(a_id), self.numa_of(b_id)
        same = None if numa_a is None or numa_b is None else numa_a == numa_b
        return pcie_path_word(path_a, path_b, same)

    def nvlink_count(self, a_id: str, b_id: str) -> int:
        """NVLinks joining two nodes directly (not through an NVSwitch)."""
        return sum(edge.count or 0 for edge in self.edges
                   if edge.kind == NVLINK and {edge.a, edge.b} == {a_id, b_id})


def pcie_path_word(path_a: list[str], path_b: list[str], same_numa_node: bool | None) -> str | None:
    """nvidia-smi's word for the way between two PCI devices given their paths from the host bridge
    down (``[host bridge, root port, ..., device]``): PIX (one switch between them), PXB (several
    bridges), PHB (through their host bridge), NODE (host bridges of one NUMA node), SYS; None for
    different host bridges whose NUMA nodes are not known."""
    if path_a[0] != path_b[0]:
        return None if same_numa_node is None else "NODE" if same_numa_node else "SYS"
    shared = 0
    for mine, theirs in zip(path_a[1:-1], path_b[1:-1]):
        if mine != theirs:
            break
        shared += 1
    if shared == 0:
        return "PHB"  # different root ports of one host bridge
    below_a, below_b = len(path_a) - 1 - shared, len(path_b) - 1 - shared
    # Root port -> switch upstream port -> downstream ports -> the two devices: one switch.
    return "PIX" if below_a <= 2 and below_b <= 2 and shared >= 2 else "PXB"
