"""Rich rendering of a Topology for people: the `gputopo scan` screen.

Sections, top to bottom: where the topology came from; the GPU table; a picture of CPU sockets /
NUMA nodes with their GPUs and NICs; the link matrix in nvidia-smi's words, coloured by expected
speed, with its legend; the P2P capability matrices (read, write, atomics) with the reasons spelled
out; TensorFlow's view when a log was read; the findings.
"""

from __future__ import annotations

import importlib.util
from collections import defaultdict

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from gputopo.analysis.bandwidth import pair_estimate
from gputopo.model import (
    NVLINK_MEANING,
    P2P_OK,
    P2P_STATUS_MEANING,
    PCIE_PATH_MEANING,
    PCIE_PATHS,
    Topology,
)
from gputopo.views.common import out

# Larger topologies get a summary instead of N x N matrices that no terminal can show.
MAX_MATRIX_GPUS = 16

SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def speed_style(gbps: float) -> str:
    """Colour for a per-direction bandwidth: the greener, the faster."""
    if gbps >= 100:
        return "bold green"
    if gbps >= 35:
        return "green"
    if gbps >= 15:
        return "yellow"
    if gbps >= 8:
        return "dark_orange"
    return "red"


def _fmt_bytes(n: int | None) -> str:
    if n is None:
        return "?"
    return f"{n / 1024**3:.0f}G"


def _fmt(value: object) -> str:
    return "?" if value is None else str(value)


def _pcie(gen: int | None, width: int | None) -> str:
    if gen is None and width is None:
        return "?"
    return f"Gen{_fmt(gen)}x{_fmt(width)}"


def _header(topo: Topology) -> Panel:
    lines = [Text(topo.label or f"{len(topo.gpus)} GPUs", style="bold")]
    facts = [f"source: {topo.source}" + (f" ({topo.source_detail})" if topo.source_detail else "")]
    if topo.host:
        facts.append(f"host: {topo.host}")
    if topo.driver_version:
        facts.append(f"driver {topo.driver_version}")
    if topo.cuda_driver_version:
        facts.append(f"CUDA {topo.cuda_driver_version}")
    if topo.socket_interconnect:
        facts.append(f"socket interconnect: {topo.socket_interconnect}")
    lines.append(Text("  ".join(facts), style="dim"))
    if topo.is_reference:
        lines.append(Text("This is a built-in reference machine (public facts), not this host.", style="bold magenta"))
    return Panel(Group(*lines), title="gputopo scan", border_style="magenta" if topo.is_reference else "blue")


def _short_bus_id(bus_id: str | None) -> str:
    """``0000:9b:00.0`` -> ``9b:00.0`` (the domain is almost always 0)."""
    if bus_id is None:
        return "?"
    return bus_id[5:] if bus_id.startswith("0000:") else bus_id


