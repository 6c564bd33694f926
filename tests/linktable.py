"""Topologies for unit tests from a compact table of link words, in the style of go-gpuallocator's
``common_test.go`` (each test machine written as its GPUs' links): the table reads like
``nvidia-smi topo -m``, one row per GPU, ``X`` on the diagonal.

    topo = link_table('''
        X    NV2  SYS
        NV2  X    SYS
        SYS  SYS  X
    ''', numa=[0, 0, 1])

Only gputopo.model's constructors are used, never a reader or a reference machine, so a test says
every fact its assertion depends on, and correcting a reference machine (gputopo/sources/reference.py,
tested once as data in tests/unit/sources/test_reference.py) breaks no test about something else.

Defaults, each overridable: P2P read/write "ok" on every pair (``p2p`` sets another word for all
pairs, None for unknown, or a dict of the pairs that are not "ok": ``no_p2p_on``); NVLinks not
through NVSwitch (``nvswitch=True``); PCIe path word = the link word where it is a PCIe word
(``pcie`` gives a second table for NVLinked pairs); GPU name "Test GPU"; PCI bus ids
``0000:01:00.0``, ``0000:02:00.0``... in index order; the socket = the NUMA node; CPUs ``8n-8n+7``
for NUMA node ``n``; no NICs (``nics`` gives their columns).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from gputopo.model import Gpu, Nic, NicLink, Topology
from gputopo.model.parts import make_link

Table = str | Sequence[Sequence[str]]

# The DGX-1's hybrid cube-mesh (NVIDIA's DGX-1 V100 system architecture white paper, figure 3): NV1/NV2
# within and across the two quads, SYS (across the QPI link) for the pairs without NVLink.
CUBE_MESH_8 = """
    X   NV1 NV1 NV2 NV2 SYS SYS SYS
    NV1 X   NV2 NV1 SYS NV2 SYS SYS
    NV1 NV2 X   NV2 SYS SYS NV1 SYS
    NV2 NV1 NV2 X   SYS SYS SYS NV1
    NV2 SYS SYS SYS X   NV1 NV1 NV2
    SYS NV2 SYS SYS NV1 X   NV2 NV1
    SYS SYS NV1 SYS NV1 NV2 X   NV2
    SYS SYS SYS NV1 NV2 NV1 NV2 X
"""

# Two sockets with a PCIe switch pair each: 0,1 | 2,3.
TWO_SOCKET_4 = """
    X   PIX SYS SYS
    PIX X   SYS SYS
    SYS SYS X   PIX
    SYS SYS PIX X
"""

# Eight PCIe GPUs, two per switch, four per socket.
PCIE_8 = """
    X    PIX  NODE NODE SYS  SYS  SYS  SYS
    PIX  X    NODE NODE SYS  SYS  SYS  SYS
    NODE NODE X    PIX  SYS  SYS  SYS  SYS
    NODE NODE PIX  X    SYS  SYS  SYS  SYS
    SYS  SYS  SYS  SYS  X    PIX  NODE NODE
    SYS  SYS  SYS  SYS  PIX  X    NODE NODE
    SYS  SYS  SYS  SYS  NODE NODE X    PIX
    SYS  SYS  SYS  SYS  NODE NODE PIX  X
"""


# NIC columns (``nics=``): a DGX-1's four mlx5 NICs, one per GPU pair, two per socket.
CUBE_MESH_8_NICS = """
    mlx5_0 mlx5_1 mlx5_2 mlx5_3
    PIX    NODE   SYS    SYS
    PIX    NODE   SYS    SYS
    NODE   PIX    SYS    SYS
    NODE   PIX    SYS    SYS
    SYS    SYS    PIX    NODE
    SYS    SYS    PIX    NODE
    SYS    SYS    NODE   PIX
    SYS    SYS    NODE   PIX
