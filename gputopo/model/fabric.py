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
# The node standing for every NVSwitch where the source does not tell the switches apart (an NVLink
# that NVML or NCCL says ends at a switch, with no bus id of its own): NCCL's one ``NVS`` node.
NVSWITCH_FABRIC = "nvswitch:fabric"
# Levels above a node that any machine has (a real tree has under 12); ``ancestors`` stops past it.
MAX_FABRIC_DEPTH = 64
_PCI_KINDS = (HOST_BRIDGE, ROOT_PORT, BRIDGE, GPU, NIC, DEVICE)


@dataclass
class FabricNode:
    """One element of the machine. ``id`` is unique in the fabric: ``pci:0000:19:08.0``,
    ``host:pci0000:00``, ``numa:0``, ``socket:1``, ``gpu:3`` (a GPU known only by index),
    ``nvswitch:fabric`` (every NVSwitch, where the source does not tell them apart; an NVSwitch
    with a bus id is ``pci:<bdf>``). PCIe link fields describe the hop *above* this node (to its parent)."""

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
    up where known), C2C, or the interconnect between sockets / NUMA nodes. An NVLink edge joins two
    GPUs (direct links) or a GPU and an NVSwitch node (the GPU's links to that switch): a 576-GPU
    NVSwitch domain is 576 edges, the pairs' NVLink counts derived (``Fabric.nvlink_count``)."""

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
        index = self._index()
        known = index.get(node.id)
        if known is None:  # the lookups kept up to date (rebuilt per node, adding was quadratic)
            by_gpu = getattr(self, "_by_gpu", None)
            self.nodes.append(node)
            index[node.id] = node
            object.__setattr__(self, "_by_id", (len(self.nodes), index))
            if by_gpu is not None and by_gpu[0] == len(self.nodes) - 1:
                if node.kind == GPU and node.gpu is not None:
                    by_gpu[1].setdefault(node.gpu, node)
                object.__setattr__(self, "_by_gpu", (len(self.nodes), by_gpu[1]))
            return node
        for name, value in vars(node).items():
            if not name.startswith("_") and value is not None and getattr(known, name) is None:
                setattr(known, name, value)
        return known

    def gpu_node(self, index: int) -> FabricNode | None:
        cached = getattr(self, "_by_gpu", None)
        if cached is None or cached[0] != len(self.nodes):
            by_gpu: dict[int, FabricNode] = {}
            for node in self.nodes:
                if node.kind == GPU and node.gpu is not None:
                    by_gpu.setdefault(node.gpu, node)
            cached = (len(self.nodes), by_gpu)
            object.__setattr__(self, "_by_gpu", cached)
        return cached[1].get(index)

    def ancestors(self, node_id: str) -> list[FabricNode]:
        """The nodes above ``node_id``, nearest first. A loop of parents ends where it closes, and a
        chain deeper than ``MAX_FABRIC_DEPTH`` is cut one node past it (a snapshot's fabric is input:
        a walk bounded only by the node count made every leaf below a loop cost the whole fabric)."""
        found: list[FabricNode] = []
        seen = {node_id}
        current = self.node(self.node(node_id).parent) if self.node(node_id) else None
        while current is not None and current.id not in seen and len(found) <= MAX_FABRIC_DEPTH:
            seen.add(current.id)
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

    # --- NVLink pair facts, derived ----------------------------------------------------------------

    def _nvlinks(self) -> tuple[dict[tuple[str, str], int], dict[str, int]]:
        """(direct links per pair of node ids, in sorted order; each node's links to NVSwitch nodes),
        counting a link that is up (``active``) where the source says which are, else every link.
        Built once per length of the edge and node lists (a domain: one pass over its edges)."""
        key = (len(self.edges), len(self.nodes))
        cached = getattr(self, "_nvlink_summary", None)
        if cached is not None and cached[0] == key:
            return cached[1]
        switches = {node.id for node in self.nodes if node.kind == NVSWITCH}
        direct: dict[tuple[str, str], int] = {}
        to_switch: dict[str, int] = {}
        for edge in self.edges:
            if edge.kind != NVLINK:
                continue
            links = (edge.active if edge.active is not None else edge.count) or 0
            if edge.b in switches or edge.a in switches:
                end = edge.a if edge.b in switches else edge.b
                to_switch[end] = to_switch.get(end, 0) + links
            else:
                pair = (edge.a, edge.b) if edge.a < edge.b else (edge.b, edge.a)
                direct[pair] = direct.get(pair, 0) + links
        summary = (direct, to_switch)
        object.__setattr__(self, "_nvlink_summary", (key, summary))
        return summary

    def nvlink_count(self, a_id: str, b_id: str) -> int:
        """The NVLinks between two nodes as NCCL counts them (``topo.cc``: every NVSwitch one ``NVS``
        node; ``paths.cc``: a path's width is its narrowest hop): the links joining them directly,
        else, where both reach NVSwitches, the fewer of their switch links (nvidia-smi's NV#)."""
        direct, to_switch = self._nvlinks()
        pair = (a_id, b_id) if a_id < b_id else (b_id, a_id)
        links = direct.get(pair, 0)
        if links or a_id == b_id:
            return links
        return min(to_switch.get(a_id, 0), to_switch.get(b_id, 0))

    def nvswitch_links(self, node_id: str) -> int:
        """The node's NVLinks to NVSwitches (up ones where the source says)."""
        return self._nvlinks()[1].get(node_id, 0)

    def gpu_nvlinks(self, a: int, b: int) -> tuple[int, bool] | None:
        """Two GPUs (by index): (their NVLink count, through NVSwitch?) as ``nvlink_count`` derives
        it; None where either GPU is not in the fabric."""
        node_a, node_b = self.gpu_node(a), self.gpu_node(b)
        if node_a is None or node_b is None:
            return None
        direct, _ = self._nvlinks()
        pair = (node_a.id, node_b.id) if node_a.id < node_b.id else (node_b.id, node_a.id)
        count = self.nvlink_count(node_a.id, node_b.id)
        return count, count > 0 and not direct.get(pair)

    def nvlink_word(self, a: int, b: int) -> str | None:
        """nvidia-smi's ``NV#`` for two GPUs (by index) where NVLink joins them; None otherwise."""
        found = self.gpu_nvlinks(a, b)
        return f"NV{found[0]}" if found and found[0] else None

    def links_per_nvswitch(self) -> dict[str, dict[str, int]]:
        """Each node's NVLinks per NVSwitch it reaches (up ones where the source says): one pass over
        the edges, for a check that names the switch side of links that are down."""
        switches = {node.id for node in self.nodes if node.kind == NVSWITCH}
        found: dict[str, dict[str, int]] = {}
        for edge in self.edges:
            if edge.kind == NVLINK and (edge.a in switches) != (edge.b in switches):
                end, switch = (edge.a, edge.b) if edge.b in switches else (edge.b, edge.a)
                per = found.setdefault(end, {})
                per[switch] = per.get(switch, 0) + ((edge.active if edge.active is not None else edge.count) or 0)
        return found

    def nvswitches_of(self, node_id: str) -> list[str]:
        """The NVSwitch nodes a node's NVLink edges reach (sorted ids)."""
        switches = {node.id for node in self.nodes if node.kind == NVSWITCH}
        return sorted({edge.b if edge.a == node_id else edge.a for edge in self.edges
                       if edge.kind == NVLINK and node_id in (edge.a, edge.b) and ({edge.a, edge.b} & switches)})


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
