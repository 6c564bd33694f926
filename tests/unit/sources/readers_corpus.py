"""Shared by the readers' corpus tests: the fixtures of one kind with their EXPECTED entries."""

from __future__ import annotations

import json

from conftest import OWN_FIXTURES

from gputopo.fileio import read_text_input

CORPUS = OWN_FIXTURES / "corpus"


def expected(kind_dir: str) -> dict:
    return json.loads((CORPUS / kind_dir / "EXPECTED.json").read_text(encoding="utf-8"))


def cases(kind_dir: str) -> list[tuple[str, dict]]:
    return sorted(expected(kind_dir).items())


def text_of(kind_dir: str, name: str) -> str:
    return read_text_input(str(CORPUS / kind_dir / name), what="fixture")


def pair(key: str, sep: str) -> tuple[int, int]:
    a, b = key.split(sep)
    return int(a), int(b)


def directed_gbps(topology, src: int, dst: int, field: str = "") -> float | None:
    """The figure measured from ``src`` to ``dst`` (``field`` prefix ``p2p_off_`` for P2P off)."""
    link = topology.link(src, dst)
    m = link.measured
    if m is None:
        return None
    return getattr(m, f"{field}a_to_b_gbps" if src == link.a else f"{field}b_to_a_gbps")


LINE_CUT = 200


def _each_line(text: str, dress) -> str:
    return "\n".join(dress(line) if line.strip() else line for line in text.split("\n"))


# How pastes of a tool's output arrive: the readers' corpus tests read every real capture under each.
DRESSINGS = {
    "as pasted": lambda t: t,
    "CRLF": lambda t: t.replace("\n", "\r\n"),
    "tabs for spaces": lambda t: t.replace("    ", "\t"),
    "spaces for tabs": lambda t: t.replace("\t", "    "),
    "shell prompt": lambda t: _each_line(t, lambda line: "$ " + line),
    "markdown fence": lambda t: "```text\n" + t.rstrip("\n") + "\n```\n",
    "markdown quote": lambda t: _each_line(t, lambda line: "> " + line),
    "markdown bold": lambda t: _each_line(t, lambda line: f"**{line}**"),
    "host prefix": lambda t: _each_line(t, lambda line: "node-7: " + line),
    "lines cut": lambda t: "\n".join(line[:LINE_CUT] for line in t.split("\n")),
}


def dressed_cases(kind_dir: str, dressings: dict = DRESSINGS) -> list:
    """``(name, dressing)`` params for every capture of ``kind_dir`` under every dressing but "as
    pasted"; a ``- name [dressing]: reason`` line of KNOWN_GAPS.md makes that case a strict xfail."""
    import pytest
    from conftest import corpus_known_gaps

    gaps = corpus_known_gaps()
    params = []
    for name, _ in cases(kind_dir):
        for dressing in dressings:
            if dressing == "as pasted":
                continue
            key = f"{name} [{dressing}]"
            marks = [pytest.mark.xfail(strict=True, reason=gaps[key])] if key in gaps else []
            params.append(pytest.param(name, dressing, id=key, marks=marks))
    return params


def reading(topology) -> dict:
    """What a reader made of a paste, for comparing two dressings of it: GPUs, pairs, measurements,
    NCCL's view (not where each came from, which names the file)."""
    def figures(m):
        return None if m is None else (m.a_to_b_gbps, m.b_to_a_gbps, m.bidirectional_gbps, m.latency_us,
                                       m.p2p_off_a_to_b_gbps, m.p2p_off_b_to_a_gbps, m.test, m.p2p_enabled)
    nccl = topology.nccl
    return {
        "gpus": [(g.index, g.pci_bus_id, g.name, g.host, g.numa_node) for g in topology.gpus],
        "links": [(k.a, k.b, k.type, k.nvlink_count, k.p2p_read, k.p2p_write, figures(k.measured)) for k in topology.links],
        "nics": [(n.name, n.pci_bus_id) for n in topology.nics],
        "nccl": None if nccl is None else (
            sorted((t.src_rank, t.dst_rank, t.transport, tuple(t.channels)) for t in nccl.transports),
            nccl.p2p_disabled_pairs, sorted(nccl.settings.items()), nccl.nranks, nccl.version,
            [(r.rank, r.cuda_device, r.pci_bus_id, r.host) for r in nccl.ranks]),
        "notes": sorted(n.code for n in topology.reading_notes),
    }
