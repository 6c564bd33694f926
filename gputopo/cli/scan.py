"""`gputopo scan`: read a topology, add its findings, show or save it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from gputopo.cli import FromOption, HostOption, JsonOption, MachineOption, TfLogOption, TfRunOption, command, complete_fail_on

if TYPE_CHECKING:
    from gputopo.model import Finding, Topology

FailOnDesignOption = Annotated[
    bool,
    typer.Option("--fail-on-design",
                 help="With --fail-on: count design findings too (cross-socket pairs, TNS, GPUs that cannot peer: "
                      "how the machine is built), not only faults."),
]
ExpectGpusOption = Annotated[
    Optional[int],
    typer.Option("--expect-gpus", metavar="N", min=0,
                 help="Fail (a gpus-missing finding, an error) when fewer than N GPUs are visible; default: the job's "
                      "GPUs in Slurm's environment (SLURM_JOB_GPUS, SLURM_GPUS_ON_NODE) on this host; 0: no check."),
]


@command("scan")
def scan(
    from_files: FromOption = None,
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
            autocompletion=complete_fail_on,
            help="Exit with code 1 when a fault (not a design fact or a note) is at least this severe: warning or "
            "error (for CI and Slurm prologs).",
            metavar="LEVEL",
        ),
    ] = None,
    fail_on_design: FailOnDesignOption = False,
    expect_gpus: ExpectGpusOption = None,
) -> None:
    """Show how the GPUs are wired: links, P2P support, NUMA/CPU affinity, PCIe and NVLink, findings.
    --from may be given several times: files of one host are merged (a topo -m and a bandwidth test,
    say); snapshots of several hosts are shown side by side with where they do not match."""
    from gputopo.analysis import topologies_for
    from gputopo.sources import TopologyRequest

    checked_fail_on(fail_on)
    request = TopologyRequest(from_files=tuple(from_files or ()), machine=machine, tf_log=tf_log, tf_run=tf_run,
                              host=host, tf_now=tf_init)
    if tf_init:
        from gputopo.views.common import err

        with err().status("Starting TensorFlow's GPU initialisation in a child process..."):
            topologies = topologies_for(request)
    else:
        topologies = topologies_for(request)
    expected = expectation(expect_gpus, live=not (request.from_files or machine or tf_log or tf_run))
    if expected is not None:
        for one in topologies:
            add_expected_findings(one, *expected)
    if len(topologies) > 1:
        _scan_hosts(topologies, [option for option, given in (("--save", save), ("--svg", svg)) if given is not None],
                    json_output, fail_on, fail_on_design)
        return
    (topo,) = topologies
    if save is not None:
        from gputopo.sources.snapshot import save_snapshot

        save_snapshot(topo, save)
        typer.echo(f"saved {save}", err=True)  # standard error: stdout stays the topology (or --json)
    from gputopo.analysis.scan_result import scan_result

    result = scan_result(topo)  # the one object the text, --json and --svg render
    if svg is not None:
        from gputopo.fileio import atomic_write_text
        from gputopo.views.svg import render_svg

        atomic_write_text(svg, render_svg(topo, scan=result))
        typer.echo(f"saved {svg}", err=True)
    if json_output:
        from gputopo.views.common import print_json_text

        print_json_text(result.json_parts())
    else:
        from gputopo.views.topology import render_scan

        render_scan(result)
    if fail_on is not None:
        _fail_on_findings(topo.diagnostics, fail_on, fail_on_design)


def expectation(expect_gpus: int | None, live: bool) -> tuple[int, str] | None:
    """(GPUs expected, what says so): ``--expect-gpus N``; else, on this host (``live``), Slurm's
    environment (``analysis.causes.expected_gpus``); None: nothing expected (``--expect-gpus 0``)."""
    import os

    from gputopo.analysis.causes.expected_gpus import expected_from_env

    if expect_gpus is not None:
        return (expect_gpus, f"--expect-gpus {expect_gpus}") if expect_gpus > 0 else None
    return expected_from_env(os.environ) if live else None


def add_expected_findings(topology: Topology, expected: int, why: str) -> None:
    """A ``gpus-missing`` fault on ``topology`` where it shows fewer than ``expected`` GPUs."""
    from gputopo.analysis.causes.expected_gpus import expected_gpus_findings
    from gputopo.analysis.causes.finding_kinds import with_kinds

    where = f" on host {topology.host}" if topology.host else ""
    for finding in with_kinds(expected_gpus_findings(len(topology.gpus), expected, why, where)):
        topology.diagnostics.insert(0, finding)


FAIL_ON_LEVELS = ("warning", "error")


def checked_fail_on(fail_on: str | None) -> None:
    """``--fail-on`` must name a level (scan, doctor)."""
    if fail_on is not None and fail_on not in FAIL_ON_LEVELS:
        from gputopo.errors import InputError

        raise InputError(f"--fail-on must be {' or '.join(FAIL_ON_LEVELS)}, not {fail_on!r}")


def _scan_hosts(topologies: list[Topology], one_topology_options: list[str], json_output: bool, fail_on: str | None,
                fail_on_design: bool = False) -> None:
    """``scan --from a.json --from b.json ...`` of several hosts: side by side."""
    if one_topology_options:
        from gputopo.errors import InputError

        raise InputError(f"{one_topology_options[0]} is for one topology; with several --from each file is one "
                         "host's snapshot (name its host when saving it: `gputopo scan --host NAME --save FILE`)")
    from gputopo.analysis.cluster import cluster_with_findings, host_summary

    cluster = cluster_with_findings(topologies)  # the hosts' findings and those about them, made once
    if json_output:
        from gputopo.views.common import print_json

        print_json(cluster.to_dict())
    else:
        from gputopo.views.cluster import render_cluster

        render_cluster(cluster, [host_summary(topology, name) for name, topology in zip(cluster.host_names, cluster.hosts)])
    if fail_on is not None:
        _fail_on_findings([*cluster.diagnostics, *(f for t in cluster.hosts for f in t.diagnostics)], fail_on,
                          fail_on_design)


def _fail_on_findings(findings: list[Finding], level: str, design: bool = False) -> None:
    """``--fail-on LEVEL``: a ``CheckFailed`` (exit code 1) when any fault (and, with ``design``, any
    design finding) is at least ``level``; notes never count (``analysis.causes.finding_kinds``)."""
    from gputopo.analysis.causes.finding_kinds import counted
    from gputopo.errors import CheckFailed
    from gputopo.notation import count_word

    hits = counted(findings, level, design)
    if hits:
        what = "fault or design finding" if design else "fault"
        codes = ", ".join(dict.fromkeys(f.code for f in hits))
        raise CheckFailed(f"{count_word(len(hits), what)} at or above {level} ({codes}; --fail-on {level}"
                          + (" --fail-on-design)" if design else ")"))
