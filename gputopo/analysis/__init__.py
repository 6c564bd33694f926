"""What a Topology means: findings, bandwidth estimates, GPU-group recommendations.

Sources return a topology as read; callers that want findings compose the two with
``with_findings(load_topology(...))``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputopo.model import Topology


def with_findings(topology: Topology) -> Topology:
    """Attach ``diagnose(topology)``'s findings (a finding already there, same code and GPUs, is kept once)."""
    from gputopo.analysis.diagnose import diagnose

    for finding in diagnose(topology):
        topology.add_finding(finding)
    return topology
