"""sysfs readers on a fake /sys tree: sockets, NUMA distances, PCI devices' nodes, RDMA NICs."""

from __future__ import annotations

import os
from pathlib import Path

from gputopo.sources.host import sysfs


def _write(root: Path, relative: str, text: str) -> None:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def make_sysfs(root: Path, *, sockets: dict[int, int], distances: dict[int, list[int]] | None = None,
               pci: dict[str, tuple[int, str]] | None = None, rdma: dict[str, str] | None = None) -> Path:
    """A fake sysfs: CPU -> socket, node -> distance row, bdf -> (numa node, local CPUs), NIC -> bdf."""
    for cpu, socket in sockets.items():
        _write(root, f"sys/devices/system/cpu/cpu{cpu}/topology/physical_package_id", str(socket))
    if distances:
        _write(root, "sys/devices/system/node/online", ",".join(str(n) for n in sorted(distances)))
        for node, row in distances.items():
            _write(root, f"sys/devices/system/node/node{node}/distance", " ".join(map(str, row)))
    for bdf, (node, cpus) in (pci or {}).items():
        _write(root, f"sys/bus/pci/devices/{bdf}/numa_node", str(node))
        _write(root, f"sys/bus/pci/devices/{bdf}/local_cpulist", cpus)
    for name, bdf in (rdma or {}).items():
        link = root / "sys/class/infiniband" / name / "device"
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(root / "sys/bus/pci/devices" / bdf, link.parent), link)  # relative, as the kernel's
    return root


# An EPYC box in NPS4: 2 sockets x 4 NUMA nodes, 4 CPUs per node.
NPS4_SOCKETS = {cpu: cpu // 16 for cpu in range(32)}
NPS4_DISTANCES = {n: [10 if n == m else (12 if n // 4 == m // 4 else 32) for m in range(8)] for n in range(8)}


def test_gpu_socket_from_its_cpus(tmp_path: Path) -> None:
    root = make_sysfs(tmp_path, sockets=NPS4_SOCKETS)
    assert sysfs.gpu_socket("12-15", root) == 0
    assert sysfs.gpu_socket("16-19", root) == 1
    assert sysfs.gpu_socket("12-19", root) is None  # spread over two sockets: no one socket
    assert sysfs.gpu_socket("40-43", root) is None  # CPUs sysfs does not list
    assert sysfs.gpu_socket(None, root) is None and sysfs.gpu_socket("x", root) is None


def test_numa_distances_in_online_node_order(tmp_path: Path) -> None:
    root = make_sysfs(tmp_path, sockets={}, distances=NPS4_DISTANCES)
    distances = sysfs.numa_distances(root)
    assert distances is not None and set(distances) == {str(n) for n in range(8)}
    assert distances["1"]["3"] == 12 and distances["1"]["5"] == 32 and distances["7"]["7"] == 10


def test_sparse_nodes_without_online_file(tmp_path: Path) -> None:
    """Grace: nodes 0 and 1 hold CPUs; the folder names give the order when `online` is missing."""
    root = make_sysfs(tmp_path, sockets={}, distances={0: [10, 40], 8: [40, 10]})
    (root / "sys/devices/system/node/online").unlink()
    assert sysfs.numa_distances(root) == {"0": {"0": 10, "8": 40}, "8": {"0": 40, "8": 10}}


def test_missing_or_broken_tree_is_unknown(tmp_path: Path) -> None:
    assert sysfs.numa_distances(tmp_path) is None
    assert sysfs.pci_numa_node("0000:07:00.0", tmp_path) is None
    assert sysfs.infiniband_nics(tmp_path) == []
    root = make_sysfs(tmp_path, sockets={}, distances={0: [10, 21], 1: [21]})  # a short row
    assert sysfs.numa_distances(root) is None


def test_pci_device_node_and_rdma_nics(tmp_path: Path) -> None:
    root = make_sysfs(
        tmp_path, sockets={},
        pci={"0000:0c:00.0": (3, "48-63"), "0000:8d:00.0": (-1, "")},
        rdma={"mlx5_0": "0000:0c:00.0", "mlx5_1": "0000:8d:00.0"},
    )
    assert sysfs.pci_numa_node("0000:0C:00.0", root) == 3
    assert sysfs.pci_numa_node("00000000:0c:00.0", root) == 3  # NVML's 8-digit domain
    assert sysfs.pci_numa_node("0000:8d:00.0", root) is None  # -1: the firmware does not say
    nics = sysfs.infiniband_nics(root)
    assert [(n.name, n.pci_bus_id, n.numa_node, n.cpu_affinity) for n in nics] == [
        ("mlx5_0", "0000:0c:00.0", 3, "48-63"), ("mlx5_1", "0000:8d:00.0", None, None)]


# --- the live probe reads them -------------------------------------------------------------------


def test_probe_reads_sockets_and_numa_distances_from_sysfs() -> None:
    from fake_nvml import FakeNvml

    from gputopo.sources.host.nvml import probe
    from gputopo.sources.reference import load_reference

    machine = load_reference("dgx-a100")  # EPYC NPS4: NUMA nodes 3,3,1,1,7,7,5,5 on sockets 0,0,0,0,1,1,1,1
    machine.numa_distances = {str(n): {str(m): d for m, d in enumerate(row)} for n, row in NPS4_DISTANCES.items()}
    probed = probe(FakeNvml(machine))
    assert [g.socket for g in probed.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert probed.numa_distance(1, 3) == 12 and probed.numa_distance(3, 7) == 32
    assert probed.numa_distance(3, 9) is None


def test_probe_without_sysfs_facts_leaves_sockets_unknown(tmp_path: Path) -> None:
    from fake_nvml import FakeNvml

    from gputopo.sources.host.nvml import probe
    from gputopo.sources.reference import load_reference

    root = make_sysfs(tmp_path, sockets={}, pci={"0000:0c:00.0": (0, "0-19")}, rdma={"mlx5_0": "0000:0c:00.0"})
    probed = probe(FakeNvml(load_reference("dgx1")), sysfs_root=root)
    assert [g.socket for g in probed.gpus] == [None] * 8 and probed.numa_distances is None
    assert [(n.name, n.numa_node) for n in probed.nics] == [("mlx5_0", 0)]
