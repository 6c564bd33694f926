"""What a Topology means: findings, bandwidth estimates, GPU-group recommendations.

Sources return a topology as read (what a reader noticed is a ``ReadingNote``, facts only; every
sentence about it is written in ``reading_notes``); every command gets its topology with its findings through
``topology_for(request)`` (one host) or ``topologies_for(request)`` (one per host), so no command
forgets them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputopo.model import Topology
    from gputopo.sources import TopologyRequest
    from gputopo.sources.resolve import TfNow


def with_findings(topology: Topology, diagnosed: bool = True) -> Topology:
    """Attach the readers' notes in words (``reading_notes``), then ``diagnose(topology)``'s findings
    (a finding already there, same code and GPUs, is kept once). ``diagnosed=False``: the readers'
    findings only (a GPU the reader found lost), for a command that shows no finding."""
    from gputopo.analysis.reading_notes import add_reading_findings

    from gputopo.analysis.finding_kinds import with_kinds

    add_reading_findings(topology)
    if diagnosed:
        from gputopo.analysis.diagnose import diagnose

        for finding in diagnose(topology):
            topology.add_finding(finding)
    with_kinds(topology.diagnostics)  # each a fault, a design fact or a note (one table)
    return topology


def topology_for(request: TopologyRequest, tf_now: TfNow | None = None) -> Topology:
    """The one host's topology the request names, with its findings."""
    from gputopo.sources import resolve

    return with_findings(resolve(request, tf_now))


def topologies_for(request: TopologyRequest, tf_now: TfNow | None = None, diagnosed: bool = True) -> list[Topology]:
    """One topology per host the request names (one, unless ``--from`` names snapshots of several
    hosts), each with its findings (``diagnosed=False``: the readers' only, see ``with_findings``:
    `recommend` shows no finding and reads only which GPUs are lost, which readers say; diagnosing
    a 576-GPU domain is a sixth of its run)."""
    from gputopo.sources import resolve_hosts

    return [with_findings(topology, diagnosed) for topology in resolve_hosts(request, tf_now)]
