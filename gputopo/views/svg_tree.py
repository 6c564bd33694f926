"""What the topology drawing holds: the tree of boxes, GPUs and NICs (no coordinates yet).

The picture is lstopo-like nested boxes: host > NUMA node (or CPU affinity, or "placement
unknown") > PCIe switch (GPUs with a PIX path) > GPUs, with each NIC placed in the sequence right
beside its nearest GPU. The nesting is the PCIe path between two GPUs; NVLinks are the only edges
(``svg_layout`` places them). All GPUs of a band sit on one row.

GPUs that reach every other member through NVSwitch (or, in nvidia-smi text that cannot say so,
with the same ``NV#`` to every peer of 5 or more GPUs) share one hub node: one spoke per GPU
instead of n(n-1)/2 edges. A hub-only topology with more than 8 GPUs is drawn as two bands, one
above and one below the hub (DGX-2's two baseboards; the hosts of a GB200 NVL72 rack).
Topologies with more than 16 GPUs are drawn compact: GPUs as small chips, hosts as boxes.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Union

from gputopo.model import PCIE_PATHS, Link, Topology

NORMAL = {"gpu_w": 168, "gpu_h": 100, "nic_w": 64, "nic_h": 56}
COMPACT = {"gpu_w": 30, "gpu_h": 30, "nic_w": 56, "nic_h": 22}
NIC_MAX_W = 150  # a NIC's box grows with its words up to this (its tooltip says the rest)
HEAD_H = 20  # a box's label strip
PAD = 8  # space inside a box, below its content
GAP = 10  # between items in a row
CHAR_W = 7.0  # width of a 11px sans-serif character (DejaVu's digits and capitals), for fitting labels
COMPACT_ABOVE = 16  # more GPUs than this: compact drawing


@dataclass
class Hop:
    """A PCIe link drawn as trained below what both its ends can do (``svg_fabric``): its words
    (``x8 of x16``, ``8 of 16 GT/s``), whether its width is down (else only its speed, which an idle
    GPU lowers by design), and a tooltip."""

    words: str
    narrow: bool
    detail: str


@dataclass
class GpuItem:
    index: int
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0
    hop: Hop | None = None  # the PCIe link above it, where the fabric shows it trained down


@dataclass
class NicItem:
    name: str
    nearest: list[int]  # GPUs with the best path to this NIC
    path: str | None  # that best path word (PIX, PXB, PHB, NODE, SYS) or None
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0
    connect_left: int | None = None  # GPU drawn right beside it that is one of its nearest
    connect_right: int | None = None

    def lines(self) -> list[str]:
        """What the NIC's box says under its name: its best path word and those GPUs."""
        if not self.nearest:
            return ["no GPU path"]
        return [f"{self.path} to", f"GPU {','.join(map(str, self.nearest))}"]

    def width(self, sizes: dict[str, int]) -> float:
        if sizes is COMPACT:
            return sizes["nic_w"]
        longest = max(len(text) for text in [self.name, *self.lines()])
        return min(NIC_MAX_W, max(sizes["nic_w"], longest * CHAR_W + 12))


@dataclass
class Box:
    kind: str  # "host", "numa", "cpus", "unknown", "switch"
    label: str
    detail: str  # tooltip text
    children: list[Union["Box", GpuItem, NicItem]] = field(default_factory=list)
    x: float = 0
    y: float = 0
    w: float = 0
    h: float = 0
    level: int = 0
    header_at_bottom: bool = False
    fabric_id: str | None = None  # the fabric node it draws (``svg_fabric``); None for an inferred box
    hop: Hop | None = None  # the PCIe link above it, where the fabric shows it trained down


Item = Union[Box, GpuItem, NicItem]


def pcie_word(link: Link) -> str | None:
    """The PCIe path of a link: NVML's ``pcie_path`` or the type itself when it is a PCIe word."""
    if link.pcie_path in PCIE_PATHS:
        return link.pcie_path
    return link.type if link.type in PCIE_PATHS else None


