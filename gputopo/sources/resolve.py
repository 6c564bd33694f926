"""The resolver: the one place that turns a ``TopologyRequest`` into topologies, as read.

``resolve`` gives one host's Topology (every ``--from`` of that host merged, a TF log joined);
``resolve_hosts`` gives one Topology per host where the files are snapshots of several hosts.
Findings are not made here: what a reader noticed is a ``ReadingNote`` (facts), and
``gputopo.analysis.topology_for`` / ``topologies_for`` word the notes and add the findings.
"""

from __future__ import annotations

from typing import Callable

from gputopo.errors import InputError
from gputopo.model import ReadingNote, TfView, Topology
from gputopo.sources.request import TopologyRequest, checked_host_name

# TensorFlow's view of this host, started now (``scan --tf``); a parameter so tests need no TF.
TfNow = Callable[[], TfView]


def resolve(request: TopologyRequest, tf_now: TfNow | None = None) -> Topology:
    """One host's topology. Several ``--from`` are merged as views of that host; files that are
    snapshots of different hosts are a one-line error pointing at the commands that take several."""
    hosts = resolve_hosts(request, tf_now)
    if len(hosts) > 1:
        names = ", ".join(str(t.host) for t in hosts[:3])
        raise InputError(f"the --from files are snapshots of {len(hosts)} hosts ({names}); this command reads one host "
                         "(`gputopo scan` and `gputopo recommend` take one snapshot per host; to train on several hosts: "
                         "`gputopo recommend --from A --from B --gpus N --save plan.json`, then "
                         "`gputopo train --launcher slurm --plan plan.json`)")
    return hosts[0]


def resolve_hosts(request: TopologyRequest, tf_now: TfNow | None = None) -> list[Topology]:
    """One topology per host: a single one unless the ``--from`` files are snapshots naming
    several hosts (each host's files merged)."""
    if request.machine is not None:
        from gputopo.sources.reference import load_reference

        topologies = [load_reference(request.machine)]
    elif request.from_files:
        topologies = _by_host(request)
        if len(topologies) > 1:
            one_host = [option for option in request.given_options() if option not in ("--from", "--tf-run")]
            if one_host:
                raise InputError(f"{one_host[0]} is for one host; with several --from each file is one host's snapshot")
            return topologies
    else:
        topologies = []
    tf_view = _tf_view(request, tf_now)
    if not topologies and tf_view is not None:
        topologies = [_probe_or_tf_view_alone(tf_view)]
    elif not topologies:
        from gputopo.sources.host.nvml import probe

        topologies = [probe()]
    (topology,) = topologies
    if tf_view is not None:
        _join_tf_view(topology, tf_view)
    if request.host is not None:
        topology.host = request.host
    return topologies


def _tf_view(request: TopologyRequest, tf_now: TfNow | None) -> TfView | None:
    if request.tf_log is not None:
        from gputopo.sources.tf.tflog import read_tf_log

        return read_tf_log(request.tf_log, run=request.tf_run)
    if request.tf_now:
        if tf_now is None:
            from gputopo.sources.tf.tf_init import capture_tf_init_log, tf_view_from_init_log

            return tf_view_from_init_log(capture_tf_init_log())
        return tf_now()
    return None


def _by_host(request: TopologyRequest) -> list[Topology]:
    """Each ``--from`` read by content; files of one host merged (in the order given), files that
    name different hosts kept apart. A file naming no host belongs with the others only where they
    are all one host."""
    from gputopo.sources.merge import merge_views
    from gputopo.sources.registry import read_file

    read = [(path, read_file(path)) for path in request.from_files]
    named = list(dict.fromkeys(topology.host for _, topology in read if topology.host is not None))
    if len(named) <= 1:  # one host: every file, in the order given
        groups = [read]
    else:
        unnamed = next((path for path, topology in read if topology.host is None), None)
        if unnamed is not None:
            raise InputError(
                f"{unnamed} does not name its host, and the other --from files are of {len(named)} hosts: save each "
                f"host's files as one snapshot that names it, e.g. `gputopo scan --from {unnamed} --host NAME --save NAME.json`"
            )
        if STANDARD_INPUT_PATH in request.from_files:
            raise InputError("several --from read one file per host; standard input (-) is not one of them")
        for path, topology in read:  # the names go into TF_CONFIG, sbatch scripts and tables
            checked_host_name(str(topology.host), f"{path}: host")
        groups = [[(path, topology) for path, topology in read if topology.host == host] for host in named]
    return [merge_views([topology for _, topology in group], [path for path, _ in group]) if len(group) > 1
            else group[0][1] for group in groups]


STANDARD_INPUT_PATH = "-"


def _probe_or_tf_view_alone(tf_view: TfView) -> Topology:
    """This host's NVML topology; without NVML (no driver: a log copied from a GPU host, or a
    machine without GPUs), TensorFlow's view alone."""
    from gputopo.errors import NvmlUnavailable
    from gputopo.sources.host.nvml import probe
    from gputopo.sources.tf.tflog import topology_from_tf_view

    try:
        return probe()
    except NvmlUnavailable:
        topology = topology_from_tf_view(tf_view)
        topology.reading_notes.append(ReadingNote("tf-log-alone"))  # NVML is not available here
        return topology


def _join_tf_view(topology: Topology, tf_view: TfView) -> None:
    """Attach TF's view; a snapshot saved with another TF log loses that log's findings (they are
    made again from the new one)."""
    if topology.tf is not None and topology.tf is not tf_view:
        topology.diagnostics = [f for f in topology.diagnostics if not f.code.startswith("tf-") or f.code == "tf-log-alone"]
        topology.reading_notes = [n for n in topology.reading_notes  # findings merged from a snapshot, as notes
                                  if not n.code.startswith("tf-") or n.code == "tf-log-alone"]
    topology.tf = tf_view
