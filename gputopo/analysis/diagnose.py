"""Topology -> plain-language findings. Pure functions, no I/O. (Being built: issue 2/3.)"""

from __future__ import annotations

from gputopo.model import Finding, Topology


def diagnose(topology: Topology) -> list[Finding]:
    return []
