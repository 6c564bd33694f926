"""The fabric graph from a fake sysfs laid out as the kernel does: the tree, each hop's link, and
pair words derived from it that agree with what nvidia-smi says of the same places."""

from __future__ import annotations

import os
from pathlib import Path

from tests.unit.sources.host.test_sysfs_nics import NODE_OF, TREE, make_tree

from gputopo.model import Gpu, Nic, Topology
from gputopo.model.fabric import GPU, HOST_BRIDGE, NUMA
from gputopo.sources.host.fabric_sysfs import add_fabric, sysfs_fabric

# What nvidia-smi says between each GPU of the fake host and nic0 (test_sysfs_nics's expectations).
TO_NIC = {"gpu0": "PIX", "gpu1": "PXB", "gpu2": "PHB", "gpu3": "NODE", "gpu4": "SYS"}


def _gpus() -> list[Gpu]:
    return [Gpu(index=k, pci_bus_id=TREE[f"gpu{k}"][-1], numa_node=NODE_OF[f"gpu{k}"]) for k in range(5)]


def _with_numa_on_root_ports(root: Path) -> Path:
    for parts in TREE.values():  # the root port's numa_node, as the kernel gives every device one
        root_port = root / "sys" / "devices" / parts[0] / parts[1]
        (root_port / "numa_node").write_text(f"{1 if parts[0] == 'pci0000:80' else 0}\n")
    return root


def test_the_tree_holds_every_device_under_its_host_bridge_and_numa_node(tmp_path):
    root = _with_numa_on_root_ports(make_tree(tmp_path))
    nic = Nic(name="mlx5_0", pci_bus_id=TREE["nic0"][-1], numa_node=0)
    fabric = sysfs_fabric(_gpus(), [nic], root)
    assert fabric is not None
    hosts = {n.id for n in fabric.nodes if n.kind == HOST_BRIDGE}
    assert hosts == {"host:pci0000:00", "host:pci0000:40", "host:pci0000:80"}
    assert {n.numa_node for n in fabric.nodes if n.kind == NUMA} == {0, 1}
    assert fabric.gpus_below("pci:0000:01:00.0") == [0, 1]  # the switch above GPUs 0 and 1
    gpu_ids = {n.gpu: n.id for n in fabric.nodes if n.kind == GPU}
    nic_id = next(n.id for n in fabric.nodes if n.nic == "mlx5_0")
    assert {f"gpu{k}": fabric.path_word(gpu_ids[k], nic_id) for k in range(5)} == TO_NIC


def test_a_link_that_leaves_the_tree_places_nothing(tmp_path):
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("/sys/devices/pci0000:00/0000:00:01.0", tmp_path / "sys/bus/pci/devices/0000:00:01.0")
    assert sysfs_fabric([Gpu(index=0, pci_bus_id="0000:00:01.0")], [], tmp_path) is None


def test_add_fabric_keeps_a_fabric_already_read(tmp_path):
    root = _with_numa_on_root_ports(make_tree(tmp_path))
    topology = Topology(gpus=_gpus())
    add_fabric(topology, root)
    first = topology.fabric
    add_fabric(topology, root)
    assert topology.fabric is first and first.gpu_node(4) is not None
