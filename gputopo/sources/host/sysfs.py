"""What Linux's sysfs says about where devices sit: CPU sockets, NUMA distances, PCI devices' nodes.

NVML gives a GPU's CPU affinity and NUMA node, but not its CPU socket: a NUMA node is not a socket
(AMD EPYC NPS2/NPS4, Intel sub-NUMA clustering and Grace put several nodes in one socket). The
kernel knows both:

- ``/sys/devices/system/cpu/cpuN/topology/physical_package_id``: the socket of CPU N;
- ``/sys/devices/system/node/nodeN/distance``: node N's distance to every online node (10 = local),
  in the order of ``/sys/devices/system/node/online``;
- ``/sys/bus/pci/devices/<bdf>/numa_node``: a PCI device's node (``-1``: the firmware does not say);
- ``/sys/class/infiniband/<name>/device``: an RDMA NIC's PCI device, and its ``net/<netdev>``
  folder the network interface on it (``ib0``, ``enp12s0np0``);
- ``/sys/bus/pci/devices/<bdf>`` links into ``/sys/devices/pci<domain>:<bus>/<root port>/.../<bdf>``:
  the bridges between a device and its host bridge, from which a GPU's path to a NIC (PIX, PXB,
  PHB, NODE, SYS, as nvidia-smi words them) is read.

Pure functions of a root directory (default ``/``) or a ``Tree`` (``sources/host/tree.py``: a folder or a
gathered archive, every path resolved inside it), so tests build a fake tree in a temporary
directory. Anything missing or unreadable gives ``None`` (not known), never an error.
"""

from __future__ import annotations

import os

from gputopo.model import Nic, NicLink, Topology, normalize_pci_bus_id
from gputopo.model.fabric import pcie_path_word
from gputopo.notation import expand_number_list, format_cpu_list
from gputopo.sources.host.tree import Root, Tree, as_tree

CPU_DIR = "sys/devices/system/cpu"
NODE_DIR = "sys/devices/system/node"
PCI_DIR = "sys/bus/pci/devices"
INFINIBAND_DIR = "sys/class/infiniband"


def _read(root: Root, rel: str) -> str | None:
    text = as_tree(root).read_text(rel, 1 << 16)
    return None if text is None else text.strip()


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def cpu_socket(cpu: int, root: Root = "/") -> int | None:
    """The socket (physical package) of CPU ``cpu``; None where sysfs does not say."""
    return _int(_read(root, f"{CPU_DIR}/cpu{cpu}/topology/physical_package_id"))


def sockets_of_cpus(
    cpu_list: str | None, root: Root = "/", known: dict[int, int | None] | None = None
) -> set[int] | None:
    """The sockets of the CPUs in ``cpu_list`` ("0-11,24-35"); None if any is unknown. ``known``
    caches CPU -> socket across calls (GPUs share their CPUs)."""
    if not cpu_list:
        return None
    try:
        cpus = expand_number_list(cpu_list)
    except ValueError:
        return None
    known = {} if known is None else known
    sockets = set()
    for cpu in cpus:
        if cpu not in known:
            known[cpu] = cpu_socket(cpu, root)
        socket = known[cpu]
        if socket is None or socket < 0:
            return None
        sockets.add(socket)
    return sockets or None


def gpu_socket(
    cpu_affinity: str | None, root: Root = "/", known: dict[int, int | None] | None = None
) -> int | None:
    """The one socket all CPUs near a GPU belong to; None when unknown or spread over several."""
    sockets = sockets_of_cpus(cpu_affinity, root, known)
    return next(iter(sockets)) if sockets is not None and len(sockets) == 1 else None


def online_nodes(root: Root = "/") -> list[int] | None:
    """The online NUMA nodes (``/sys/devices/system/node/online``, else the ``nodeN`` folders)."""
    text = _read(root, f"{NODE_DIR}/online")
    if text:
        try:
            return expand_number_list(text)
        except ValueError:
            return None
    names = as_tree(root).listdir(NODE_DIR)
    if names is None:
        return None
    nodes = sorted(int(name[4:]) for name in names if name.startswith("node") and name[4:].isascii() and name[4:].isdigit())
    return nodes or None


