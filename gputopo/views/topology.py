"""Rich rendering of a Topology for people (being built)."""

from __future__ import annotations

from gputopo.model import Topology
from gputopo.views.common import out


def render_topology(topology: Topology) -> None:
    out().print(topology.label or topology.source)
