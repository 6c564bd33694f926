"""The fabric graph (``gputopo.model.fabric``) from sysfs: the live host's ``/``, a gathered archive or
a folder (every path through the confined ``Tree``).

Each GPU's and NIC's ``/sys/bus/pci/devices/<bdf>`` link leads into
``/sys/devices/pci<domain>:<bus>/<root port>/.../<bdf>``: its host bridge and every bridge down to
it (``pcie_health.gpu_pcie_path``, which also reads each hop's link state and, as root, its ACS
control word). Those chains, merged, are the PCIe tree; a host bridge hangs under the NUMA node its
root port reports (``numa_node``), a NUMA node under the CPU socket its GPUs' CPUs are in.
"""

from __future__ import annotations

from gputopo.model import Gpu, Nic, Topology
from gputopo.model.fabric import BRIDGE, DEVICE, GPU, HOST_BRIDGE, NIC, NUMA, ROOT_PORT, SOCKET, Fabric, FabricNode
from gputopo.sources.host.pcie_health import GpuPciePath, gpu_pcie_path
from gputopo.sources.host.sysfs import pci_numa_node
from gputopo.sources.host.tree import Root, as_tree


def sysfs_fabric(gpus: list[Gpu], nics: list[Nic], root: Root = "/") -> Fabric | None:
    """The PCIe tree above ``gpus`` and ``nics`` (by bus id), with NUMA nodes and sockets where sysfs
    and the GPUs say; None where sysfs places none of them (no ``/sys``, a container without it)."""
    tree = as_tree(root)
    fabric = Fabric()
    placed = False
    for gpu in gpus:
        path = gpu_pcie_path(gpu.pci_bus_id, tree) if gpu.pci_bus_id else None
        if path is not None:
            _add_path(fabric, path, tree, GPU, gpu=gpu.index)
            placed = True
            _add_numa(fabric, path, gpu.numa_node, gpu.socket)
    for nic in nics:
        path = gpu_pcie_path(nic.pci_bus_id, tree) if nic.pci_bus_id else None
        if path is not None:
            _add_path(fabric, path, tree, NIC, nic=nic.name)
            placed = True
            _add_numa(fabric, path, nic.numa_node, None)
    return fabric if placed else None


def _add_path(fabric: Fabric, path: GpuPciePath, tree, leaf_kind: str, **leaf) -> None:
    host_id = f"host:{path.host_bridge}"
    fabric.add(FabricNode(host_id, HOST_BRIDGE))
    parent = host_id
    for depth, node in enumerate(path.nodes):
        last = depth == len(path.nodes) - 1
        kind = leaf_kind if last else (ROOT_PORT if depth == 0 else BRIDGE) if node.is_bridge else DEVICE
        link = node.link
        fabric.add(FabricNode(
            f"pci:{node.bdf}", kind, parent=parent, bdf=node.bdf,
            numa_node=pci_numa_node(node.bdf, tree) if depth == 0 else None,
            link_gts_current=link.current_speed_gts, link_gts_max=link.max_speed_gts,
            link_width_current=link.current_width, link_width_max=link.max_width,
            acs_control=node.acs.control, **(leaf if last else {})))
        parent = f"pci:{node.bdf}"


def _add_numa(fabric: Fabric, path: GpuPciePath, numa_node: int | None, socket: int | None) -> None:
    """Hang the path's host bridge under its NUMA node (the root port's, else the device's own), and
    that node under the device's CPU socket where known."""
    host = fabric.node(f"host:{path.host_bridge}")
    root_port = fabric.node(f"pci:{path.nodes[0].bdf}") if path.nodes else None
    node = root_port.numa_node if root_port is not None and root_port.numa_node is not None else numa_node
    if host is None or node is None:
        return
    numa = fabric.add(FabricNode(f"numa:{node}", NUMA, numa_node=node))
    if host.parent is None:
        host.parent = numa.id
        host.numa_node = node
    if socket is not None and numa.parent is None:
        fabric.add(FabricNode(f"socket:{socket}", SOCKET))
        numa.parent = f"socket:{socket}"


def add_fabric(topology: Topology, root: Root = "/") -> None:
    """``topology.fabric`` from sysfs under ``root`` where the topology has none yet (the live probe,
    a gathered archive: the sources that read the machine's tree)."""
    if topology.fabric is None:
        topology.fabric = sysfs_fabric(topology.gpus, topology.nics, root)
