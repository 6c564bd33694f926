"""NVLink edges of the fabric graph (``gputopo.model.fabric``), from where each GPU's links end, as
NCCL builds them (``src/graph/xml.cc``: one ``<nvlink target count tclass>`` per far end;
``topo.cc``'s ``ncclTopoAddNvLinks``: a GPU target is a GPU<->GPU link, any other an NVSwitch).

Every source that names each link's far end gives a ``LinkEnd`` per link (the live NVML probe: the
remote device type and PCI info of each link; NCCL's topology XML: its ``<nvlink>`` elements);
``add_nvlink_edges`` counts them per far end into one edge each: GPU<->GPU (the two GPUs' views
normally agree; the larger is kept, as the pair table keeps it) or GPU->NVSwitch, one NVSwitch node
per switch bus id (``pci:<bdf>``, kind ``nvswitch``), and the one ``nvswitch:fabric`` node where a
switch has no bus id (NCCL's sentinel ``fffffff:ffff:ff``: a switch this host cannot see, as on a
GB200 NVL72's switch trays). A link to the CPU (POWER9's NVLink) or to a GPU this topology does not
hold makes no edge. Pair NVLink counts are then derived from the edges (``Fabric.nvlink_count``).

A gathered archive has the machine's tree (its sysfs) but its NVLinks only as ``nvidia-smi topo -m``'s
pair words: ``add_pair_word_edges`` lays them on that tree (a direct ``NV#`` is that many links
between the two GPUs; through NVSwitch, each GPU's most ``NV#`` to a switched peer is its links to the
``nvswitch:fabric`` node; a pair the text cannot place, ``nvswitch`` unknown, makes no edge). A
source of pair words alone still makes no fabric.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputopo.model import Topology
from gputopo.model.fabric import (
    BRIDGE,
    DEVICE,
    GPU,
    NVLINK,
    NVSWITCH,
    NVSWITCH_FABRIC,
    Fabric,
    FabricEdge,
    FabricNode,
)

REMOTE_GPU, REMOTE_SWITCH = "gpu", "switch"
_NO_BUS_IDS = {None, "0000:00:00.0"}  # an empty answer, or zeros: no device the host can name


@dataclass(frozen=True)
class LinkEnd:
    """Where one of a GPU's NVLinks ends (``links`` of them, where the source counts them as NCCL's
    ``<nvlink count>`` does): ``remote`` ``gpu`` or ``switch``, its bus id where known
    (``normalize_pci_bus_id`` form), and whether the links are up (None: the source does not say)."""

    remote: str
    bus_id: str | None
    active: bool | None = True
    links: int = 1


def gpu_fabric_node(fabric: Fabric, topology: Topology, index: int) -> FabricNode:
    """The GPU's node: the one the fabric has, else a new one (``pci:<bdf>``, else ``gpu:<index>``:
    no bus id, or one another node has) with no parent (its place in the PCIe tree not known)."""
    node = fabric.gpu_node(index)
    if node is not None:
        return node
    bdf = topology.gpu(index).pci_bus_id if topology.gpu(index) is not None else None
    taken = fabric.node(f"pci:{bdf}") if bdf else None  # hosts of one domain repeat bus ids
    if bdf is None or taken is not None:
        return fabric.add(FabricNode(f"gpu:{index}", GPU, gpu=index))
    return fabric.add(FabricNode(f"pci:{bdf}", GPU, bdf=bdf, gpu=index))


def add_nvlink_edges(topology: Topology, ends: dict[int, list[LinkEnd]]) -> None:
    """NVLink edges for ``ends`` (GPU index -> its links' far ends) into ``topology.fabric`` (made,
    with the GPUs' nodes only, where the topology has none and some GPU has an NVLink)."""
    if not any(ends.values()):
        return
    fabric = topology.fabric if topology.fabric is not None else Fabric()
    by_bus = {gpu.pci_bus_id: gpu.index for gpu in topology.gpus if gpu.pci_bus_id}
    # (node a, node b) -> [links, up, up said]: per GPU pair the larger of the two views.
    pairs: dict[tuple[str, str], list[int]] = {}
    for index in sorted(ends):
        own = gpu_fabric_node(fabric, topology, index).id
        counted: dict[str, list[int]] = {}
        for end in ends[index]:
            far = _far_node(fabric, topology, by_bus, index, end)
            if far is None:
                continue
            tally = counted.setdefault(far, [0, 0, 0])
            tally[0] += end.links
            tally[1] += end.links if end.active is True else 0
            tally[2] += end.links if end.active is not None else 0
        for far, (links, up, said) in counted.items():
            key = (own, far) if fabric.node(far).kind == NVSWITCH else tuple(sorted((own, far)))
            known = pairs.setdefault(key, [0, 0, 0])
            if links > known[0]:
                known[:] = [links, up, said]
    for (a, b), (links, up, said) in pairs.items():
        fabric.edges.append(FabricEdge(a, b, NVLINK, count=links, active=up if said == links else None))
    topology.fabric = fabric


def _far_node(fabric: Fabric, topology: Topology, by_bus: dict[str, int], index: int, end: LinkEnd) -> str | None:
    if end.remote == REMOTE_SWITCH:
        if end.bus_id in _NO_BUS_IDS:
            return fabric.add(FabricNode(NVSWITCH_FABRIC, NVSWITCH)).id
        switch = fabric.add(FabricNode(f"pci:{end.bus_id}", NVSWITCH, bdf=end.bus_id))
        if switch.kind in (BRIDGE, DEVICE):  # a PCI device the tree holds, which NVLinks end at
            switch.kind = NVSWITCH
        return switch.id if switch.kind == NVSWITCH else None
    peer = by_bus.get(end.bus_id) if end.remote == REMOTE_GPU else None
    if peer is None or peer == index:
        return None
    return gpu_fabric_node(fabric, topology, peer).id


def add_pair_word_edges(topology: Topology) -> None:
    """NVLink edges from the pair table's ``NV#`` words, onto a fabric a source of the machine's tree
    already made (nothing where there is none): one pass over one host's links (no ``link_table``
    kept: the reader's caller may still change the words)."""
    if topology.fabric is None:
        return
    ends: dict[int, list[LinkEnd]] = {}
    switch_links: dict[int, int] = {}
    bus_of = {gpu.index: gpu.pci_bus_id for gpu in topology.gpus}
    for link in topology.links:
        if not link.nvlink_count or link.nvswitch is None:
            continue
        if link.nvswitch:
            for gpu in (link.a, link.b):
                switch_links[gpu] = max(switch_links.get(gpu, 0), link.nvlink_count)
        elif bus_of.get(link.b):
            ends.setdefault(link.a, []).append(LinkEnd(REMOTE_GPU, bus_of[link.b], None, links=link.nvlink_count))
    for gpu, links in switch_links.items():
        ends.setdefault(gpu, []).append(LinkEnd(REMOTE_SWITCH, None, None, links=links))
    add_nvlink_edges(topology, ends)