def _short_name(name: str | None) -> str:
    """Drop the vendor words that every NVIDIA GPU name repeats (the JSON keeps the full name)."""
    if name is None:
        return "?"
    for prefix in ("NVIDIA ", "Tesla "):
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def gpu_table(topo: Topology) -> Table:
    table = Table(title="GPUs", title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    show_mig = any(g.mig_mode for g in topo.gpus)
    columns = ["GPU", "name", "bus id", "mem", "NUMA", "CPUs", "PCIe", "NVLink"] + (["MIG"] if show_mig else [])
    for col in columns:
        if col == "name":
            table.add_column(col, min_width=12, overflow="fold")
        else:
            table.add_column(col, no_wrap=True)
    show_host = any(g.host for g in topo.gpus)
    if show_host:
        table.add_column("host")
    for g in topo.gpus:
        degraded = (
            g.pcie_width_current is not None and g.pcie_width_max is not None and g.pcie_width_current < g.pcie_width_max
        ) or (g.pcie_gen_current is not None and g.pcie_gen_max is not None and g.pcie_gen_current < g.pcie_gen_max)
        now, most = _pcie(g.pcie_gen_current, g.pcie_width_current), _pcie(g.pcie_gen_max, g.pcie_width_max)
        pcie = Text(f"{now}/{most}" if degraded else now, style="yellow" if degraded else "")
        if g.nvlink_version or g.nvlink_active_links:
            nvlink = f"{_fmt(g.nvlink_version)} x{_fmt(g.nvlink_active_links)}"
        else:
            nvlink = "-"
        mig = "?" if g.mig_mode is None else ("on" if g.mig_mode else "off")
        row = [
            str(g.index), _short_name(g.name), _short_bus_id(g.pci_bus_id), _fmt_bytes(g.memory_total_bytes),
            _fmt(g.numa_node), _fmt(g.cpu_affinity), pcie, nvlink,
        ] + ([mig] if show_mig else [])
        if show_host:
            row.append(_fmt(g.host))
        table.add_row(*row)
    return table


def socket_picture(topo: Topology) -> Tree:
    """CPU sockets / NUMA nodes with their GPUs and NICs, as a tree."""
    tree = Tree("[bold]host[/]" if not topo.host else f"[bold]{topo.host}[/]")
    by_place: dict[tuple[str | None, int | None], list[int]] = defaultdict(list)
    for g in topo.gpus:
        by_place[(g.host, g.numa_node)].append(g.index)
    nics_by_numa: dict[int | None, list[str]] = defaultdict(list)
    for nic in topo.nics:
        nics_by_numa[nic.numa_node].append(nic.name)
    for (host, numa), gpus in sorted(by_place.items(), key=lambda kv: (kv[0][0] or "", -1 if kv[0][1] is None else kv[0][1])):
        cpus = topo.gpu(gpus[0]).cpu_affinity
        title = "NUMA node ?" if numa is None else f"NUMA node {numa}"
        if host:
            title = f"{host} / {title}"
        if cpus:
            title += f" [dim](CPUs {cpus})[/]"
        node = tree.add(title)
        node.add("GPUs " + ", ".join(str(i) for i in gpus))
        if numa is not None and nics_by_numa.get(numa):
            node.add("NICs " + ", ".join(nics_by_numa[numa]))
    return tree


def _link_cell(topo: Topology, a: int, b: int) -> Text:
    link = topo.link(a, b)
    style = speed_style(pair_estimate(topo, a, b).gbps)
    if link.type == "UNKNOWN":
        return Text("?", style="dim")
    return Text(link.type, style=style)


def link_matrix(topo: Topology) -> Table:
    table = Table(
        title="Links between GPUs (nvidia-smi words, coloured by expected speed)", title_justify="left",
        box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True,
    )
    table.add_column("", no_wrap=True)
    idx = topo.gpu_indices
    for i in idx:
        table.add_column(f"{i}", justify="center", no_wrap=True, min_width=4)
    nic_names = [n.name for n in topo.nics]
    for k, _ in enumerate(nic_names):
        table.add_column(f"NIC{k}", justify="center", no_wrap=True, min_width=4)
    nic_type = {(nl.gpu, nl.nic): nl.type for nl in topo.nic_links}
    for a in idx:
        cells: list[Text | str] = [f"GPU{a}"]
        for b in idx:
            cells.append(Text(" X ", style="dim") if a == b else _link_cell(topo, a, b))
        for name in nic_names:
            t = nic_type.get((a, name))
            cells.append(Text(t or "?", style="dim" if t is None else ""))
        table.add_row(*cells)
    return table


def link_legend(topo: Topology) -> Text:
    used = {link.type for link in topo.links}
    text = Text()
    for word in sorted(u for u in used if u.startswith("NV")):
        n = int(word[2:])
        meaning = NVLINK_MEANING.format(n=n)
        if any(link.nvswitch for link in topo.links if link.type == word):
            meaning += " through NVSwitch"
        text.append(f"  {word:<5} = {meaning}\n")
    for word in PCIE_PATHS:
        if word in used:
            text.append(f"  {word:<5} = {PCIE_PATH_MEANING[word]}\n")
    if "UNKNOWN" in used:
        text.append("  ?     = the source does not say how these GPUs are connected\n")
    for k, nic in enumerate(topo.nics):
        text.append(f"  NIC{k:<2} = {nic.name}" + (f" ({nic.device})" if nic.device else "") + "\n")
    return text


def link_summary(topo: Topology) -> Table:
    """For large topologies: how many pairs have each link type, instead of the matrix."""
    counts: dict[str, int] = defaultdict(int)
    for link in topo.links:
        counts[link.type] += 1
    table = Table(title=f"Links between {len(topo.gpus)} GPUs (summary)", title_justify="left")
    table.add_column("link")
    table.add_column("pairs", justify="right")
    table.add_column("expected GB/s per direction", justify="right")
    for word, count in sorted(counts.items(), key=lambda kv: -kv[1]):
        sample = next(link for link in topo.links if link.type == word)
        gbps = pair_estimate(topo, sample.a, sample.b).gbps
        table.add_row(word, str(count), Text(f"~{gbps:.0f}", style=speed_style(gbps)))
    return table


P2P_FIELDS = (("read", "p2p_read"), ("write", "p2p_write"), ("atomics", "p2p_atomics"))


def _p2p_matrix(topo: Topology, title: str, fields: list[str], words_seen: set[str]) -> Table:
    idx = topo.gpu_indices
    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
    table.add_column("", no_wrap=True)
    for i in idx:
        table.add_column(f"{i}", justify="center", no_wrap=True, min_width=4)
    for a in idx:
        cells: list[Text | str] = [f"GPU{a}"]
        for b in idx:
            if a == b:
                cells.append(Text("X", style="dim"))
                continue
            link = topo.link(a, b)
            words = [getattr(link, f) for f in fields]
            bad = [w for w in words if w not in (P2P_OK, None)]
            if bad:
                words_seen.update(bad)
                cells.append(Text(bad[0], style="red"))
            elif all(w is None for w in words):
                cells.append(Text("?", style="dim"))
            else:
                cells.append(Text("OK", style="green"))
        table.add_row(*cells)
    return table


def p2p_matrices(topo: Topology) -> Group | None:
    """The P2P read/write/atomics matrices (one matrix when all three agree), reasons spelled out;
    None when the source said nothing about P2P."""
    if all(getattr(link, f) is None for link in topo.links for _, f in P2P_FIELDS):
        return None
    words_seen: set[str] = set()
    same = all(len({link.p2p_read, link.p2p_write, link.p2p_atomics}) == 1 for link in topo.links)
    if same:
        tables = [_p2p_matrix(topo, "P2P read / write / atomics", ["p2p_read"], words_seen)]
    else:
        tables = [_p2p_matrix(topo, f"P2P {title}", [f], words_seen) for title, f in P2P_FIELDS]
    legend = Text()
    for word in sorted(words_seen):
        legend.append(f"  {word:<4}= {P2P_STATUS_MEANING.get(word, word)}\n")
    return Group(*tables, legend)


def findings_panel(topo: Topology) -> Panel:
    if not topo.diagnostics:
        return Panel(Text("No findings.", style="green"), title="Findings", title_align="left")
    lines: list[Text] = []
    order = {"error": 0, "warning": 1, "info": 2}
    for f in sorted(topo.diagnostics, key=lambda f: order.get(f.severity, 3)):
        line = Text()
        line.append(f"{f.severity.upper():<8}", style=SEVERITY_STYLE.get(f.severity, ""))
        line.append(f.message)
        if f.fix:
            line.append(f"\n        fix: {f.fix}", style="dim")
        lines.append(line)
    return Panel(Group(*lines), title="Findings", title_align="left")


def render_topology(topology: Topology, console: Console | None = None) -> None:
    console = console or out()
    console.print(_header(topology))
    if not topology.gpus:
        console.print("No GPUs.")
    else:
        console.print(gpu_table(topology))
        console.print(socket_picture(topology))
        if len(topology.gpus) > 1:
            if len(topology.gpus) <= MAX_MATRIX_GPUS:
                console.print(link_matrix(topology))
                console.print(link_legend(topology))
                matrices = p2p_matrices(topology)
                if matrices is not None:
                    console.print(matrices)
            else:
                console.print(link_summary(topology))
                console.print(link_legend(topology))
    if topology.tf is not None and importlib.util.find_spec("gputopo.views.tfview") is not None:
        from gputopo.views.tfview import render_tf_view

        render_tf_view(topology, console)
    console.print(findings_panel(topology))
