"""`gputopo scan`: read a topology, add its findings, show or save it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from gputopo.cli import FromFilesOption, HostOption, JsonOption, MachineOption, TfLogOption, TfRunOption, command

if TYPE_CHECKING:
    from gputopo.model import Finding, Topology


@command("scan")
def scan(
    from_files: FromFilesOption = None,
    host: HostOption = None,
    machine: MachineOption = None,
    tf_log: TfLogOption = None,
    tf_run: TfRunOption = None,
    json_output: JsonOption = False,
    save: Annotated[
        Optional[str], typer.Option("--save", help="Also write the topology snapshot to FILE (JSON).", metavar="FILE")
    ] = None,
    svg: Annotated[
        Optional[str], typer.Option("--svg", help="Also write the drawing of the box to FILE (SVG).", metavar="FILE")
    ] = None,
    tf_init: Annotated[
        bool,
        typer.Option(
            "--tf",
            help="Also start TensorFlow's GPU initialisation in a child process and cross-check its view "
            "(needs the tensorflow extra).",
        ),
    ] = False,
    fail_on: Annotated[
        Optional[str],
        typer.Option(
            "--fail-on",
            help="Exit with code 1 when a finding is at least this severe: warning or error (for CI and Slurm prologs).",
            metavar="LEVEL",
        ),
    ] = None,
) -> None:
    """Show how the GPUs are wired: links, P2P support, NUMA/CPU affinity, PCIe and NVLink, findings.
    With --from given once per host: the hosts side by side and where they do not match."""
    from gputopo.analysis import with_findings
    from gputopo.sources import checked_host_name, load_topology

    if fail_on is not None and fail_on not in FAIL_ON_LEVELS:
        from gputopo.errors import InputError

        raise InputError(f"--fail-on must be {' or '.join(FAIL_ON_LEVELS)}, not {fail_on!r}")
    if from_files and len(from_files) > 1:
        one_topology_only = {"--host": host, "--machine": machine, "--tf-log": tf_log, "--tf-run": tf_run,
                             "--tf": tf_init, "--save": save, "--svg": svg}
        _scan_hosts(from_files, [option for option, given in one_topology_only.items() if given], json_output, fail_on)
        return
    from_file = from_files[0] if from_files else None
    if host is not None:
        checked_host_name(host)
    if tf_init:
        from gputopo.errors import InputError

        if tf_log is not None:
            raise InputError("give either --tf (run TensorFlow now) or --tf-log FILE (a saved log), not both")
        if machine is not None:
            raise InputError("--tf runs TensorFlow on this host, and --machine is a reference machine, not this "
                             "host: give --from with this host's snapshot or topology text, or neither")
        topo = _topology_with_tf_init(from_file=from_file, machine=machine)
        topo.host = host or topo.host
    else:
        topo = load_topology(from_file=from_file, machine=machine, tf_log=tf_log, tf_run=tf_run, host=host)
    topo = with_findings(topo)
    if save is not None:
        from gputopo.sources.snapshot import save_snapshot

        save_snapshot(topo, save)
    if svg is not None:
        from gputopo.fileio import atomic_write_text
        from gputopo.views.svg import render_svg

        atomic_write_text(svg, render_svg(topo))
    if json_output:
        from gputopo.views.common import print_json

        print_json(topo.to_dict())
    else:
        from gputopo.views.topology import render_topology

        render_topology(topo)
    if fail_on is not None:
        _fail_on_findings(topo.diagnostics, fail_on)


FAIL_ON_LEVELS = ("warning", "error")


def _scan_hosts(from_files: list[str], one_topology_options: list[str], json_output: bool, fail_on: str | None) -> None:
    """``scan --from a.json --from b.json ...``: one snapshot per host, side by side."""
    if one_topology_options:
        from gputopo.errors import InputError

        raise InputError(f"{one_topology_options[0]} is for one topology; with several --from each file is one "
                         "host's snapshot (name its host when saving it: `gputopo scan --host NAME --save FILE`)")
    from gputopo.analysis.cluster import cluster_with_findings
    from gputopo.sources import load_topologies

    cluster = cluster_with_findings(load_topologies(from_files))
    if json_output:
        from gputopo.views.common import print_json

        print_json(cluster.to_dict())
    else:
        from gputopo.views.cluster import render_cluster

        render_cluster(cluster)
    if fail_on is not None:
        _fail_on_findings([*cluster.diagnostics, *(f for t in cluster.hosts for f in t.diagnostics)], fail_on)


def _fail_on_findings(findings: list[Finding], level: str) -> None:
    """``--fail-on LEVEL``: a ``CheckFailed`` (exit code 1) when any finding is at least ``level``."""
    from gputopo.errors import CheckFailed
    from gputopo.model import SEVERITIES
    from gputopo.notation import count_word

    hits = [f for f in findings if SEVERITIES.index(f.severity) >= SEVERITIES.index(level)]
    if hits:
        raise CheckFailed(f"{count_word(len(hits), 'finding')} at or above {level} (--fail-on {level})")


def _topology_with_tf_init(from_file: str | None, machine: str | None) -> Topology:
    """The topology (``--from``, ``--machine`` or NVML) joined to TF's view from a live child.

    Where NVML cannot start (no driver, as on a CPU-only machine), TensorFlow's view becomes the
    topology, as with ``--tf-log`` alone, so the user still learns what TensorFlow sees.
    """
    from gputopo.errors import NvmlUnavailable
    from gputopo.model import Finding
    from gputopo.sources import load_topology
    from gputopo.sources.tf_init import capture_tf_init_log, tf_view_from_init_log
    from gputopo.sources.tflog import topology_from_tf_view
    from gputopo.views.common import err

    with err().status("Starting TensorFlow's GPU initialisation in a child process..."):
        tf_view = tf_view_from_init_log(capture_tf_init_log())
    if from_file or machine:
        topology = load_topology(from_file=from_file, machine=machine)
    else:
        try:
            topology = load_topology()
        except NvmlUnavailable as exc:
            topology = topology_from_tf_view(tf_view)
            topology.add_finding(Finding("info", "nvml-unavailable", str(exc)))
    topology.tf = tf_view
    return topology
