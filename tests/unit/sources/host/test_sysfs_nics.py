"""RDMA NICs from a fake sysfs laid out as the kernel does: /sys/devices/pci<domain>:<bus>/<bridges>/<bdf>
with /sys/bus/pci/devices/<bdf> and /sys/class/infiniband/<name>/device linking into it; their
network interfaces and how each GPU reaches them (PIX, PXB, PHB, NODE, SYS)."""

from __future__ import annotations

import os
from pathlib import Path

from gputopo.model import Gpu, Topology
from gputopo.sources.host import sysfs

# Where each device sits: host bridge, bridges down to it, itself.
TREE = {
    "gpu0": ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:08.0", "0000:03:00.0"],  # switch port 08
    "nic0": ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:10.0", "0000:04:00.0"],  # same switch, port 10
    "gpu1": ["pci0000:00", "0000:00:01.0", "0000:01:00.0", "0000:02:18.0", "0000:05:00.0", "0000:06:00.0",
             "0000:07:00.0"],  # a second switch below the first
    "gpu2": ["pci0000:00", "0000:00:03.0", "0000:09:00.0"],  # another root port of the host bridge
    "gpu3": ["pci0000:40", "0000:40:01.0", "0000:41:00.0"],  # another host bridge, same NUMA node
    "gpu4": ["pci0000:80", "0000:80:01.0", "0000:81:00.0"],  # the other socket
}
NODE_OF = {"gpu0": 0, "nic0": 0, "gpu1": 0, "gpu2": 0, "gpu3": 0, "gpu4": 1}


def make_tree(root: Path, netdev: str | None = "ib0") -> Path:
    for name, parts in TREE.items():
        device = root / "sys" / "devices" / Path(*parts)
        device.mkdir(parents=True)
        (device / "numa_node").write_text(f"{NODE_OF[name]}\n")
        link = root / "sys" / "bus" / "pci" / "devices" / parts[-1]
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(device, link.parent), link)  # relative, as the kernel's
    nic_device = root / "sys" / "devices" / Path(*TREE["nic0"])
    if netdev:
        (nic_device / "net" / netdev).mkdir(parents=True)
    (root / "sys" / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    infiniband = root / "sys" / "class" / "infiniband" / "mlx5_0"
    os.symlink(os.path.relpath(nic_device, infiniband), infiniband / "device")
    return root


def gpus() -> list[Gpu]:
    return [Gpu(index=k, pci_bus_id="0000" + TREE[f"gpu{k}"][-1], numa_node=NODE_OF[f"gpu{k}"]) for k in range(5)]


def test_rdma_nic_with_its_netdev_and_rdma_name(tmp_path):
    (nic,) = sysfs.infiniband_nics(make_tree(tmp_path))
    assert (nic.name, nic.rdma_device, nic.netdev, nic.pci_bus_id, nic.numa_node) == (
        "mlx5_0", "mlx5_0", "ib0", "0000:04:00.0", 0)
    assert nic.rdma_name == "mlx5_0"


def test_no_net_folder_leaves_the_netdev_unknown(tmp_path):
    (nic,) = sysfs.infiniband_nics(make_tree(tmp_path, netdev=None))
    assert nic.netdev is None


def test_gpu_to_nic_paths_from_the_pci_tree(tmp_path):
    root = make_tree(tmp_path)
    topology = Topology(gpus=gpus())
    sysfs.add_host_locality(topology, root)
    assert [(link.gpu, link.nic, link.type) for link in topology.nic_links] == [
        (0, "mlx5_0", "PIX"), (1, "mlx5_0", "PXB"), (2, "mlx5_0", "PHB"), (3, "mlx5_0", "NODE"), (4, "mlx5_0", "SYS")]


def test_pcie_path_words():
    word = sysfs.pcie_path_word
    assert word(TREE["gpu0"], TREE["nic0"], True) == "PIX"
    assert word(TREE["gpu1"], TREE["nic0"], True) == "PXB"
    assert word(TREE["gpu2"], TREE["nic0"], True) == "PHB"
    assert word(TREE["gpu3"], TREE["nic0"], True) == "NODE"
    assert word(TREE["gpu4"], TREE["nic0"], False) == "SYS"
    assert word(TREE["gpu3"], TREE["nic0"], None) is None  # NUMA nodes unknown: no word claimed


def test_devices_outside_the_pci_tree_get_no_path(tmp_path):
    assert sysfs.pci_path("0000:03:00.0", tmp_path) is None
    assert sysfs.pci_path(None, tmp_path) is None
    topology = Topology(gpus=[Gpu(index=0, pci_bus_id="0000:aa:00.0")])
    sysfs.add_host_locality(topology, make_tree(tmp_path))
    assert topology.nics and topology.nic_links == []
