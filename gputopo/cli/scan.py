"""`gputopo scan` and `gputopo machines`."""

from __future__ import annotations

from typing import Optional

import typer
from typing_extensions import Annotated

from gputopo.cli import FromOption, JsonOption, MachineOption, TfLogOption, command


@command("scan")
def scan(
    from_file: FromOption = None,
    machine: MachineOption = None,
    tf_log: TfLogOption = None,
    json_output: JsonOption = False,
    save: Annotated[
        Optional[str], typer.Option("--save", help="Also write the topology snapshot to FILE (JSON).", metavar="FILE")
    ] = None,
    tf_init: Annotated[
        bool,
        typer.Option(
            "--tf",
            help="Also start TensorFlow's GPU initialisation in a child process and cross-check its view "
            "(needs the tensorflow extra).",
        ),
    ] = False,
) -> None:
    """Show how the GPUs are wired: links, P2P support, NUMA/CPU affinity, PCIe and NVLink, findings."""
    from gputopo.analysis import with_findings
    from gputopo.sources import load_topology
    from gputopo.views import topology as view
    from gputopo.views.common import print_json

    if tf_init:
        from gputopo.errors import InputError
        from gputopo.tf.initlog import load_topology_with_tf_init

        if tf_log is not None:
            raise InputError("give either --tf (run TensorFlow now) or --tf-log FILE (a saved log), not both")
        topo = load_topology_with_tf_init(from_file=from_file, machine=machine)
    else:
        topo = with_findings(load_topology(from_file=from_file, machine=machine, tf_log=tf_log))
    if save:
        from gputopo.sources.snapshot import save_snapshot

        save_snapshot(topo, save)
    if json_output:
        print_json(topo.to_dict())
    else:
        view.render_topology(topo)


@command("machines")
def machines(json_output: JsonOption = False) -> None:
    """List the built-in reference machines (for `--machine NAME`)."""
    from gputopo.sources.reference import MACHINES
    from gputopo.views.common import out, print_json

    if json_output:
        print_json([{"name": m.name, "title": m.title, "summary": m.summary} for m in MACHINES.values()])
        return
    from rich.table import Table

    table = Table(title="Reference machines (public facts, for use without GPUs)")
    table.add_column("--machine")
    table.add_column("machine")
    table.add_column("what it shows")
    for m in MACHINES.values():
        table.add_row(m.name, m.title, m.summary)
    out().print(table)
