"""Where a Topology comes from: NVML, pasted ``nvidia-smi topo -m`` text, a TF log, a saved
snapshot, or a built-in reference machine. ``load_topology`` picks the source from the options that
every command shares (``--from``, ``--machine``, ``--tf-log``)."""

from __future__ import annotations

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.model import Finding, TfView, Topology


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


def load_topology(
    from_file: str | None = None,
    machine: str | None = None,
    tf_log: str | None = None,
    tf_run: int | None = None,
) -> Topology:
    """Resolve the shared source options into one Topology, as read (findings come from
    ``gputopo.analysis.with_findings``).

    Precedence: ``--machine``, then ``--from``, then this host's NVML. A TF log (its start-up
    ``tf_run``, from 1, where it holds several) is joined to that
    topology (by PCI bus id); where NVML is not available (no driver: a log copied from another
    machine), the TF log alone becomes the topology.
    """
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
    return topo