def hub_members(topology: Topology) -> list[int]:
    """The GPUs drawn around one NVSwitch hub (empty: no hub). See the module text for the rule."""
    table = topology.link_table()  # (a 576-GPU domain: 165,600 links, a few kinds: read in whole columns)
    switched = table.kinds_where(k for k, link in enumerate(table.examples) if link.nvswitch)
    flagged = sorted(set(itertools.compress(table.ends_a, switched)) | set(itertools.compress(table.ends_b, switched)))
    single = table.one_per_pair()  # (else each pair's link is the last listed: looked up pair by pair)
    if len(flagged) >= 3:
        if single:  # every pair of the flagged GPUs switched: as many switched pairs as pairs
            return flagged if table.pairs_linked(switched) == len(flagged) * (len(flagged) - 1) // 2 else []
        links = topology.link_map()
        return flagged if all(links.get(p) is not None and links[p].nvswitch for p in itertools.combinations(flagged, 2)) else []
    members = topology.gpu_indices
    if len(members) < 5:
        return []
    if single and table.covers_every_pair(members) and len(table.ends_a) == len(members) * (len(members) - 1) // 2:
        types = {table.kinds[k][0] for k in set(table.kind_of)}  # (every link joins two of them)
    else:
        links = topology.link_map()
        types = {links[p].type if p in links else None for p in topology.pairs()}
    if len(types) == 1 and next(iter(types)) is not None and next(iter(types)).startswith("NV"):
        return sorted(members)
    return []


def fit(text: str, width: float, char_w: float = CHAR_W) -> str:
    """``text`` cut with an ellipsis so that it fits ``width`` pixels."""
    room = max(1, int(width / char_w))
    return text if len(text) <= room else text[: max(0, room - 1)] + "…"


def wrap(text: str, width: float, lines: int = 2, char_w: float = CHAR_W) -> list[str]:
    """``text`` in at most ``lines`` lines of ``width`` pixels, broken at spaces (or inside a word
    longer than a line); what still does not fit is cut with an ellipsis on the last line."""
    room = max(1, int(width / char_w))
    out: list[str] = []
    rest = text.strip()
    while rest and len(out) < lines - 1 and len(rest) > room:
        cut = rest.rfind(" ", 0, room + 1)
        cut = cut if cut > 0 else room
        out.append(rest[:cut].rstrip())
        rest = rest[cut:].lstrip()
    if rest or not out:
        out.append(fit(rest, width, char_w))
    return out


def _domain_key(topology: Topology, index: int) -> tuple:
    gpu = topology.gpu(index)
    if gpu.numa_node is not None:
        return ("numa", gpu.numa_node)
    if gpu.cpu_affinity:
        return ("cpus", gpu.cpu_affinity)
    return ("unknown",)


def _domain_box(topology: Topology, key: tuple, gpus: list[int]) -> Box:
    affinities = {topology.gpu(g).cpu_affinity for g in gpus}
    cpus = next(iter(affinities)) if len(affinities) == 1 else None
    if key[0] == "numa":
        label = f"NUMA node {key[1]}" + (f" · CPUs {cpus}" if cpus else "")
        return Box("numa", label, label + "\nGPUs attached to this NUMA node's PCIe root")
    if key[0] == "cpus":
        label = f"CPU affinity {key[1]}"
        return Box("cpus", label, label + " (the source gives no NUMA node)")
    return Box("unknown", "placement unknown", "the source gives neither NUMA node nor CPU affinity for these GPUs")


def _switch_groups(topology: Topology, gpus: list[int]) -> list[list[int]]:
    """GPUs of one domain joined by PIX paths (one PCIe switch), as groups of 2 or more."""
    parent = {g: g for g in gpus}

    def root(g: int) -> int:
        while parent[g] != g:
            g = parent[g]
        return g

    links = topology.link_map()
    for i, a in enumerate(gpus):
        for b in gpus[i + 1 :]:
            link = links.get((a, b))
            if link is not None and pcie_word(link) == "PIX":
                parent[root(b)] = root(a)
    groups: dict[int, list[int]] = {}
    for g in gpus:
        groups.setdefault(root(g), []).append(g)
    return [sorted(v) for v in groups.values() if len(v) > 1]


def nic_items(topology: Topology) -> list[NicItem]:
    """Each NIC with its nearest GPUs: the NIC links grouped by NIC in one pass (a walk of every link
    per NIC cost 4,096 NICs x 65,536 links in a snapshot's drawing)."""
    by_nic: dict[str, list[tuple[int, int]]] = {}
    for nl in topology.nic_links:
        if nl.type in PCIE_PATHS:
            by_nic.setdefault(nl.nic, []).append((PCIE_PATHS.index(nl.type), nl.gpu))
    items = []
    for nic in topology.nics:
        paths = by_nic.get(nic.name, [])
        if paths:
            best = min(rank for rank, _ in paths)
            nearest = sorted(g for rank, g in paths if rank == best)
            items.append(NicItem(nic.name, nearest, PCIE_PATHS[best]))
        else:
            items.append(NicItem(nic.name, [], None))
    return items


