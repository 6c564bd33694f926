"""The words and glyphs every screen uses for the same thing, in one place.

A user reads scan, recommend, train, bench-p2p, doctor and the report side by side (and pastes them
into one ticket): a concept has one spelling everywhere. ``tests/unit/views/test_vocabulary.py``
renders every command's text for every reference machine and fails on a second spelling.

- ``UNKNOWN`` (``?``): the source does not say (a link word, a NUMA node, a figure).
- ``NONE`` (``-``): known to be absent (no NVLink, no ring for one GPU, no cross-device op).
- ``SELF`` (``X``): a GPU against itself in a matrix, as ``nvidia-smi topo -m`` prints it.
- a ring is ``0-1-2-3-0`` (its first GPU again at the end), a pair ``0-1``.
- the link that bounds a ring is its "slowest hop" (never "bottleneck link").
- severities are upper case (``ERROR``, ``WARNING``, ``INFO``) followed by the finding's code.
"""

from __future__ import annotations

from typing import Iterable

UNKNOWN = "?"
NONE = "-"
SELF = "X"
SLOWEST_HOP = "slowest hop"
RING_JOIN = "-"

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
SEVERITY_ORDER = {"error": 0, "warning": 1, "info": 2}


def ring_text(gpus: Iterable[int]) -> str:
    """``[0, 1, 3, 2]`` -> ``"0-1-3-2-0"``; a pair ``"0-1"``; one GPU ``"0"``."""
    order = [str(g) for g in gpus]
    if len(order) > 2:
        order.append(order[0])
    return RING_JOIN.join(order)


def severity_word(severity: str) -> str:
    """``"warning"`` -> ``"WARNING"``: one spelling on the terminal and in the report."""
    return severity.upper()


def unknown_or(value: object) -> str:
    """A value as text, or ``?`` where it is not known (``None``)."""
    return UNKNOWN if value is None else str(value)
