"""The drawing's tree from the fabric graph (``gputopo.model.fabric``), where the topology has one.

sysfs (the live probe, a gathered archive) gives the PCIe tree itself, so the boxes are what
contains what, not a guess from pair words: CPU socket (drawn only where it holds several NUMA
nodes; else named in its NUMA node's label) > NUMA node > root port > PCIe switch (an upstream port
with downstream ports below it; a switch below another's downstream port is drawn inside it, as a
two-level PLX tree is built) > GPU / NIC, each where it sits. Host bridges and a switch's
downstream ports are not boxes (each level costs a label strip; they are named in the tooltips).
Each drawn switch and GPU carries the PCIe link above it: one that trained below what both its ends
can do is labelled (``x8 of x16``, ``8 of 16 GT/s``; a link's best is the lower of its two ends'
maxima, so an x8 card in an x16 slot is not "down").

Without a fabric (nvidia-smi text, TF logs, reference machines), with several hosts, or where the
fabric does not place every GPU, ``svg_tree`` infers the switches from ``PIX`` words as before, and
the drawing says so (``TreeSource``). Compact drawings (more than 16 GPUs) have no boxes below the
hosts either way.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputopo.model import Topology
from gputopo.model.fabric import (
    BRIDGE,
    GPU,
    HOST_BRIDGE,
    NIC,
    NUMA,
    ROOT_PORT,
    SOCKET,
    Fabric,
    FabricNode,
)
from gputopo.views.svg_tree import (
    Box,
    GpuItem,
    Hop,
    Item,
    NicItem,
    build_roots,
    nic_items,
)

FABRIC = "fabric"
INFERRED = "inferred"
FABRIC_CAPTION = "PCIe tree as read from sysfs"
INFERRED_CAPTION = "switches inferred from nvidia-smi's link words"
MAX_DEPTH = 24  # levels above a GPU (a real tree has under 12; a snapshot's may be anything)


@dataclass(frozen=True)
class TreeSource:
    """Where the drawing's boxes come from: ``kind`` FABRIC, INFERRED or "" (a compact drawing: no
    boxes below the hosts), the caption the drawing shows and its tooltip."""

    kind: str
    caption: str
    detail: str


def drawing_roots(topology: Topology, compact: bool) -> tuple[Box | None, list[Item], TreeSource]:
    """The host frame (one host) and the top-level items of the drawing, and where they come from."""
    if compact:
        frame, roots = build_roots(topology, compact)
        return frame, roots, TreeSource("", "", "")
    drawn, why = _fabric_roots(topology)
    if drawn is not None:
        detail = ("the boxes are the PCIe tree read from sysfs: socket, NUMA node, root port, PCIe switch "
                  "(upstream port), GPU and NIC where each sits; a switch inside another sits below one of its ports")
        return drawn[0], drawn[1], TreeSource(FABRIC, FABRIC_CAPTION, detail)
    frame, roots = build_roots(topology, compact)
    detail = (f"{why}: a PCIe switch box holds GPUs whose pair word is PIX; switches above switches "
              "(PXB) and root ports are not drawn")
    return frame, roots, TreeSource(INFERRED, INFERRED_CAPTION, detail)


def _fabric_roots(topology: Topology) -> tuple[tuple[Box, list[Item]] | None, str]:
    """The tree drawn from ``topology.fabric``, or None and why not."""
    fabric = topology.fabric
    if fabric is None:
        return None, "the source gives no PCIe tree, only a word for each pair of GPUs"
    if len({gpu.host for gpu in topology.gpus}) > 1:
        return None, "the GPUs are on several hosts"
    leaves: dict[object, FabricNode] = {}
    for node in fabric.nodes:
        if node.kind == GPU and node.gpu is not None:
            leaves.setdefault(("gpu", node.gpu), node)
        elif node.kind == NIC and node.nic is not None:
            leaves.setdefault(("nic", node.nic), node)
    if any(len(fabric.ancestors(leaves[("gpu", g)].id)) > MAX_DEPTH for g in topology.gpu_indices if ("gpu", g) in leaves):
        return None, f"the PCIe tree read is more than {MAX_DEPTH} levels deep"
    gpus = [g for g in topology.gpu_indices if ("gpu", g) in leaves and fabric.pci_path(leaves[("gpu", g)].id)]
    if not gpus or len(gpus) < len(topology.gpus):
        return None, f"the PCIe tree read places {len(gpus)} of the {len(topology.gpus)} GPUs"
    nics = {item.name: item for item in nic_items(topology)}
    placed = [name for name in nics if ("nic", name) in leaves and fabric.pci_path(leaves[("nic", name)].id)
              and len(fabric.ancestors(leaves[("nic", name)].id)) <= MAX_DEPTH]
    builder = _Builder(topology, fabric, [leaves[("gpu", g)] for g in gpus] + [leaves[("nic", n)] for n in placed], nics)
    roots = builder.roots()
    if builder.drawn_gpus != set(gpus):  # (parents in a loop: a hostile snapshot's)
        return None, "the PCIe tree read is not a tree"
    rest: list[Item] = []
    homes = {g: root for root in roots if isinstance(root, Box) for g in _gpus_in(root)}
    for name, item in nics.items():  # NICs the tree lacks: in their nearest GPUs' NUMA node, as inferred
        home = homes.get(item.nearest[0]) if item.nearest else None
        if name not in builder.drawn_nics:
            (home.children if home is not None else rest).append(item)
    if rest:
        roots.append(Box("unknown", "NICs not in the PCIe tree", "these NICs are not in the PCIe tree read", rest))
    name = next((gpu.host for gpu in topology.gpus if gpu.host), None) or topology.host
    frame = Box("host", name or "host", f"host {name}" if name else "the host (its name is not in the source)")
    return (frame, roots), ""


def _gpus_in(box: Box) -> set[int]:
    found: set[int] = set()
    for item in box.children:
        if isinstance(item, GpuItem):
            found.add(item.index)
        elif isinstance(item, Box):
            found |= _gpus_in(item)
    return found


def _order(node: FabricNode) -> tuple:
    """Sockets and NUMA nodes by number, PCI nodes by address (``pci:0000:03:00.0``: hex digits of
    fixed width, in order as text)."""
    number = node.numa_node if node.kind == NUMA else None
    tail = node.id.rsplit(":", 1)[-1]
    if node.kind == SOCKET and tail.isascii() and tail.isdigit() and len(tail) <= 9:  # ("²", 5,000 digits: int raised)
        number = int(tail)
    return (number is None, number or 0, node.id)


def _short(bdf: str | None, fallback: str) -> str:
    """``0000:40:01.1`` as lspci prints it (``40:01.1``) where its domain is 0."""
    if not bdf:
        return fallback
    return bdf[5:] if bdf.startswith("0000:") else bdf


def link_hop(node: FabricNode, port: FabricNode | None) -> Hop | None:
    """The link between ``node`` and the port above it (None: not a link, as between a switch's
    upstream and downstream ports, or no port: a device on its host bridge), where it trained below
    what both ends can do; None where it did not or is not known."""
    ends = [node] + ([port] if port is not None else [])
    # (width 0: no link trained at all, as lspci's LnkSta x0 of an empty slot: not a narrow link)
    width_now = next((e.link_width_current for e in ends if e.link_width_current), None)
    widths = [e.link_width_max for e in ends if e.link_width_max]
    gts_now = next((e.link_gts_current for e in ends if e.link_gts_current is not None), None)
    speeds = [e.link_gts_max for e in ends if e.link_gts_max]
    narrow = bool(width_now) and bool(widths) and width_now < min(widths)
    slow = bool(gts_now) and bool(speeds) and gts_now < min(speeds) - 1e-6
    if not (narrow or slow):
        return None
    words = ([f"x{width_now} of x{min(widths)}"] if narrow else []) + ([f"{gts_now:g} of {min(speeds):g} GT/s"] if slow else [])
    between = f"{_short(port.bdf, port.id)} - {_short(node.bdf, node.id)}" if port is not None else _short(node.bdf, node.id)
    detail = f"PCIe link {between} trained to {' · '.join(words)} (the best both ends can do)"
    if not narrow:
        detail += "; a GPU at idle lowers its link speed by design (its P-state), so read it under load"
    return Hop(" · ".join(words), narrow, detail)


def _joined(first: Hop | None, second: Hop | None) -> Hop | None:
    if first is None or second is None:
        return first or second
    return Hop(f"{first.words} · {second.words}", first.narrow or second.narrow, f"{first.detail}\n{second.detail}")


class _Builder:
    """Items for the kept nodes (the leaves drawn and every node above them), top down."""

    def __init__(self, topology: Topology, fabric: Fabric, leaves: list[FabricNode], nics: dict[str, NicItem]):
        self.topology, self.fabric, self.nics = topology, fabric, nics
        self.leaves = {leaf.id for leaf in leaves}
        self.drawn_gpus: set[int] = set()
        self.drawn_nics: set[str] = set()
        keep: set[str] = set()
        for leaf in leaves:
            keep.add(leaf.id)
            keep.update(node.id for node in fabric.ancestors(leaf.id))
        self.kids: dict[str | None, list[FabricNode]] = {}
        for node_id in keep:
            node = fabric.node(node_id)
            parent = node.parent if fabric.node(node.parent) is not None else None
            self.kids.setdefault(parent, []).append(node)
        for kids in self.kids.values():
            kids.sort(key=_order)
        self.seen: set[str] = set()
        self.sockets = sum(node.kind == SOCKET for node in self.kids.get(None, []))

    def roots(self) -> list[Item]:
        tops = self.kids.get(None, [])
        items: list[Item] = []
        loose = [node for node in tops if node.kind not in (SOCKET, NUMA)]  # host bridges of no known NUMA node
        for node in tops:
            if node.kind in (SOCKET, NUMA):
                items += self.items(node, None, None)
        if loose:
            box = Box("unknown", "NUMA node not known", "host bridges whose NUMA node was not read")
            box.children = [item for node in loose for item in self.items(node, None, None)]
            items.append(box)
        return items

    def items(self, node: FabricNode, port: FabricNode | None, above: Hop | None) -> list[Item]:
        """What ``node`` is drawn as; ``port``: the port at the other end of the link above it (None:
        no link), ``above``: a link trained down higher up that no box drew (a plain bridge's)."""
        if node.id in self.seen:  # (a loop in a hostile snapshot's parents)
            return []
        self.seen.add(node.id)
        kids = self.kids.get(node.id, [])
        if node.kind in (SOCKET, NUMA):
            return self._domain(node, kids)
        if node.kind == HOST_BRIDGE:
            return [item for kid in kids for item in self.items(kid, None, None)]
        if node.kind == ROOT_PORT:
            box = Box("root", f"root port {_short(node.bdf, node.id)}", self._detail(node, "PCIe root port"), fabric_id=node.id)
            box.children = [item for kid in kids for item in self.items(kid, node, None)]
            return [box]
        hop = _joined(above, link_hop(node, port))
        if node.id in self.leaves and node.kind == GPU:
            self.drawn_gpus.add(node.gpu)
            return [GpuItem(node.gpu, hop=hop)]
        if node.id in self.leaves and node.kind == NIC:
            self.drawn_nics.add(node.nic)
            return [self.nics[node.nic]]
        if node.kind == BRIDGE and any(kid.kind == BRIDGE for kid in kids):
            return [self._switch(node, kids, hop)]
        # A plain bridge (its downstream side is its own port) or a device in the way: not a box.
        below = node if node.kind == BRIDGE else None
        return [item for kid in kids for item in self.items(kid, below, hop)]

    def _switch(self, node: FabricNode, kids: list[FabricNode], hop: Hop | None) -> Box:
        ports = [kid for kid in kids if kid.kind == BRIDGE]
        detail = self._detail(node, "PCIe switch, upstream port") + "\ndownstream ports: " + ", ".join(
            _short(p.bdf, p.id) for p in ports)
        box = Box("switch", f"PCIe switch {_short(node.bdf, node.id)}", detail, fabric_id=node.id, hop=hop)
        for kid in kids:
            if kid.kind == BRIDGE:  # a downstream port: the link below it is its own
                self.seen.add(kid.id)
                box.children += [item for grand in self.kids.get(kid.id, []) for item in self.items(grand, kid, None)]
            else:  # another function of the switch (no link of its own)
                box.children += self.items(kid, None, None)
        return box

    def _domain(self, node: FabricNode, kids: list[FabricNode]) -> list[Item]:
        numas = [kid for kid in kids if kid.kind == NUMA]
        socket = node.id.rsplit(":", 1)[-1] if node.kind == SOCKET else None
        if node.kind == SOCKET and len(numas) == 1 and len(kids) == 1:
            self.seen.add(numas[0].id)
            return self._numa(numas[0], self.kids.get(numas[0].id, []), socket)
        if node.kind == NUMA:
            return self._numa(node, kids, None)
        box = Box("socket", f"CPU socket {socket}", f"CPU socket {socket}", fabric_id=node.id)
        box.children = [item for kid in kids for item in self.items(kid, None, None)]
        return [box]

    def _numa(self, node: FabricNode, kids: list[FabricNode], socket: str | None) -> list[Item]:
        children = [item for kid in kids for item in self.items(kid, None, None)]
        # The GPUs drawn in it (every GPU of the topology is drawn): not ``Fabric.gpus_below``, a walk
        # of the whole fabric per NUMA node (quadratic in a hostile snapshot's).
        gpus = sorted(_gpus_in(Box("numa", "", "", children)))
        known = set(self.topology.gpu_indices)
        affinities = {self.topology.gpu(g).cpu_affinity for g in gpus if g in known}
        cpus = next(iter(affinities)) if len(affinities) == 1 else None
        label = (f"socket {socket} › " if socket and self.sockets > 1 else "") + f"NUMA node {node.numa_node}" + (
            f" · CPUs {cpus}" if cpus else "")
        bridges = [kid.id.removeprefix("host:") for kid in kids if kid.kind == HOST_BRIDGE]
        detail = label + (f"\nCPU socket {socket}" if socket else "") + ("\nhost bridges: " + ", ".join(bridges) if bridges else "")
        return [Box("numa", label, detail, children, fabric_id=node.id)]

    def _detail(self, node: FabricNode, what: str) -> str:
        host = next((a.id.removeprefix("host:") for a in self.fabric.ancestors(node.id) if a.kind == HOST_BRIDGE), None)
        return f"{what} {node.bdf or node.id}" + (f" (host bridge {host})" if host else "")
