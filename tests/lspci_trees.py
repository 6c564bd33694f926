"""Fabrics built from a real ``lspci -tv`` capture: the capture's tree read into parent links, laid
out as a fake sysfs (``doctor_trees.FakeHost``: the kernel's folders, each device's link files), and
read back by ``sources.fabric_sysfs`` as the live probe reads a host. The shape and the addresses
are the capture's; the link readings are real ones (``doctor_trees.real_links``), placed by the test.

``lspci -tv`` draws each bridge's children from the column after its bus range
(``-[43-53]--+-00.0`` / ``----00.0``), the next rows' ``+-`` / ``\\-`` in that same column; the
domain's root bus from ``-[0000:40]-+-``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from doctor_trees import FakeHost, capture

from gputopo.model import Fabric, Gpu, Link, Nic, NicLink, Topology
from gputopo.model.fabric import GPU, NIC
from gputopo.sources.host.fabric_sysfs import sysfs_fabric
from gputopo.sources.host.pcie_health import LinkState

STARSHIP = "lspci_tv_amd_starship_switches.txt"  # tests/fixtures/doctor/SOURCES.md
_ROOT = re.compile(r"\[([0-9a-f]{4}):([0-9a-f]{2})\]-\+-")
_DEVICE = re.compile(r"([0-9a-f]{2}\.[0-9a-f])(?:-\[([0-9a-f]{2})(?:-[0-9a-f]{2})?\])?(?:-+\s*|\s+(\S.*))?")


@dataclass
class TreeDevice:
    bdf: str
    parent: str | None  # None: on the root bus (a root port, or a device on the host bridge)
    host_bridge: str  # pci<domain>:<bus>, as the kernel names the folder
    secondary_bus: str | None  # a bridge's
    name: str


def read_tree(text: str) -> dict[str, TreeDevice]:
    """Every device of an ``lspci -tv`` tree by bus id, in the order printed."""
    devices: dict[str, TreeDevice] = {}
    opened: dict[int, tuple[str, str | None, str]] = {}  # column of a branch -> (domain, bus, parent bdf)
    for line in text.splitlines():
        root = _ROOT.search(line)
        if root:
            domain, bus = root.groups()
            opened = {root.end() - 2: (domain, bus, None)}
            host = f"pci{domain}:{bus}"
        for match in _DEVICE.finditer(line):
            if match.start() - 2 not in opened:
                continue
            domain, bus, parent = opened[match.start() - 2]
            bdf = f"{domain}:{bus}:{match.group(1)}"
            secondary = match.group(2)
            devices[bdf] = TreeDevice(bdf, parent, host, secondary, (match.group(3) or "").strip())
            if secondary:  # its children: from the column after "]--"
                opened[line.index("]", match.start()) + 3] = (domain, secondary, bdf)
    return devices


def chain(devices: dict[str, TreeDevice], bdf: str) -> list[str]:
    """``[host bridge folder, root port, ..., bdf]``: the device's sysfs path."""
    path = [bdf]
    while devices[path[0]].parent is not None:
        path.insert(0, devices[path[0]].parent)
    return [devices[bdf].host_bridge, *path]


def starship_host(root: Path, links: dict[str, LinkState] | None = None) -> tuple[list[Gpu], list[Nic]]:
    """The capture's host as sysfs: its two GPUs (AMD Device 738c: GPU 0 at 4a:00.0, GPU 1 at
    50:00.0) and its ConnectX-6 (``mlx5_0``), each below root port 40:01.1 through two levels of
    switches (and the GPU board's own); ``links`` puts a link reading on a device by bus id."""
    devices = read_tree(capture(STARSHIP))
    gpus = [Gpu(index=k, name=devices[bdf].name, pci_bus_id=bdf, numa_node=0, socket=0)
            for k, bdf in enumerate(b for b, d in devices.items() if "738c" in d.name)]
    nics = [Nic(name="mlx5_0", pci_bus_id=next(b for b, d in devices.items() if "ConnectX-6" in d.name), numa_node=0)]
    host = FakeHost(root)
    for leaf in [gpu.pci_bus_id for gpu in gpus] + [nic.pci_bus_id for nic in nics]:
        path = chain(devices, leaf)
        for depth in range(2, len(path) + 1):
            bdf = path[depth - 1]
            host.device(path[:depth], gpu=any(g.pci_bus_id == bdf for g in gpus), link=(links or {}).get(bdf))
    return gpus, nics


def starship_fabric(root: Path, links: dict[str, LinkState] | None = None) -> tuple[list[Gpu], list[Nic], Fabric]:
    gpus, nics = starship_host(root, links)
    fabric = sysfs_fabric(gpus, nics, root)
    assert fabric is not None
    return gpus, nics, fabric


def starship_topology(root: Path, links: dict[str, LinkState] | None = None,
                      with_fabric: bool = True) -> tuple[Topology, Fabric]:
    """The host as the live probe would read it: its GPUs, NIC, the pair words derived from the
    fabric (PXB, GPU to GPU and GPU to NIC) and the fabric (or, ``with_fabric`` false, only the words)."""
    gpus, nics, fabric = starship_fabric(root, links)
    gpu_id = {node.gpu: node.id for node in fabric.nodes if node.kind == GPU}
    nic_id = next(node.id for node in fabric.nodes if node.kind == NIC)
    topology = Topology(
        source="lspci -tv", gpus=gpus, nics=nics, links=[Link(0, 1, fabric.path_word(gpu_id[0], gpu_id[1]))],
        nic_links=[NicLink(gpu=k, nic="mlx5_0", type=fabric.path_word(gpu_id[k], nic_id)) for k in (0, 1)],
        fabric=fabric if with_fabric else None)
    return topology, fabric
