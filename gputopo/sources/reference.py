"""Built-in reference machines, written as data from public facts.

They give users without GPUs (and the demo, and the tests) real topologies to reason about. Every
one is labelled as a reference machine, never as this host. Facts per machine:

- ``dgx1``: NVIDIA DGX-1 with 8x Tesla V100 SXM2 16 GB; NVLink 2.0 hybrid cube-mesh (each GPU has
  6 links: NV1/NV2 to four peers), PCIe Gen3 x16 through PLX switches, two Xeon E5-2698 v4 sockets
  (GPUs 0-3 on socket 0, 4-7 on socket 1), as in ``nvidia-smi topo -m`` of a DGX-1.
- ``dgx2``: NVIDIA DGX-2 with 16x V100 SXM3 32 GB behind 12 NVSwitches: NV6 to every peer; eight
  100 Gb/s NICs, one per GPU pair.
- ``dgx-a100``: NVIDIA DGX A100, 8x A100 SXM4 80 GB, 6 NVSwitches (NV12 to every peer, NVLink 3.0),
  PCIe Gen4, two AMD EPYC 7742 in NPS4 mode (GPU pairs on NUMA nodes 3, 1, 7, 5).
- ``dgx-h100``: NVIDIA DGX H100, 8x H100 SXM5 80 GB, 4 NVSwitches (NV18, NVLink 4.0), PCIe Gen5,
  two Xeon Platinum 8480C (GPUs 0-3 on NUMA 0, 4-7 on NUMA 1); 12 NICs as in a real DGX H100's capture.
- ``hgx-b200``: HGX B200, 8x B200, NV18 NVLink 5.0 through NVSwitch, PCIe Gen5, two sockets, one
  400 Gb/s NIC per GPU.
- ``gb200-nvl72``: GB200 NVL72 rack: 18 compute trays x 4 B200 GPUs in one NVLink 5.0 domain
  (NV18 to every GPU of the rack through the NVLink switch trays); 2 Grace CPUs per tray.
- ``pcie-8gpu``: a dual-socket server with 8x A100 80 GB PCIe (Gen4 x16): GPU pairs behind one PCIe
  switch (PIX), NODE within a socket, SYS across sockets, as in the pcie_8gpu fixture.
- ``two-socket-4gpu``: the 4-GPU two-socket box of TensorFlow's classic log
  ("cannot enable peer access from device ordinal 0 to device ordinal 2"): GPUs 0,1 under socket 0,
  2,3 under socket 1, PCIe Gen3, no P2P across sockets.
- ``workstation-2x4090``: a desktop with 2x GeForce RTX 4090 under the CPU's host bridge (PHB);
  the driver does not allow P2P on GeForce 40-series cards (GNS).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gputopo.errors import InputError
from gputopo.model import Gpu, Link, Nic, NicLink, Topology, make_link
from gputopo.notation import format_cpu_list

GIB = 1024**3


@dataclass(frozen=True)
class ReferenceMachine:
    name: str
    title: str
    summary: str
    build: Callable[[], Topology]


def _cpus(*ranges: tuple[int, int]) -> str:
    cpus: list[int] = []
    for lo, hi in ranges:
        cpus.extend(range(lo, hi + 1))
    return format_cpu_list(cpus)


def _gpus(
    count: int,
    name: str,
    memory_gib: int,
    numa_of: Callable[[int], int],
    cpus_of: Callable[[int], str],
    bus_ids: list[str],
    pcie_gen: int,
    nvlink_version: str | None,
    nvlink_links: int | None,
    compute_capability: str,
    host_of: Callable[[int], str | None] = lambda i: None,
    socket_of: Callable[[int], int] | None = None,
) -> list[Gpu]:
    """GPUs of a reference machine; ``socket_of`` defaults to ``numa_of`` (one NUMA node per socket)."""
    socket_of = socket_of or numa_of
    return [
        Gpu(
            index=i,
            name=name,
            uuid=f"GPU-00000000-0000-0000-0000-{i:012d}",
            pci_bus_id=bus_ids[i],
            memory_total_bytes=memory_gib * GIB,
            numa_node=numa_of(i),
            cpu_affinity=cpus_of(i),
            socket=socket_of(i),
            pcie_gen_current=pcie_gen,
            pcie_gen_max=pcie_gen,
            pcie_width_current=16,
            pcie_width_max=16,
            nvlink_version=nvlink_version,
            nvlink_active_links=nvlink_links,
            mig_mode=False,
            compute_capability=compute_capability,
            host=host_of(i),
        )
        for i in range(count)
    ]


def _p2p(ok: bool, reason: str = "TNS", atomics_ok: bool | None = None) -> dict[str, str]:
    word = "ok" if ok else reason
    atomics = word if atomics_ok is None else ("ok" if atomics_ok else "NS")
    return {"p2p_read": word, "p2p_write": word, "p2p_atomics": atomics}


def _matrix_links(
    types: list[list[str]], pcie: list[list[str]] | None, p2p_of: Callable[[int, int, str], dict[str, str]]
) -> list[Link]:
    links = []
    n = len(types)
    for a in range(n):
        for b in range(a + 1, n):
            t = types[a][b]
            path = pcie[a][b] if pcie else (None if t.startswith("NV") else t)
            links.append(make_link(a, b, t, pcie_path=path, p2p_nvlink="ok" if t.startswith("NV") else "NS", **p2p_of(a, b, t)))
    return links


def _nvswitch_links(n: int, nv: int, pcie_of: Callable[[int, int], str | None]) -> list[Link]:
    return [
        make_link(a, b, f"NV{nv}", nvswitch=True, pcie_path=pcie_of(a, b), p2p_nvlink="ok", **_p2p(True))
        for a in range(n)
        for b in range(a + 1, n)
    ]


def _socket_pcie(
    socket_of: Callable[[int], int], pair_of: Callable[[int], int], across_switches: str = "NODE"
) -> Callable[[int, int], str]:
    """SYS across sockets, PIX under one switch, ``across_switches`` between two switches of a socket
    (NODE where each switch hangs off its own host bridge, PHB where one host bridge holds both)."""

    def path(a: int, b: int) -> str:
        if socket_of(a) != socket_of(b):
            return "SYS"
        return "PIX" if pair_of(a) == pair_of(b) else across_switches

    return path


# --- the machines ---------------------------------------------------------------------------------

_DGX1_NV = [
    ["X", "NV1", "NV1", "NV2", "NV2", "SYS", "SYS", "SYS"],
    ["NV1", "X", "NV2", "NV1", "SYS", "NV2", "SYS", "SYS"],
    ["NV1", "NV2", "X", "NV2", "SYS", "SYS", "NV1", "SYS"],
    ["NV2", "NV1", "NV2", "X", "SYS", "SYS", "SYS", "NV1"],
    ["NV2", "SYS", "SYS", "SYS", "X", "NV1", "NV1", "NV2"],
    ["SYS", "NV2", "SYS", "SYS", "NV1", "X", "NV2", "NV1"],
    ["SYS", "SYS", "NV1", "SYS", "NV1", "NV2", "X", "NV2"],
    ["SYS", "SYS", "SYS", "NV1", "NV2", "NV1", "NV2", "X"],
]


def _dgx1() -> Topology:
    socket = lambda i: i // 4  # noqa: E731
    path = _socket_pcie(socket, lambda i: i // 2, across_switches="PHB")
    pcie = [[path(a, b) if a != b else "X" for b in range(8)] for a in range(8)]
    gpus = _gpus(
        8, "Tesla V100-SXM2-16GB", 16, socket,
        lambda i: _cpus((0, 19), (40, 59)) if socket(i) == 0 else _cpus((20, 39), (60, 79)),
        ["0000:06:00.0", "0000:07:00.0", "0000:0a:00.0", "0000:0b:00.0",
         "0000:85:00.0", "0000:86:00.0", "0000:89:00.0", "0000:8a:00.0"],
        3, "2.0", 6, "7.0",
    )
    # Intel CPUs do not route PCIe peer traffic across QPI: SYS pairs without NVLink cannot peer.
    links = _matrix_links(_DGX1_NV, pcie, lambda a, b, t: _p2p(t.startswith("NV"), "TNS"))
    # One InfiniBand NIC per PCIe switch, beside GPUs 2k and 2k+1 (PIX); the other switch of the socket
    # is under the same host bridge: PHB, as the real DGX-1 capture shows
    # (tests/fixtures/corpus/topo/dgx1_p100_8gpu_nv1_mangled_header_soc.txt, same chassis and PCIe tree).
    nics = [Nic(f"mlx5_{k}", numa_node=k // 2, cpu_affinity=gpus[2 * k].cpu_affinity) for k in range(4)]
    nic_links = [
        NicLink(g, f"mlx5_{k}", "PIX" if g // 2 == k else ("PHB" if socket(g) == k // 2 else "SYS"))
        for k in range(4)
        for g in range(8)
    ]
    return Topology(gpus=gpus, links=links, nics=nics, nic_links=nic_links, socket_interconnect="QPI")


def _dgx2() -> Topology:
    socket = lambda i: i // 8  # noqa: E731
    gpus = _gpus(
        16, "Tesla V100-SXM3-32GB", 32, socket,
        lambda i: _cpus((0, 23), (48, 71)) if socket(i) == 0 else _cpus((24, 47), (72, 95)),
        [f"0000:{b:02x}:00.0" for b in (0x34, 0x36, 0x39, 0x3b, 0x57, 0x59, 0x5c, 0x5e,
                                          0xb7, 0xb9, 0xbc, 0xbe, 0xe0, 0xe2, 0xe5, 0xe7)],
        3, "2.0", 6, "7.0",
    )
    path = _socket_pcie(socket, lambda i: i // 2)
    links = _nvswitch_links(16, 6, path)
    # Eight 100 Gb/s ConnectX-5 (InfiniBand/Ethernet), one on the PCIe switch of each GPU pair
    # (DGX-2 System Architecture whitepaper, WP-09016-001, "PCIe switch complex"). No DGX-2 capture in
    # the corpus: the words are those of the GPU pairs' own switches.
    nics = [Nic(f"mlx5_{k}", numa_node=socket(2 * k), cpu_affinity=gpus[2 * k].cpu_affinity) for k in range(8)]
    nic_links = [NicLink(g, f"mlx5_{k}", path(g, 2 * k)) for k in range(8) for g in range(16)]
    return Topology(gpus=gpus, links=links, nics=nics, nic_links=nic_links, socket_interconnect="UPI")


_A100_NUMA = [3, 3, 1, 1, 7, 7, 5, 5]


def _dgx_a100() -> Topology:
    numa = lambda i: _A100_NUMA[i]  # noqa: E731
    gpus = _gpus(
        8, "NVIDIA A100-SXM4-80GB", 80, numa,
        lambda i: _cpus((16 * numa(i), 16 * numa(i) + 15), (128 + 16 * numa(i), 128 + 16 * numa(i) + 15)),
        ["0000:07:00.0", "0000:0f:00.0", "0000:47:00.0", "0000:4e:00.0",
         "0000:87:00.0", "0000:90:00.0", "0000:b7:00.0", "0000:bd:00.0"],
        4, "3.0", 12, "8.0",
        socket_of=lambda i: numa(i) // 4,  # two EPYC 7742 in NPS4: NUMA nodes 0-3 socket 0, 4-7 socket 1
    )
    # NPS4: each GPU pair has its own NUMA node, so pairs on different nodes are SYS in nvidia-smi's words.
    links = _nvswitch_links(8, 12, lambda a, b: "PXB" if a // 2 == b // 2 else "SYS")
    nics = [Nic(f"mlx5_{k}", numa_node=numa(k), cpu_affinity=gpus[k].cpu_affinity) for k in range(8)]
    nic_links = [NicLink(g, f"mlx5_{k}", "PXB" if g // 2 == k // 2 else "SYS") for k in range(8) for g in range(8)]
    return Topology(gpus=gpus, links=links, nics=nics, nic_links=nic_links, socket_interconnect="Infinity Fabric")


def _two_socket_nvswitch_8gpu(
    name: str, memory_gib: int, bus_ids: list[str], pcie_gen: int, nvlink_version: str, compute_capability: str,
    *, nic_of_gpu: list[int], nic_count: int,
) -> Topology:
    """8 GPUs on one NVSwitch fabric (NV18), four per socket, NODE within a socket, SYS across; NIC
    ``nic_of_gpu[g]`` sits behind GPU g's PCIe switch (PXB: GPU and NIC each under their own bridge
    of that switch, as DGX H100's capture shows); the others (storage, in-band) are NODE or SYS."""
    socket = lambda i: i // 4  # noqa: E731
    gpus = _gpus(
        8, name, memory_gib, socket,
        lambda i: _cpus((0, 55), (112, 167)) if socket(i) == 0 else _cpus((56, 111), (168, 223)),
        bus_ids, pcie_gen, nvlink_version, 18, compute_capability,
    )
    links = _nvswitch_links(8, 18, lambda a, b: "SYS" if socket(a) != socket(b) else "NODE")
    nic_socket = [k * 2 // nic_count for k in range(nic_count)]  # the first half of the NICs on socket 0
    nics = [Nic(f"mlx5_{k}", numa_node=nic_socket[k], cpu_affinity=gpus[4 * nic_socket[k]].cpu_affinity)
            for k in range(nic_count)]
    nic_links = [
        NicLink(g, f"mlx5_{k}", "PXB" if nic_of_gpu[g] == k else ("NODE" if socket(g) == nic_socket[k] else "SYS"))
        for k in range(nic_count) for g in range(8)
    ]
    return Topology(gpus=gpus, links=links, nics=nics, nic_links=nic_links, socket_interconnect="UPI")


def _dgx_h100() -> Topology:
    return _two_socket_nvswitch_8gpu(
        "NVIDIA H100 80GB HBM3", 80,
        ["0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
         "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"],
        5, "4.0", "9.0",
        # The real DGX H100 capture (tests/fixtures/corpus/topo/dgx_h100_8gpu_nv18_12nic_truncated_after_nic5.txt):
        # 12 NICs, the eight ConnectX-7 compute ports PXB to one GPU each (mlx5_0,3,4,5 | 6,9,10,11), the
        # two dual-port storage NICs (mlx5_1,2 | 7,8) NODE to their socket's GPUs.
        nic_of_gpu=[0, 3, 4, 5, 6, 9, 10, 11], nic_count=12,
    )


def _hgx_b200() -> Topology:
    return _two_socket_nvswitch_8gpu(
        "NVIDIA B200", 180,
        ["0000:1b:00.0", "0000:43:00.0", "0000:52:00.0", "0000:61:00.0",
         "0000:9d:00.0", "0000:c3:00.0", "0000:d1:00.0", "0000:df:00.0"],
        5, "5.0", "10.0",
        # Eight single-port ConnectX-7 400 Gb/s compute NICs, one per GPU (NVIDIA DGX B200 user guide,
        # "Hardware Overview"); the PCIe words are assumed to be DGX H100's (no B200 capture in the corpus).
        nic_of_gpu=list(range(8)), nic_count=8,
    )


def _gb200_nvl72() -> Topology:
    tray = lambda i: i // 4  # noqa: E731
    grace = lambda i: (i % 4) // 2  # two Grace CPUs per tray, two GPUs each  # noqa: E731
    gpus = _gpus(
        72, "NVIDIA GB200", 186, grace,
        lambda i: _cpus((0, 71)) if grace(i) == 0 else _cpus((72, 143)),
        [f"{(i % 4) // 2 * 8:04x}:{1 if i % 2 == 0 else 2:02x}:00.0" for i in range(72)],
        5, "5.0", 18, "10.0",
        host_of=lambda i: f"tray{tray(i):02d}",
    )

    def pcie(a: int, b: int) -> str | None:
        if tray(a) != tray(b):
            return None  # different hosts: no PCIe path at all, only the NVLink fabric
        return "NODE" if grace(a) == grace(b) else "SYS"

    links = _nvswitch_links(72, 18, pcie)
    return Topology(gpus=gpus, links=links, socket_interconnect="NVLink-C2C / Grace")


def _pcie_8gpu() -> Topology:
    socket = lambda i: i // 4  # noqa: E731
    path = _socket_pcie(socket, lambda i: i // 2)
    gpus = _gpus(
        8, "NVIDIA A100 80GB PCIe", 80, socket,
        lambda i: _cpus((0, 31), (64, 95)) if socket(i) == 0 else _cpus((32, 63), (96, 127)),
        ["0000:1a:00.0", "0000:1b:00.0", "0000:3d:00.0", "0000:3e:00.0",
         "0000:88:00.0", "0000:89:00.0", "0000:b1:00.0", "0000:b2:00.0"],
        4, None, 0, "8.0",
    )
    types = [[path(a, b) if a != b else "X" for b in range(8)] for a in range(8)]
    links = _matrix_links(types, None, lambda a, b, t: _p2p(t != "SYS", "TNS"))
    return Topology(gpus=gpus, links=links, socket_interconnect="UPI")


def _two_socket_4gpu() -> Topology:
    socket = lambda i: i // 2  # noqa: E731
    gpus = _gpus(
        4, "GeForce GTX TITAN X", 12, socket,
        lambda i: _cpus((0, 11), (24, 35)) if socket(i) == 0 else _cpus((12, 23), (36, 47)),
        ["0000:02:00.0", "0000:03:00.0", "0000:82:00.0", "0000:83:00.0"],
        3, None, 0, "5.2",
    )
    types = [[("PIX" if socket(a) == socket(b) else "SYS") if a != b else "X" for b in range(4)] for a in range(4)]
    links = _matrix_links(types, None, lambda a, b, t: _p2p(t != "SYS", "TNS", atomics_ok=False))
    return Topology(gpus=gpus, links=links, socket_interconnect="QPI")


def _workstation_2x4090() -> Topology:
    gpus = _gpus(
        2, "NVIDIA GeForce RTX 4090", 24, lambda i: 0, lambda i: _cpus((0, 31)),
        ["0000:01:00.0", "0000:41:00.0"], 4, None, 0, "8.9",
    )
    links = [make_link(0, 1, "PHB", pcie_path="PHB", p2p_nvlink="NS", **_p2p(False, "GNS"))]
    return Topology(gpus=gpus, links=links, socket_interconnect=None)


MACHINES: dict[str, ReferenceMachine] = {
    m.name: m
    for m in [
        ReferenceMachine("dgx1", "DGX-1 (8x V100 SXM2, hybrid cube-mesh NVLink)",
                         "NV1/NV2 mesh, two sockets, SYS between non-linked pairs", _dgx1),
        ReferenceMachine("dgx2", "DGX-2 (16x V100 SXM3, NVSwitch)", "NV6 to every peer through 12 NVSwitches", _dgx2),
        ReferenceMachine("dgx-a100", "DGX A100 / HGX A100 (8x A100 SXM4, NVSwitch)",
                         "NV12 to every peer, NVLink 3.0, EPYC NPS4", _dgx_a100),
        ReferenceMachine("dgx-h100", "DGX H100 (8x H100 SXM5, NVSwitch)", "NV18 to every peer, NVLink 4.0", _dgx_h100),
        ReferenceMachine("hgx-b200", "HGX B200 (8x B200, NVSwitch)", "NV18 to every peer, NVLink 5.0", _hgx_b200),
        ReferenceMachine("gb200-nvl72", "GB200 NVL72 (72x B200 in one NVLink domain, 18 hosts)",
                         "NV18 to every GPU of the rack, 4 GPUs per host", _gb200_nvl72),
        ReferenceMachine("pcie-8gpu", "Dual-socket server, 8x A100 PCIe",
                         "PIX pairs, NODE within a socket, SYS across sockets", _pcie_8gpu),
        ReferenceMachine("two-socket-4gpu", "Two-socket box, 4 GPUs (0,1 | 2,3)",
                         "the classic TF log: 0,1 and 2,3 cannot peer across QPI", _two_socket_4gpu),
        ReferenceMachine("workstation-2x4090", "Workstation, 2x GeForce RTX 4090",
                         "PHB, P2P not supported on GeForce 40-series", _workstation_2x4090),
    ]
}

ALIASES = {
    "dgx-1": "dgx1", "dgx1-v100": "dgx1", "dgx-2": "dgx2", "dgxa100": "dgx-a100", "hgx-a100": "dgx-a100",
    "a100": "dgx-a100", "dgxh100": "dgx-h100", "hgx-h100": "dgx-h100", "h100": "dgx-h100",
    "b200": "hgx-b200", "nvl72": "gb200-nvl72", "pcie": "pcie-8gpu",
}


def machine_names() -> list[str]:
    return list(MACHINES)


def load_reference(name: str) -> Topology:
    """The reference machine ``name`` (or an alias) as a labelled ``Topology``."""
    key = ALIASES.get(name.lower(), name.lower())
    machine = MACHINES.get(key)
    if machine is None:
        raise InputError(f"unknown reference machine {name!r}; known: {', '.join(MACHINES)}")
    topo = machine.build()
    topo.source = "reference"
    topo.source_detail = machine.name
    topo.label = f"{machine.title} — reference machine from public facts, not this host"
    topo.is_reference = True
    topo.host = None
    topo.validate()
    return topo