def _insert_nic(children: list[Item], nic: NicItem) -> None:
    """Put the NIC right after the first of its nearest GPUs in this row (or at the end)."""
    for pos, item in enumerate(children):
        if isinstance(item, GpuItem) and item.index in nic.nearest:
            while pos + 1 < len(children) and isinstance(children[pos + 1], NicItem):
                pos += 1
            children.insert(pos + 1, nic)
            return
    children.append(nic)


def _host_domains(topology: Topology, gpus: list[int], nics: list[NicItem], compact: bool) -> list[Item]:
    """The children of one host: NUMA/affinity boxes with switches, GPUs and NICs (compact: flat)."""
    if compact:
        children: list[Item] = [GpuItem(g) for g in gpus]
        for nic in nics:
            _insert_nic(children, nic)
        return children
    by_key: dict[tuple, list[int]] = {}
    for g in gpus:
        by_key.setdefault(_domain_key(topology, g), []).append(g)
    domains: list[Item] = []
    where: dict[int, Box] = {}
    for key, members in by_key.items():
        box = _domain_box(topology, key, members)
        in_switch = {g: grp for grp in _switch_groups(topology, members) for g in grp}
        done: set[int] = set()
        for g in members:
            if g in done:
                continue
            if g in in_switch:
                grp = in_switch[g]
                switch = Box("switch", "PCIe switch", f"GPUs {','.join(map(str, grp))}: PIX (one PCIe switch)")
                switch.children = [GpuItem(m) for m in grp]
                box.children.append(switch)
                done.update(grp)
                where.update({m: switch for m in grp})
            else:
                box.children.append(GpuItem(g))
                done.add(g)
                where[g] = box
        domains.append(box)
    for nic in nics:
        near = [where[g] for g in nic.nearest if g in where]
        if near and nic.path in ("PIX", "PXB") and all(b is near[0] for b in near):
            _insert_nic(near[0].children, nic)
        elif near:
            target = next(d for d in domains if isinstance(d, Box) and _contains(d, nic.nearest[0]))
            _insert_nic(target.children, nic)
        else:
            domains.append(Box("unknown", "NICs, placement unknown", "no path from these NICs to a GPU is known", [nic]))
    return domains


def _contains(box: Box, gpu: int) -> bool:
    return any(
        (isinstance(c, GpuItem) and c.index == gpu) or (isinstance(c, Box) and _contains(c, gpu)) for c in box.children
    )


def build_roots(topology: Topology, compact: bool) -> tuple[Box | None, list[Item]]:
    """The top-level items of the drawing and, for one host, the host frame around them."""
    nics = nic_items(topology)
    hosts: dict[str | None, list[int]] = {}
    for g in topology.gpu_indices:
        hosts.setdefault(topology.gpu(g).host, []).append(g)
    if len(hosts) <= 1:
        name = next(iter(hosts), None) or topology.host
        frame = Box("host", name or "host", f"host {name}" if name else "the host (its name is not in the source)")
        return frame, _host_domains(topology, topology.gpu_indices, nics, compact)
    roots: list[Item] = []
    placed: set[str] = set()
    for host, gpus in hosts.items():
        mine = [n for n in nics if n.nearest and n.nearest[0] in gpus]
        placed.update(n.name for n in mine)
        numa = sorted({topology.gpu(g).numa_node for g in gpus if topology.gpu(g).numa_node is not None})
        detail = f"host {host or '(not named)'}: {len(gpus)} GPUs" + (f", NUMA nodes {','.join(map(str, numa))}" if numa else "")
        roots.append(Box("host", host or "(host not named)", detail, _host_domains(topology, gpus, mine, compact)))
    rest = [n for n in nics if n.name not in placed]
    if rest:
        roots.append(Box("unknown", "NICs, placement unknown", "no path from these NICs to a GPU is known", list(rest)))
    return None, roots


def measure(item: Item, sizes: dict[str, int]) -> tuple[float, int]:
    """Width of an item and how many box levels it holds (0 for a GPU or NIC)."""
    if isinstance(item, GpuItem):
        return sizes["gpu_w"], 0
    if isinstance(item, NicItem):
        return item.width(sizes), 0
    widths, depths = zip(*(measure(c, sizes) for c in item.children)) if item.children else ((0,), (0,))
    content = sum(widths) + GAP * (len(widths) - 1) + 2 * PAD
    label_room = min(len(item.label), 40 if item.fabric_id else 30) * CHAR_W + 2 * PAD + (len(item.hop.words) * CHAR_W + PAD if item.hop else 0)
    return max(content, label_room if item.kind != "switch" or item.fabric_id else 0, 40), 1 + max(depths)
