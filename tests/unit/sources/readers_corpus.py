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
