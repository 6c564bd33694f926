"""Where a Topology comes from: NVML, pasted ``nvidia-smi topo -m`` text, a TF log, a saved
snapshot, or a built-in reference machine. ``load_topology`` picks the source from the options that
every command shares (``--from``, ``--machine``, ``--tf-log``, ``--host``); ``load_topologies``
reads one snapshot per host for the cluster commands (``--from`` given several times)."""

from __future__ import annotations

from typing import Sequence

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.model import Finding, TfView, Topology

MAX_HOST_NAME_CHARS = 253  # a DNS name's limit


def load_topology_file(path: str) -> Topology:
    """A saved snapshot (JSON), a `gputopo report` page (its embedded snapshot) or
    ``nvidia-smi topo -m`` text, told apart by content."""
    from gputopo.sources.snapshot import looks_like_report, looks_like_snapshot, parse_snapshot, report_snapshot_text

    text = read_text_input(path, what="topology file")
    label = "standard input" if path == "-" else path
    if not text.strip():
        raise InputError(f"{label} is empty: expected a gputopo snapshot or `nvidia-smi topo -m` output")
    if looks_like_report(text):
        text = report_snapshot_text(text, source=label)
    if looks_like_snapshot(text):
        topo = parse_snapshot(text, source=label)
        topo.source_detail = topo.source_detail or label
        return topo
    from gputopo.sources.smi_text import parse_topo_matrix

    return parse_topo_matrix(text, source=label)


def _probe_or_tf_view_alone(tf_view: TfView) -> Topology:
    from gputopo.errors import NvmlUnavailable
    from gputopo.sources.nvml import probe
    from gputopo.sources.tflog import topology_from_tf_view

    try:
        return probe()
    except NvmlUnavailable:
        topo = topology_from_tf_view(tf_view)
        topo.add_finding(
            Finding(
                "info",
                "tf-log-alone",
                "NVML is not available here (no NVIDIA driver), so the TensorFlow log is read on its own: it says which GPUs "
                "could peer, not how they are wired",
                fix="run the same command on the GPU host, or add --from SNAPSHOT saved there with `gputopo scan --save`",
            )
        )
        return topo


def checked_host_name(name: str, what: str = "--host") -> str:
    """``name`` if it can name a host in TF_CONFIG and on a terminal: not empty, at most 253
    characters, no whitespace or control characters; else a one-line InputError."""
    if not name or len(name) > MAX_HOST_NAME_CHARS:
        raise InputError(f"{what} must be a host name of 1 to {MAX_HOST_NAME_CHARS} characters (got {len(name)})")
    bad = next((c for c in name if c.isspace() or not c.isprintable()), None)
    if bad is not None:
        raise InputError(f"{what} {name[:40]!r} holds {bad!r}: a host name has no spaces or control characters")
    return name


def load_topologies(from_files: Sequence[str]) -> list[Topology]:
    """One topology per host, from snapshots that each name their host (``scan --host NAME
    --save``); the same host twice, or a file naming none, is a one-line InputError."""
    if "-" in from_files:
        raise InputError("several --from read one file per host; standard input (-) is not one of them")
    topologies: list[Topology] = []
    first_file: dict[str, str] = {}
    for path in from_files:
        topo = load_topology_file(path)
        if topo.host is None:
            raise InputError(
                f"{path} does not name its host: save it as a snapshot that does, e.g. "
                f"`gputopo scan --from {path} --host NAME --save NAME.json`"
            )
        host = checked_host_name(topo.host, f"{path}: host")
        if host in first_file:
            raise InputError(f"{first_file[host]} and {path} are the same host ({host})")
        first_file[host] = path
        topologies.append(topo)
    return topologies


def load_topology(
    from_file: str | None = None,
    machine: str | None = None,
    tf_log: str | None = None,
    tf_run: int | None = None,
    host: str | None = None,
) -> Topology:
    """Resolve the shared source options into one Topology, as read (findings come from
    ``gputopo.analysis.with_findings``).

    Precedence: ``--machine``, then ``--from``, then this host's NVML. A TF log (its start-up
    ``tf_run``, from 1, where it holds several) is joined to that
    topology (by PCI bus id); where NVML is not available (no driver: a log copied from another
    machine), the TF log alone becomes the topology. ``host`` names the host the topology is of
    (text, TF logs and reference machines do not say; it replaces NVML's own name too).
    """
    if host is not None:
        checked_host_name(host)
    if machine and from_file:
        raise InputError("give either --machine or --from, not both")
    if from_file == "-" and tf_log == "-":
        raise InputError("--from - and --tf-log - cannot both read standard input; give one of them as a file")
    if tf_run is not None and tf_log is None:
        raise InputError("--tf-run picks a start-up of --tf-log; give --tf-log too")
    tf_view = None
    if tf_log is not None:
        from gputopo.sources.tflog import read_tf_log

        tf_view = read_tf_log(tf_log, run=tf_run)
    if machine:
        from gputopo.sources.reference import load_reference

        topo = load_reference(machine)
    elif from_file:
        topo = load_topology_file(from_file)
    elif tf_view is not None:
        topo = _probe_or_tf_view_alone(tf_view)
    else:
        from gputopo.sources.nvml import probe

        topo = probe()
    if tf_view is not None:
        if topo.tf is not None and topo.tf is not tf_view:
            # A snapshot saved with another TF log: the log given now wins, and the findings about
            # the old one go (they are made again from the new one below).
            topo.diagnostics = [f for f in topo.diagnostics if not f.code.startswith("tf-") or f.code == "tf-log-alone"]
        topo.tf = tf_view
    if host is not None:
        topo.host = host
    return topo
