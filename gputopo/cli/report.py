"""`gputopo report`: one self-contained HTML page (drawing, heatmaps, findings, plan, snapshot).

Option parsing and composition only: the page is ``gputopo.views.report``, the plan
``gputopo.analysis.recommend``. Measurements from ``--bench SNAPSHOT`` (saved by
``bench-p2p --save``) are laid onto the topology's links before drawing.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from gputopo.cli import (
    FromOption,
    HostOption,
    MachineOption,
    TfLogOption,
    TfRunOption,
    command,
)
from gputopo.errors import InputError


@command("report")
def report_command(
    output: Annotated[str, typer.Option("--output", "-o", help="The HTML file to write.", metavar="FILE")],
    from_files: FromOption = None,
    host: HostOption = None,
    machine: MachineOption = None,
    tf_log: TfLogOption = None,
    tf_run: TfRunOption = None,
    bench: Annotated[
        Optional[str],
        typer.Option("--bench", help="A snapshot saved by `bench-p2p --save`: label links with measured GB/s.", metavar="SNAPSHOT"),
    ] = None,
    join_by_index: Annotated[
        bool,
        typer.Option("--join-by-index", help="Lay --bench figures on the GPUs of the same index where the bench names "
                                             "its GPUs by neither PCI bus id nor UUID (assumes one numbering)."),
    ] = False,
    gpus: Annotated[
        Optional[int], typer.Option("--gpus", "-n", metavar="N", help="Plan for N GPUs: highlight the best group, with its lines.")
    ] = None,
    watch: Annotated[Optional[str], typer.Option(
        "--watch", help="Lines of `gputopo watch --json` (or `train --watch-file`): draw each link's use over time "
        "beside the plan.", metavar="FILE")] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print a small JSON summary of what was written.")] = False,
) -> None:
    """Write one self-contained HTML page: the box drawn with its links, heatmaps, findings, the
    plan for --gpus N, and the snapshot (read it back with `scan --from PAGE`)."""
    from gputopo.analysis import resolved, topology_for, with_findings
    from gputopo.analysis.expect.measured import merge_measurements
    from gputopo.fileio import atomic_write_text
    from gputopo.sources import TopologyRequest
    from gputopo.sources.registry import read_file
    from gputopo.views.report import render_report, report_summary

    if gpus is not None and gpus < 1:
        raise InputError(f"--gpus must be 1 or more (got {gpus})")
    watched = None
    if watch is not None:
        from gputopo.sources.tools.watch_lines import read_watch_lines

        watched = read_watch_lines(watch)
    request = TopologyRequest(from_files=tuple(from_files or ()), machine=machine, tf_log=tf_log, tf_run=tf_run, host=host)
    if bench is not None and not (request.from_files or machine or tf_log):
        # the bench snapshot is a whole topology
        topology = topology_for(TopologyRequest(from_files=(bench,), host=host))
    else:
        topology = resolved(request)  # (health pastes beside it judged, as every command judges them)
        if bench is not None:
            merge_measurements(topology, read_file(bench), bench, join_by_index)
        topology = with_findings(topology)
    recommendation = None
    if gpus is not None:
        from gputopo.analysis.recommend import recommend

        recommendation = recommend(topology, gpus)
    from gputopo.analysis.scan_result import scan_result

    atomic_write_text(output, render_report(topology, recommendation, watched, scan_result(topology)))
    if json_output:
        from gputopo.views.common import print_json

        print_json(report_summary(output, topology))
    else:
        typer.echo(f"wrote {output} ({len(topology.gpus)} GPUs, {len(topology.links)} links)", err=True)
