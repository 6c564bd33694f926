"""`gputopo scan` with several ``--from``: the hosts side by side, then the findings about them
together and each host's own findings."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from gputopo.model.cluster import Cluster
from gputopo.notation import count_word
from gputopo.views.common import out
from gputopo.views.findings import print_findings, print_hanging

if TYPE_CHECKING:
    from gputopo.analysis.cluster import HostSummary


def hosts_table(cluster: Cluster, summaries: list[HostSummary]) -> Table:
    """A row per host: ``summaries``, each host's as ``analysis.cluster.host_summary`` made it."""
    table = Table(title=f"{count_word(len(cluster.hosts), 'host')} side by side", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for column in ("host", "GPUs", "driver / CUDA", "GPU links", "NICs nearest the GPUs"):
        table.add_column(column, overflow="fold")
    for summary in summaries:
        # Text, never markup strings: a snapshot's "[/x]" or "[link=...]" is shown as it is.
        table.add_row(Text(summary.host, style="bold"), Text(summary.gpus), Text(summary.versions),
                      Text(summary.links), Text(summary.nics))
    return table


def render_cluster_findings(cluster: Cluster, console: Console) -> None:
    """The findings about the hosts together, as scan and doctor print findings; then each host's
    count of its own."""
    from rich.rule import Rule

    console.print(Rule(Text("Findings", style="bold"), align="left"))
    print_findings(console, cluster.diagnostics)
    own = []
    for name, topology in zip(cluster.host_names, cluster.hosts):
        counts = [count_word(sum(f.severity == level for f in topology.diagnostics), level)
                  for level in ("error", "warning") if any(f.severity == level for f in topology.diagnostics)]
        if counts:
            own.append(f"{name}: {', '.join(counts)} of its own (`gputopo scan --from` its snapshot shows them)")
    if own and cluster.diagnostics:
        console.print()
    for line in own:
        print_hanging(console, line, 7, 0, Text("HOST  ", style="dim"))
    if not cluster.diagnostics and not own:
        console.print(Text("No findings: the hosts match.", style="green"))


def render_cluster(cluster: Cluster, summaries: list[HostSummary], console: Console | None = None) -> None:
    """``scan`` of several hosts: ``summaries`` (a row per host, ``analysis.cluster.host_summary``), then the findings."""
    console = console or out()
    console.print(hosts_table(cluster, summaries))
    render_cluster_findings(cluster, console)