"""
# One NIC per GPU of an 8-GPU NVSwitch box: PIX to its own GPU, NODE within a socket, SYS across.
NVSWITCH_8_NICS = "\n".join(
    [" ".join(f"mlx5_{k}" for k in range(8))]
    + [" ".join("PIX" if g == k else "NODE" if g // 4 == k // 4 else "SYS" for k in range(8)) for g in range(8)]
)


def rows_of(table: Table) -> list[list[str]]:
    """The table as rows of words, checked square and symmetric with ``X`` on the diagonal."""
    rows = [line.split() for line in table.strip().splitlines()] if isinstance(table, str) else [list(r) for r in table]
    n = len(rows)
    for a, row in enumerate(rows):
        if len(row) != n:
            raise ValueError(f"row {a} has {len(row)} words for {n} GPUs")
        if row[a] != "X":
            raise ValueError(f"row {a}: the diagonal is X, got {row[a]!r}")
        for b in range(a):
            if row[b] != rows[b][a]:
                raise ValueError(f"GPUs {b} and {a}: {rows[b][a]!r} one way, {row[b]!r} the other")
    return rows


def uniform(n: int, word: str) -> list[list[str]]:
    """``n`` GPUs with the same link word between every pair (``uniform(8, "NV18")``)."""
    return [["X" if a == b else word for b in range(n)] for a in range(n)]


def nic_columns(table: str, n: int) -> dict[str, list[str]]:
    """NIC columns as ``nvidia-smi topo -m`` prints them: a header line of NIC names, then one row of
    link words per GPU -> ``{nic: [word of GPU 0, word of GPU 1, ...]}``."""
    lines = [line.split() for line in table.strip().splitlines()]
    names, rows = lines[0], lines[1:]
    if len(rows) != n or any(len(row) != len(names) for row in rows):
        raise ValueError(f"the NIC table needs {n} rows of {len(names)} words")
    return {name: [row[k] for row in rows] for k, name in enumerate(names)}


def _per_gpu(value: Any, n: int, what: str) -> list[Any]:
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise ValueError(f"{what}: {len(value)} values for {n} GPUs")
        return list(value)
    return [value] * n


def _p2p_word(p2p: str | None | Mapping[tuple[int, int], str], a: int, b: int) -> str | None:
    if p2p is None or isinstance(p2p, str):
        return p2p
    return p2p.get((a, b), p2p.get((b, a), "ok"))


def link_table(
    table: Table,
    *,
    numa: Sequence[int | None] | int | None = None,
    socket: Sequence[int | None] | int | None = None,
    name: Sequence[str] | str = "Test GPU",
    cpus: Sequence[str | None] | None = None,
    p2p: str | None | Mapping[tuple[int, int], str] = "ok",
    nvswitch: bool = False,
    pcie: Table | None = None,
    gpu: Mapping[str, Any] | None = None,
    nics: str | None = None,
    **topology: Any,
) -> Topology:
    """A validated ``Topology`` of the GPUs of ``table``. ``gpu`` sets further GPU fields (one value for
    all GPUs or a list, one per GPU: ``gpu={"pcie_width_current": [16, 8]}``); the remaining keyword
    arguments are Topology fields (``socket_interconnect="QPI"``, ``host="node1"``). ``nics`` is a
    table of NIC columns (``nic_columns``): the NICs and each GPU's path to them."""
    rows = rows_of(table)
    n = len(rows)
    paths = rows_of(pcie) if pcie is not None else None
    numas = _per_gpu(numa, n, "numa")
    sockets = numas if socket is None else _per_gpu(socket, n, "socket")
    cpu_lists = list(cpus) if cpus is not None else [None if m is None else f"{8 * m}-{8 * m + 7}" for m in numas]
    extra = {field: _per_gpu(value, n, field) for field, value in (gpu or {}).items()}
    extra.setdefault("pci_bus_id", [f"0000:{i + 1:02x}:00.0" for i in range(n)])  # PCI order = index order
    gpus = [
        Gpu(index=i, name=_per_gpu(name, n, "name")[i], numa_node=numas[i], socket=sockets[i],
            cpu_affinity=cpu_lists[i], **{field: values[i] for field, values in extra.items()})
        for i in range(n)
    ]  # fmt: skip
    links = []
    for a in range(n):
        for b in range(a + 1, n):
            word = rows[a][b]
            nvlink = word.startswith("NV")
            path = paths[a][b] if paths else (None if nvlink else word)
            p2p_word = _p2p_word(p2p, a, b)
            links.append(make_link(a, b, word, nvswitch=nvswitch and nvlink, pcie_path=path,
                                   p2p_read=p2p_word, p2p_write=p2p_word, p2p_nvlink="ok" if nvlink else "NS"))  # fmt: skip
    columns = nic_columns(nics, n) if nics else {}
    topology.setdefault("source", "test")
    topo = Topology(gpus=gpus, links=links, nics=[Nic(nic) for nic in columns],
                    nic_links=[NicLink(g, nic, words[g]) for nic, words in columns.items() for g in range(n)],
                    **topology)  # fmt: skip
    topo.validate()
    return topo


def no_p2p_on(table: Table, *words: str, reason: str = "TNS") -> dict[tuple[int, int], str]:
    """``p2p=`` for ``link_table``: the pairs whose link word is one of ``words`` cannot peer
    (``reason``, a P2P status word), the others can (``no_p2p_on(CUBE_MESH_8, "SYS")``)."""
    rows = rows_of(table)
    return {(a, b): reason for a in range(len(rows)) for b in range(a + 1, len(rows)) if rows[a][b] in words}