def numa_distances(root: Root = "/") -> dict[str, dict[str, int]] | None:
    """``{"0": {"0": 10, "1": 32}, ...}``: each node's distance to every node; None if not known."""
    nodes = online_nodes(root)
    if not nodes:
        return None
    result: dict[str, dict[str, int]] = {}
    for node in nodes:
        text = _read(root, f"{NODE_DIR}/node{node}/distance")
        values = [_int(v) for v in text.split()] if text else []
        if len(values) != len(nodes) or any(v is None for v in values):
            return None
        result[str(node)] = {str(other): int(v) for other, v in zip(nodes, values)}  # type: ignore[arg-type]
    return result


def pci_numa_node(bus_id: str | None, root: Root = "/") -> int | None:
    """A PCI device's NUMA node; None where unknown (``-1``: the firmware does not say)."""
    bdf = normalize_pci_bus_id(bus_id)
    if bdf is None:
        return None
    node = _int(_read(root, f"{PCI_DIR}/{bdf}/numa_node"))
    return node if node is not None and node >= 0 else None


def pci_local_cpus(bus_id: str | None, root: Root = "/") -> str | None:
    """The CPUs near a PCI device (``local_cpulist``), as a CPU list; None where unknown."""
    bdf = normalize_pci_bus_id(bus_id)
    text = _read(root, f"{PCI_DIR}/{bdf}/local_cpulist") if bdf else None
    if not text:
        return None
    try:
        return format_cpu_list(expand_number_list(text))
    except ValueError:
        return None


def infiniband_nics(root: Root = "/") -> list[Nic]:
    """The RDMA NICs (``mlx5_0`` ...) with their PCI bus id, NUMA node and near CPUs."""
    tree = as_tree(root)
    nics = []
    for name in tree.listdir(INFINIBAND_DIR) or []:
        device = tree.resolve(f"{INFINIBAND_DIR}/{name}/device")
        bus_id = normalize_pci_bus_id(device[-1]) if device else None
        nics.append(Nic(name=name, pci_bus_id=bus_id, numa_node=pci_numa_node(bus_id, tree),
                        cpu_affinity=pci_local_cpus(bus_id, tree), netdev=_netdev(tree, f"{INFINIBAND_DIR}/{name}/device"),
                        rdma_device=name))
    return nics


def _netdev(tree: Tree, device: str) -> str | None:
    """The network interface on a NIC's PCI device (the first by name; a NIC port has one)."""
    names = tree.listdir(f"{device}/net")
    return names[0] if names else None


def pci_path(bus_id: str | None, root: Root = "/") -> list[str] | None:
    """``["pci0000:00", "0000:00:01.0", "0000:01:00.0", ..., bdf]``: the host bridge and the bridges
    down to the device, from where sysfs places it; None where unknown."""
    bdf = normalize_pci_bus_id(bus_id)
    if bdf is None:
        return None
    parts = as_tree(root).resolve(f"{PCI_DIR}/{bdf}")
    if not parts:
        return None
    starts = [k for k, part in enumerate(parts) if part.startswith("pci") and ":" in part]
    if not starts or parts[-1] != bdf:
        return None
    return list(parts[starts[0]:])


def nic_links(topology: Topology, root: Root = "/") -> list[NicLink]:
    """How each GPU reaches each NIC, from their places in the PCI tree (where both are known)."""
    links = []
    nic_paths = {nic.name: (nic, pci_path(nic.pci_bus_id, root)) for nic in topology.nics}
    for gpu in topology.gpus:
        gpu_path = pci_path(gpu.pci_bus_id, root)
        if gpu_path is None:
            continue
        for name, (nic, nic_path) in nic_paths.items():
            if nic_path is None:
                continue
            same_node = None if gpu.numa_node is None or nic.numa_node is None else gpu.numa_node == nic.numa_node
            word = pcie_path_word(gpu_path, nic_path, same_node)
            if word is not None:
                links.append(NicLink(gpu=gpu.index, nic=name, type=word))
    return links


def add_host_locality(topology: Topology, root: Root = "/") -> None:
    """What the live probe adds from sysfs: each GPU's socket (from the CPUs near it), the NUMA
    distances, and the RDMA NICs with their NUMA nodes, network interfaces and paths to the GPUs
    (where the topology has no NICs yet)."""
    root = as_tree(root)
    known: dict[int, int | None] = {}
    for gpu in topology.gpus:
        if gpu.socket is None:
            gpu.socket = gpu_socket(gpu.cpu_affinity, root, known)
    if topology.numa_distances is None:
        topology.numa_distances = numa_distances(root)
    if not topology.nics:
        topology.nics = infiniband_nics(root)
        topology.nic_links = nic_links(topology, root)
