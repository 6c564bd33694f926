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
    from gputopo.analysis.notes.reading_notes import add_reading_findings

    from gputopo.analysis.causes.finding_kinds import with_kinds

    add_reading_findings(topology)
    if diagnosed:
        from gputopo.analysis.causes.diagnose import diagnose

        for finding in diagnose(topology):
            topology.add_finding(finding)
    with_kinds(topology.diagnostics)  # each a fault, a design fact or a note (one table)
    return topology


def topology_for(request: TopologyRequest, tf_now: TfNow | None = None) -> Topology:
    """The one host's topology the request names, with its findings; health evidence given beside
    it with ``--from`` (lspci, dmesg ...) judged by doctor and put on it (``resolved``)."""
    return with_findings(resolved(request, tf_now))


def resolved(request: TopologyRequest, tf_now: TfNow | None = None) -> Topology:
    """The one host's topology as read, health evidence beside it judged and put on it, no findings
    yet (``report`` merges a bench into it first)."""
    from gputopo.sources import resolve

    request, health = _health_apart(request)
    topology = resolve(request, tf_now)
    if health:
        _judge_health(topology, health)
    return topology


def topologies_for(request: TopologyRequest, tf_now: TfNow | None = None, diagnosed: bool = True) -> list[Topology]:
    """One topology per host the request names (one, unless ``--from`` names snapshots of several
    hosts), each with its findings (``diagnosed=False``: the readers' only, see ``with_findings``:
    `recommend` shows no finding and reads only which GPUs are lost, which readers say; diagnosing
    a 576-GPU domain is a sixth of its run). Health evidence beside them: as ``topology_for``, for
    one host only."""
    from gputopo.errors import InputError
    from gputopo.sources import resolve_hosts

    request, health = _health_apart(request)
    topologies = resolve_hosts(request, tf_now)
    if health:
        if len(topologies) != 1:
            raise InputError(f"{health[0]} holds health evidence of one host, beside {len(topologies)} hosts: "
                             f"judge each host with `gputopo doctor --from <its files>`")
        _judge_health(topologies[0], health)
    return [with_findings(topology, diagnosed) for topology in topologies]


def _health_apart(request: TopologyRequest) -> tuple[TopologyRequest, list[str]]:
    """``--from`` means the same in every command (issue 30): a file of health evidence (what doctor
    reads) given beside a topology is taken apart from it, to be judged; alone, it stays, so the
    readers refuse it with the command that reads it (``gputopo doctor --from``)."""
    if len(request.from_files) < 2:  # alone, a file stays what it is (and nothing is imported for it)
        return request, []
    import dataclasses

    from gputopo.sources.doctor_input import health_only

    health = [path for path in request.from_files if health_only(path)]
    rest = tuple(path for path in request.from_files if path not in health)
    if not health or not rest:
        return request, []
    return dataclasses.replace(request, from_files=rest), health


def _judge_health(topology: Topology, paths: list[str]) -> None:
    """doctor's judgement of the health evidence in ``paths``, its GPUs numbered as ``topology``'s
    (joined by PCI bus id), put on the topology: pair problems on the links (recommend ranks those
    pairs below healthy ones) and its findings among the topology's (``apply_health``)."""
    from gputopo.analysis.causes.doctor import apply_health, doctor
    from gputopo.sources.doctor_input import evidence_from_files

    with evidence_from_files(paths) as evidence:
        report = doctor(evidence, {g.pci_bus_id: g.index for g in topology.gpus if g.pci_bus_id})
    apply_health(topology, report)
