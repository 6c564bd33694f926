"""CUDA samples' ``p2pBandwidthLatencyTest`` output -> Topology with measured GB/s per ordered pair.

What it prints: ``Device: N, name, pciBusID: b, pciDeviceID: d, pciDomainID:D`` lines; ``Device=i CAN
(CANNOT) Access Peer Device=j``; the P2P connectivity matrix; then matrices, each a title line, a
``D\\D 0 1 ...`` (or ``GPU 0 1 ...``) column line and one row per device:
``Unidirectional P2P=Disabled/Enabled Bandwidth [(P2P Writes|Reads)] Matrix (GB/s)``, ``Bidirectional
...`` and ``P2P=Disabled/Enabled Latency ... Matrix (us)`` (GPU rows, then a ``CPU`` block).

Directions, from the sample's source: in releases that label their matrices ``(P2P Writes)`` /
``(P2P Reads)``, row i of a writes (or P2P-disabled) matrix is a copy from i to column j, and a reads
matrix has i reading from j (data j -> i); older releases (no such labels) copy from column j into
row i. The headline figure of a link is the P2P-enabled writes (else reads) matrix; the P2P=Disabled
figures (staged through host memory) are kept beside it. Devices are CUDA ordinals (CUDA's order,
FASTEST_FIRST unless CUDA_DEVICE_ORDER says otherwise); their PCI bus ids join them with nvidia-smi.
A pair the test says CANNOT peer gets P2P ``NS`` (cudaDeviceCanAccessPeer said no; why, it does not say).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.errors import InputError
from gputopo.model import Gpu, ReadingNote, Topology
from gputopo.sources.pasted import (
    capped,
    device_index,
    hex_bus_id,
    keep_worse,
    measurement_of,
    number,
    set_directed,
    undecorated_lines,
    with_all_pairs,
)

KIND = "p2pBandwidthLatencyTest"
METHOD = "p2pBandwidthLatencyTest"

# Searched along a line, so each start must cost little: the name is bounded (``.+?`` tried every
# length from every ``Device: `` of a long line), and a title starts at a word, never at a run of
# blanks (``(...)?\s*P2P=`` scanned the run from each of its blanks: quadratic).
_DEVICE_RE = re.compile(
    r"Device: ?(\d{1,9}), (.{1,200}?), pciBusID: ?([0-9a-fA-F]{1,16}), pciDeviceID: ?([0-9a-fA-F]{1,16}), "
    r"pciDomainID: ?([0-9a-fA-F]{1,16})(?![0-9a-fA-F])"
)
_PEER_RE = re.compile(r"Device=(\d{1,9}) (CAN|CANNOT) Access Peer Device=(\d{1,9})")
_TITLE_RE = re.compile(
    r"(?:(?P<dir>Unidirectional|Bidirectional)\s*+)?P2P=(?P<p2p>Enabled|Disabled)\s++"
    r"(?P<what>Bandwidth|Latency)\s*+(?:\((?P<method>P2P (?:Writes|Reads))\))?\s*+Matrix"
)
_SNIFF_RE = re.compile(r"P2P=(?:Enabled|Disabled) (?:Bandwidth|Latency)|\[P2P \(Peer-to-Peer\) GPU Bandwidth Latency Test\]")


def sniff(text: str) -> bool:
    """Whether the text holds p2pBandwidthLatencyTest output (its matrix titles or its banner)."""
    return _SNIFF_RE.search(text) is not None


@dataclass
class _Parsed:
    gpus: dict[int, Gpu] = field(default_factory=dict)
    peer: dict[tuple[int, int], bool] = field(default_factory=dict)
    matrices: dict[str, dict[tuple[int, int], float]] = field(default_factory=dict)  # key -> (row, col) -> value
    labelled: bool = False  # the release that names (P2P Writes) / (P2P Reads)


def read(text: str, source: str) -> Topology:
    """The measured pairs of the p2pBandwidthLatencyTest output in ``text`` (other lines are skipped)."""
    parsed = _parse(undecorated_lines(text))
    indices = set(parsed.gpus) | {i for cells in parsed.matrices.values() for pair in cells for i in pair}
    measured = any(parsed.matrices.values())
    if not measured and not parsed.gpus:  # a cut output still names its GPUs and which can peer
        raise InputError(f"{source}: p2pBandwidthLatencyTest banner found but no device line and no matrix")
    gpus = [parsed.gpus.get(i) or Gpu(index=i) for i in sorted(indices)]
    topo = with_all_pairs(gpus, "p2pBandwidthLatencyTest", f"{len(gpus)} GPUs measured by p2pBandwidthLatencyTest", source)
    _apply_peer(topo, parsed.peer)
    _apply_figures(topo, parsed, source)
    if not measured:  # cut before its first matrix
        topo.reading_notes.append(ReadingNote("no-pair-measured", {"source": source, "tool": "p2pBandwidthLatencyTest"}))
    elif not any(cells for key, cells in parsed.matrices.items() if "-on" in key):  # cut after its P2P=Disabled ones
        topo.reading_notes.append(ReadingNote("p2p-enabled-not-measured", {
            "source": source, "matrices": sorted(key for key, cells in parsed.matrices.items() if cells)}))
    if not any(g.pci_bus_id for g in topo.gpus):
        topo.reading_notes.append(ReadingNote("cuda-ordinals-only", {"source": source}))
    return topo


def _parse(lines: list[str]) -> _Parsed:
    parsed = _Parsed()
    i = 0
    while i < len(lines):
        line = capped(lines[i])  # matrix rows are read whole (_read_matrix)
        if (m := _DEVICE_RE.search(line)) and (index := device_index(m.group(1))) is not None:
            parsed.gpus[index] = Gpu(index=index, name=m.group(2).strip()[:200],
                                     pci_bus_id=hex_bus_id(m.group(5), m.group(3), m.group(4)))
        elif m := _PEER_RE.search(line):
            a, b = device_index(m.group(1)), device_index(m.group(3))
            if a is not None and b is not None and a != b:
                parsed.peer[(a, b)] = m.group(2) == "CAN"
        elif (m := _TITLE_RE.search(line)) is not None:
            key = _matrix_key(m)
            parsed.labelled = parsed.labelled or m.group("method") is not None
            cells, i = _read_matrix(lines, i + 1)
            parsed.matrices.setdefault(key, cells)  # a second run's matrix does not overwrite the first
            continue
        elif "P2P Connectivity Matrix" in line:
            cells, i = _read_matrix(lines, i + 1)
            for (a, b), value in cells.items():
                if a != b:
                    parsed.peer.setdefault((a, b), value >= 1)
            continue
        i += 1
    return parsed


def _matrix_key(m: re.Match[str]) -> str:
    """``uni-on-writes``, ``uni-off``, ``bi-on``, ``lat-on-writes``, ``lat-off`` ..."""
    what = "lat" if m.group("what") == "Latency" else ("bi" if m.group("dir") == "Bidirectional" else "uni")
    state = "on" if m.group("p2p") == "Enabled" else "off"
    method = {"P2P Writes": "-writes", "P2P Reads": "-reads"}.get(m.group("method") or "", "")
    return f"{what}-{state}{method}"


def _read_matrix(lines: list[str], start: int) -> tuple[dict[tuple[int, int], float], int]:
    """The cells under a title: a column line (``D\\D 0 1``/``GPU 0 1``), then ``i v v`` rows; stops at
    the first other line (the latency matrices' ``CPU`` block is not GPU-to-GPU and is left)."""
    cells: dict[tuple[int, int], float] = {}
    i = start
    columns: list[int] | None = None
    while i < len(lines):
        tokens = lines[i].split()
        if columns is None:
            if tokens and tokens[0] in ("D\\D", "GPU") and all(device_index(t) is not None for t in tokens[1:]):
                columns = [int(t) for t in tokens[1:]]
                i += 1
                continue
            break
        row = device_index(tokens[0]) if tokens else None
        values = [number(t) for t in tokens[1:]]
        if row is None or len(values) != len(columns) or any(v is None for v in values):
            break
        for column, value in zip(columns, values):
            cells[(row, column)] = value  # type: ignore[assignment]
        i += 1
    return cells, i


def _apply_peer(topo: Topology, peer: dict[tuple[int, int], bool]) -> None:
    for link in topo.links:
        said = [peer[k] for k in ((link.a, link.b), (link.b, link.a)) if k in peer]
        if said:
            word = "ok" if all(said) else "NS"
            link.p2p_read = link.p2p_write = word


def _directed(parsed: _Parsed, key: str) -> dict[tuple[int, int], float]:
    """``(src, dst) -> GB/s`` of one matrix, by the direction rules of the module docstring."""
    cells = parsed.matrices.get(key, {})
    rows_are_sources = parsed.labelled and not key.endswith("-reads")
    return {((r, c) if rows_are_sources else (c, r)): v for (r, c), v in cells.items() if r != c}


def _apply_figures(topo: Topology, parsed: _Parsed, source: str) -> None:
    on_key = next((k for k in ("uni-on-writes", "uni-on", "uni-on-reads") if k in parsed.matrices), None)
    on = _directed(parsed, on_key) if on_key else {}
    off = _directed(parsed, "uni-off")
    bi_on, bi_off = _directed(parsed, "bi-on"), _directed(parsed, "bi-off")
    lat_on_key = next((k for k in ("lat-on-writes", "lat-on", "lat-on-reads") if k in parsed.matrices), None)
    lat_on = _directed(parsed, lat_on_key) if lat_on_key else {}
    lat_off = _directed(parsed, "lat-off")
    test = "P2P=Enabled" + {"uni-on-writes": " (P2P Writes)", "uni-on-reads": " (P2P Reads)"}.get(on_key or "", "")
    for link in topo.links:
        pairs = ((link.a, link.b), (link.b, link.a))
        if not any(p in table for p in pairs for table in (on, off, bi_on, bi_off, lat_on, lat_off)):
            continue
        m = measurement_of(link, METHOD, source)
        m.test = test if on else "P2P=Disabled"
        m.p2p_enabled = (link.can_peer is not False) if on else None
        for src, dst in pairs:
            if (src, dst) in on:
                set_directed(link, src, on[(src, dst)], "a_to_b_gbps", "b_to_a_gbps")
            if (src, dst) in off:
                set_directed(link, src, off[(src, dst)], "p2p_off_a_to_b_gbps", "p2p_off_b_to_a_gbps")
            if (src, dst) in lat_on:
                m.latency_us = keep_worse(m.latency_us, lat_on[(src, dst)])
            if (src, dst) in lat_off:
                m.p2p_off_latency_us = keep_worse(m.p2p_off_latency_us, lat_off[(src, dst)])
        both = [bi_on[p] for p in pairs if p in bi_on]
        m.bidirectional_gbps = min(both) if both else None
        both_off = [bi_off[p] for p in pairs if p in bi_off]
        m.p2p_off_bidirectional_gbps = min(both_off) if both_off else None
