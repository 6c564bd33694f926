"""`gputopo machines`: the built-in reference machines that `--machine NAME` accepts."""

from __future__ import annotations

from gputopo.cli import JsonOption, command


@command("machines")
def machines(json_output: JsonOption = False) -> None:
    """List the built-in reference machines (for `--machine NAME`)."""
    from gputopo.sources.reference import MACHINES
    from gputopo.views.common import out, print_json

    if json_output:
        print_json({"schema": "gputopo.machines/1",
                    "machines": [{"name": m.name, "title": m.title, "summary": m.summary} for m in MACHINES.values()]})
        return
    from rich.table import Table

    table = Table(title="Reference machines (public facts, for use without GPUs)")
    table.add_column("--machine")
    table.add_column("machine")
    table.add_column("what it shows")
    for m in MACHINES.values():
        table.add_row(m.name, m.title, m.summary)
    out().print(table)
