"""`gputopo scan` with several ``--from``: the hosts side by side, then the findings about them
together and each host's own findings."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from gputopo.analysis.cluster import host_summary
from gputopo.model.cluster import Cluster
from gputopo.notation import count_word
from gputopo.views.common import out
from gputopo.views.topology import SEVERITY_STYLE


def hosts_table(cluster: Cluster) -> Table:
    table = Table(title=f"{count_word(len(cluster.hosts), 'host')} side by side", box=box.SIMPLE_HEAD,
                  title_justify="left")
    for column in ("host", "GPUs", "driver / CUDA", "GPU links", "NICs nearest the GPUs"):
        table.add_column(column, overflow="fold")
    for name, topology in zip(cluster.host_names, cluster.hosts):
        summary = host_summary(topology, name)
        # Text, never markup strings: a snapshot's "[/x]" or "[link=...]" is shown as it is.
        table.add_row(Text(summary.host, style="bold"), Text(summary.gpus), Text(summary.versions),
                      Text(summary.links), Text(summary.nics))
    return table


def cluster_findings_panel(cluster: Cluster) -> Panel:
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True, min_width=7)
    grid.add_column()
    for finding in cluster.diagnostics:
        message = Text("design: " if finding.kind == "design" else "", style="cyan")
        message.append(finding.message)
        if finding.fix:
            message.append(f"\nfix: {finding.fix}", style="dim")
        grid.add_row(Text(finding.severity.upper(), style=SEVERITY_STYLE.get(finding.severity, "")), message)
    for name, topology in zip(cluster.host_names, cluster.hosts):
        counts = [count_word(sum(f.severity == level for f in topology.diagnostics), level)
                  for level in ("error", "warning") if any(f.severity == level for f in topology.diagnostics)]
        if counts:
            grid.add_row(Text("HOST", style="dim"), Text(f"{name}: {', '.join(counts)} of its own "
                                                         f"(`gputopo scan --from` its snapshot shows them)"))
    if not grid.rows:
        return Panel(Text("No findings: the hosts match.", style="green"), title="Findings", title_align="left")
    return Panel(grid, title="Findings", title_align="left")


def render_cluster(cluster: Cluster, console: Console | None = None) -> None:
    console = console or out()
    console.print(hosts_table(cluster))
    console.print(cluster_findings_panel(cluster))