def _with(table: Table, defaults: dict[str, Any], overrides: dict[str, Any]) -> Topology:
    """``link_table`` with ``defaults`` under ``overrides``; ``gpu`` fields are merged, not replaced."""
    gpu = {**defaults.get("gpu", {}), **overrides.get("gpu", {})}
    return link_table(table, **{**defaults, **overrides, "gpu": gpu})


GEN3_X16 = {"pcie_gen_current": 3, "pcie_gen_max": 3, "pcie_width_current": 16, "pcie_width_max": 16}
GEN4_X16 = {**GEN3_X16, "pcie_gen_current": 4, "pcie_gen_max": 4}
QUADS = [0, 0, 0, 0, 1, 1, 1, 1]


def cube_mesh_8(**overrides: Any) -> Topology:
    """Eight NVLink 2.0 GPUs (6 links each) in the hybrid cube-mesh on PCIe Gen3 x16, quads 0-3 and 4-7 on NUMA nodes
    0 and 1 (PCIe paths as PCIE_8), no P2P across the sockets where there is no NVLink (Intel does
    not route PCIe peer traffic across QPI)."""
    defaults = {"numa": QUADS, "p2p": no_p2p_on(CUBE_MESH_8, "SYS"), "pcie": PCIE_8,
                "gpu": {**GEN3_X16, "nvlink_version": "2.0", "nvlink_active_links": 6}, "socket_interconnect": "QPI"}  # fmt: skip
    return _with(CUBE_MESH_8, defaults, overrides)


def two_socket_4(**overrides: Any) -> Topology:
    """Four PCIe Gen3 x16 GPUs, pairs 0,1 and 2,3 on NUMA nodes 0 and 1, no P2P across the sockets."""
    defaults = {"numa": [0, 0, 1, 1], "p2p": no_p2p_on(TWO_SOCKET_4, "SYS"), "gpu": GEN3_X16,
                "socket_interconnect": "QPI"}  # fmt: skip
    return _with(TWO_SOCKET_4, defaults, overrides)


def pcie_8(**overrides: Any) -> Topology:
    """Eight PCIe Gen4 x16 GPUs (PCIE_8), four per NUMA node, no P2P across the sockets."""
    defaults = {"numa": QUADS, "p2p": no_p2p_on(PCIE_8, "SYS"), "gpu": GEN4_X16, "socket_interconnect": "UPI"}
    return _with(PCIE_8, defaults, overrides)


def phb_pair(**overrides: Any) -> Topology:
    """Two GeForce RTX 4090 under one host bridge, P2P not supported (GNS), one NUMA node."""
    defaults = {"numa": 0, "name": "NVIDIA GeForce RTX 4090", "p2p": "GNS", "gpu": GEN4_X16}
    return _with([["X", "PHB"], ["PHB", "X"]], defaults, overrides)


def nvswitch(n: int = 8, word: str = "NV18", version: str = "4.0", **overrides: Any) -> Topology:
    """``n`` GPUs with ``word`` through NVSwitch to every peer (NVLink ``version``, as many links up
    as the word says), PCIe Gen4 x16, half on each of two NUMA nodes."""
    gpu = {**GEN4_X16, "nvlink_version": version, "nvlink_active_links": int(word[2:])}
    defaults = {"numa": [2 * i // n for i in range(n)], "nvswitch": True, "gpu": gpu}
    return _with(uniform(n, word), defaults, overrides)


def nvl72(trays: int = 18) -> Topology:
    """A GB200 NVL72-like rack: ``trays`` hosts (``tray00``...) of four GPUs, every GPU NV18 through
    NVSwitch to every other of the rack, two Grace CPUs (NUMA nodes 0 and 1) per tray, two GPUs each."""
    n = 4 * trays
    return nvswitch(n, "NV18", "5.0", numa=[(i % 4) // 2 for i in range(n)],
                    gpu={"host": [f"tray{i // 4:02d}" for i in range(n)]})  # fmt: skip


# The table machines by name, for parametrized tests (``table_machine("cube-mesh-8")``).
TABLE_MACHINES = {
    "cube-mesh-8": cube_mesh_8,
    "two-socket-4": two_socket_4,
    "pcie-8": pcie_8,
    "phb-pair": phb_pair,
    "nvswitch-8-nv18": lambda: nvswitch(8, "NV18"),
    "nvswitch-8-nv12": lambda: nvswitch(8, "NV12", "3.0"),
    "nvswitch-16-nv6": lambda: nvswitch(16, "NV6", "2.0"),
    "nvl72": nvl72,
}


def table_machine(name: str) -> Topology:
    return TABLE_MACHINES[name]()
