"""Rich rendering of a Topology for people: the `gputopo scan` screen.

Sections, top to bottom: where the topology came from; the GPU table; a picture of CPU sockets /
NUMA nodes with their GPUs and NICs; the link matrix in nvidia-smi's words, coloured by expected
speed, with its legend; the P2P capability matrices (read, write, atomics) with the reasons spelled
out; TensorFlow's view when a log was read; the findings.
"""

from __future__ import annotations

import importlib.util
from collections import Counter, defaultdict
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.measure import Measurement
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from gputopo.model import (
    NVLINK_MEANING,
    P2P_OK,
    P2P_STATUS_MEANING,
    PCIE_PATH_MEANING,
    PCIE_PATHS,
    Topology,
)
from gputopo.views.common import matrix_tables, out
from gputopo.views.findings import print_findings
from gputopo.views.gpu_table import gpu_cells, gpu_table
from gputopo.views.live import fmt_bytes as _fmt_bytes  # noqa: F401  (the GPU table tests use it)
from gputopo.views.live import live_state
from gputopo.views.topology_large import (
    MAX_LISTED_GPUS,
    gpu_summary_table,
    host_summary_tree,
)
from gputopo.views.unknowns import nvlink_cell, span_figure
from gputopo.views.vocabulary import SEVERITY_STYLE as SEVERITY_STYLE  # noqa: F401  (re-exported)

if TYPE_CHECKING:
    from gputopo.analysis.scan_result import GpuPlace, ScanResult

# Larger topologies get a summary instead of N x N matrices that no terminal can show.
MAX_MATRIX_GPUS = 16



# (lowest GB/s per direction, colour, word for the legend), fastest first.
SPEED_STYLES = (
    (100.0, "bold green", "bold green"),
    (35.0, "green", "green"),
    (15.0, "yellow", "yellow"),
    (8.0, "dark_orange", "orange"),
    (0.0, "red", "red"),
)


def speed_style(gbps: float) -> str:
    """Colour for a per-direction bandwidth: the greener, the faster."""
    for lowest, style, _ in SPEED_STYLES:
        if gbps >= lowest:
            return style
    return SPEED_STYLES[-1][1]


def speed_key() -> Text:
    """What the link colours mean, in GB/s per direction."""
    text = Text("expected GB/s per direction: ")
    for k, (lowest, style, word) in enumerate(SPEED_STYLES):
        upper = SPEED_STYLES[k - 1][0] if k else None
        span = f">= {lowest:.0f}" if upper is None else (f"< {upper:.0f}" if lowest == 0 else f"{lowest:.0f}-{upper:.0f}")
        text.append(f"{word} {span}", style=style)
        if k < len(SPEED_STYLES) - 1:
            text.append(", ")
    return text


def _header(topo: Topology) -> Panel:
    lines = [Text(topo.label or f"{len(topo.gpus)} GPUs", style="bold")]
    # The file path is often in the label already ("... text from PATH"): say it once.
    detail = topo.source_detail if topo.source_detail and topo.source_detail not in (topo.label or "") else None
    facts = [f"source: {topo.source}" + (f" ({detail})" if detail else "")]
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


def socket_picture(topo: Topology, places: list[GpuPlace]) -> Tree:
    """CPU sockets (where the source knows them) / NUMA nodes with their GPUs and NICs, as a tree,
    from the GPUs' ``places`` (``ScanResult.places``)."""
    # Every label is a Text: host, NIC and CPU-list strings come from the user's files, never markup.
    hosts = {p.host for p in places if p.host}
    tree = Tree(Text(topo.host or (f"{len(hosts)} hosts" if len(hosts) > 1 else "host"), style="bold"))
    # Grouped by CPU list too: `nvidia-smi topo -m` without a NUMA column still tells the sockets
    # apart by CPU affinity (a DGX-1 capture: GPUs 0-3 on 0-11,24-35, GPUs 4-7 on 12-23,36-47).
    by_place: dict[tuple[str, int, str], list[GpuPlace]] = defaultdict(list)
    for p in places:
        by_place[(p.host or "", -1 if p.numa_node is None else p.numa_node, p.cpu_affinity or "")].append(p)
    one_host = len({p.host for p in places}) <= 1  # NICs carry no host: place them only then
    nics_by_numa: dict[int | None, list[str]] = defaultdict(list)
    for nic in topo.nics:
        nics_by_numa[nic.numa_node].append(nic.name)
    placed: set[int] = set()
    for (host, numa, cpus), placed_here in sorted(by_place.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[1][0].gpu)):
        gpus = [p.gpu for p in placed_here]
        title = Text("NUMA node ?" if numa < 0 else f"NUMA node {numa}")
        affinity = {p.numa_affinity for p in placed_here}
        if numa < 0 and len(affinity) == 1 and None not in affinity:  # Grace: a set of nodes
            title = Text(f"NUMA nodes {next(iter(affinity))}")
        sockets = {p.socket for p in placed_here}
        if len(sockets) == 1 and None not in sockets:  # only where the source knows the socket
            title = Text(f"socket {next(iter(sockets))} / ") + title
        if host:
            title = Text(f"{host} / ") + title
        if cpus:
            title.append(f" (CPUs {cpus})", style="dim")
        node = tree.add(title)
        node.add(Text("GPUs " + ", ".join(str(i) for i in gpus)))
        if one_host and numa >= 0 and nics_by_numa.get(numa) and numa not in placed:
            node.add(Text("NICs " + ", ".join(nics_by_numa[numa])))
            placed.add(numa)
        if one_host:
            nearest = _nearest_nics_line(placed_here)
            if nearest is not None:
                node.add(nearest)
    # NICs not shown beside GPUs above: their NUMA node is unknown, has no GPU, or hosts differ.
    rest = [name for numa, names in sorted(nics_by_numa.items(), key=lambda kv: -1 if kv[0] is None else kv[0])
            if numa not in placed for name in names]
    if rest:
        tree.add(Text("NICs " + ", ".join(rest) + " (NUMA node not known)", style="dim"))
    return tree


def _nearest_nics_line(places: list[GpuPlace]) -> Text | None:
    """``nearest NIC: mlx5_0 (PIX) for GPUs 0, 1; mlx5_1 (PIX) for GPUs 2, 3``: each GPU's NICs on
    its best path (``GpuPlace.nearest_nics``, as ``--json``'s ``gpu_places``); None where no path
    to a NIC is known."""
    by_nics: dict[tuple[tuple[str, ...], str], list[int]] = defaultdict(list)
    for p in places:
        if p.nic_path is not None:
            by_nics[(p.nearest_nics, p.nic_path)].append(p.gpu)
    if not by_nics:
        return None
    return Text("nearest NIC: " + "; ".join(
        f"{', '.join(nics)} ({path}) for GPU{'s' if len(gpus) > 1 else ''} {', '.join(map(str, gpus))}"
        for (nics, path), gpus in by_nics.items()), style="dim")


def _link_cell(result: ScanResult, a: int, b: int) -> Text:
    link = result.topology.link_map().get((a, b))
    if link is None or link.type == "UNKNOWN":  # a snapshot may lack a pair: say so, don't crash
        return Text("?", style="dim")
    gbps = result.expected_speed(link)
    if gbps is None:  # a virtual machine: the hypervisor's word, no speed to colour it by
        return Text(link.type)
    return Text(link.type, style=speed_style(gbps))


LINK_MATRIX_TITLE = "Links between GPUs (nvidia-smi words, coloured by expected speed)"


def link_matrices(result: ScanResult, width: int | None = None) -> list[Group]:
    """The link matrix (GPUs, then NIC columns), split into column blocks that fit ``width``."""
    topo = result.topology
    idx = topo.gpu_indices
    headers = [str(i) for i in idx] + [f"NIC{k}" for k in range(len(topo.nics))]
    nic_type = {(nl.gpu, nl.nic): nl.type for nl in topo.nic_links}
    rows: list[tuple[str, list[Text]]] = []
    for a in idx:
        cells = [Text(" X ", style="dim") if a == b else _link_cell(result, a, b) for b in idx]
        for nic in topo.nics:
            t = nic_type.get((a, nic.name))
            cells.append(Text(t or "?", style="dim" if t is None else ""))
        rows.append((f"GPU{a}", cells))
    return matrix_tables(LINK_MATRIX_TITLE, headers, rows, width)


def _nvlink_count(word: str) -> int | None:
    count = word[2:]
    return int(count) if word.startswith("NV") and count.isascii() and count.isdigit() and len(count) < 6 else None


def link_legend_rows(result: ScanResult, speeds: bool = False, colours: bool = True) -> list[tuple[str, Text]]:
    """(word, meaning) for each link word used; with ``speeds``, each meaning ends with the word's
    expected GB/s per direction (``ScanResult.speed_spans``: a range, and what it assumes, where the
    source lacks a fact; "not known" on a virtual machine), and, where ``colours`` are shown, a row
    says what they mean."""
    topo = result.topology
    used = {link.type for link in topo.links}
    rows: list[tuple[str, Text]] = []
    coloured = False

    def row(word: str, meaning: str) -> None:
        nonlocal coloured
        text = Text(meaning)
        if speeds and word != "?":
            span = result.speed_spans.get(word)
            if span is None:
                text.append(", GB/s not known (a virtual machine: the link words are the hypervisor's)", style="dim")
            else:
                coloured = True
                text.append(", ")
                text.append(f"{span_figure(span)}\u00a0GB/s", style=speed_style(span.low_gbps))  # the figure never leaves its unit
                text.append(" per direction")
                if span.assumptions:
                    text.append(f" ({'; '.join(span.assumptions)})", style="dim")
        rows.append((word, text))

    nv_words = sorted((u for u in used if _nvlink_count(u) is not None), key=lambda u: _nvlink_count(u) or 0)
    for word in nv_words:
        n = _nvlink_count(word)
        meaning = "a single NVLink" if n == 1 else NVLINK_MEANING.format(n=n)
        if any(link.nvswitch for link in topo.links if link.type == word):
            meaning += " through NVSwitch"
        row(word, meaning)
    for word in PCIE_PATHS:
        if word in used:
            row(word, PCIE_PATH_MEANING[word])
    for word in sorted(used - set(nv_words) - set(PCIE_PATHS) - {"UNKNOWN"}):
        row(word, "a link word gputopo does not know")
    if "UNKNOWN" in used:
        row("?", "the source does not say how these GPUs are connected")
    if speeds and colours and coloured:
        rows.append(("colour", speed_key()))
    for k, nic in enumerate(topo.nics):
        rows.append((f"NIC{k}", Text(nic.name + (f" ({nic.device})" if nic.device else ""))))
    return rows


def link_legend(result: ScanResult, speeds: bool = False, colours: bool = True) -> Table:
    """The legend under the link matrix, as a grid so that long meanings wrap under themselves."""
    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    for word, meaning in link_legend_rows(result, speeds, colours):
        grid.add_row(Text(f"  {word:<6} ="), meaning)
    return grid


def link_summary(result: ScanResult) -> Table:
    """For large topologies: how many pairs have each link type, instead of the matrix."""
    topo = result.topology
    counts: dict[str, int] = defaultdict(int)
    table = topo.link_table()  # (counted per kind of link: a 576-GPU domain has 165,600 links)
    for kind, pairs in Counter(table.kind_of).items():
        counts[table.kinds[kind][0]] += pairs
    table = Table(title=f"Links between {len(topo.gpus)} GPUs (summary)", title_justify="left")
    table.add_column("link")
    table.add_column("pairs", justify="right")
    table.add_column("expected GB/s per direction", justify="right")
    for word, count in sorted(counts.items(), key=lambda kv: -kv[1]):
        if word == "UNKNOWN":
            table.add_row("?", str(count), Text("?", style="dim"))
            continue
        # Pairs of one word can differ (PCIe generation, NVLink version): show the range, not one pair.
        span = result.speed_spans.get(word)
        if span is None:
            table.add_row(Text(word), str(count), Text("?", style="dim"))
            continue
        table.add_row(Text(word), str(count), Text(span_figure(span) + ("*" if span.assumptions else ""),
                                                   style=speed_style(span.low_gbps)))
    return table


P2P_FIELDS = (("read", "p2p_read"), ("write", "p2p_write"), ("atomics", "p2p_atomics"))


def _p2p_matrix(
    topo: Topology, title: str, fields: list[str], words_seen: set[str], width: int | None = None
) -> list[Group]:
    idx = topo.gpu_indices
    links = topo.link_map()
    rows: list[tuple[str, list[Text]]] = []
    for a in idx:
        cells: list[Text] = []
        for b in idx:
            if a == b:
                cells.append(Text("X", style="dim"))
                continue
            link = links.get((a, b))
            words = [getattr(link, f) if link is not None else None for f in fields]
            bad = [w for w in words if w not in (P2P_OK, None)]
            if bad:
                words_seen.update(bad)
                cells.append(Text(bad[0], style="red"))
            elif all(w is None for w in words):
                words_seen.add("?")
                cells.append(Text("?", style="dim"))
            else:
                cells.append(Text("OK", style="green"))
        rows.append((f"GPU{a}", cells))
    return matrix_tables(title, [str(i) for i in idx], rows, width)


def p2p_matrices(topo: Topology, width: int | None = None) -> Group | None:
    """The P2P read/write/atomics matrices (one matrix when all three agree), reasons spelled out;
    None when the source said nothing about P2P."""
    if all(getattr(link, f) is None for link in topo.links for _, f in P2P_FIELDS):
        return None
    if topo.source == "tf-log":  # TF's peer access, not read/write capabilities: its own matrix below says it
        return Group(Text("P2P read / write / atomics: not in a TensorFlow log (its peer-access matrix, with "
                          "inferred pairs marked, is below)", style="dim"), Text(""))
    words_seen: set[str] = set()
    same = all(len({link.p2p_read, link.p2p_write, link.p2p_atomics}) == 1 for link in topo.links)
    parts: list[Group | Text] = []
    if same:
        parts += _p2p_matrix(topo, "P2P read / write / atomics", ["p2p_read"], words_seen, width)
    else:
        unknown = []
        for title, f in P2P_FIELDS:
            if all(getattr(link, f) is None for link in topo.links):
                unknown.append(title)  # a matrix of '?' only says this in many more lines
            else:
                parts += _p2p_matrix(topo, f"P2P {title}", [f], words_seen, width)
        if unknown:
            parts.append(Text(f"P2P {' / '.join(unknown)}: not in the source", style="dim"))
    # A grid, so that long meanings wrap under themselves.
    legend = Table.grid(padding=(0, 1))
    legend.add_column(no_wrap=True)
    legend.add_column()
    for word in sorted(words_seen - {"?"}):
        legend.add_row(Text(f"  {word:<3} ="), Text(P2P_STATUS_MEANING.get(word, word)))
    if "?" in words_seen:
        legend.add_row(Text("  ?   ="), Text("the source does not say"))
    return Group(*parts, legend, Text(""))


def render_findings(result: ScanResult, console: Console) -> None:
    """The findings, worst first, as doctor prints them (``SEVERITY code: message``, then the fix);
    a command in a fix is never broken or cut (``views.findings``)."""
    from rich.rule import Rule

    console.print(Rule(Text("Findings", style="bold"), align="left"))
    if not result.findings:
        console.print(Text("No findings.", style="green"))
        return
    print_findings(console, result.findings)


def render_topology(topology: Topology, console: Console | None = None) -> None:
    """``render_scan`` of the topology's ``ScanResult`` (made here for callers holding a topology)."""
    from gputopo.analysis.scan_result import scan_result

    render_scan(scan_result(topology), console)


def render_scan(result: ScanResult, console: Console | None = None) -> None:
    """The ``scan`` screen of one ``ScanResult``: what ``--json`` and the report say, for people."""
    console = console or out()
    topology = result.topology
    console.print(_header(topology))
    if not topology.gpus:
        console.print("No GPUs.")
    elif len(topology.gpus) > MAX_LISTED_GPUS:  # an NVL576: kinds of GPUs, layouts of hosts, link summary
        console.print(gpu_summary_table(topology, lambda gpu: gpu_cells(result, gpu)))
        console.print(host_summary_tree(topology))
        console.print(link_summary(result))
        console.print(link_legend(result))
    else:
        table = gpu_table(result)

        def too_wide(table: Table) -> bool:
            return Measurement.get(console, console.options.update_width(10_000), table).maximum > console.width

        if too_wide(table):
            # Too wide with the host names: they are in the tree below, beside each GPU's NUMA node;
            # still too wide, a CPU list takes a line per range (whole, as one line, in the tree).
            hosts = any(g.host for g in topology.gpus)
            table = gpu_table(result, host_column=False)
            if too_wide(table):
                table = gpu_table(result, host_column=False, cpu_lines=True)
            table.caption = "hosts: see the tree below" if hosts else None
            table.caption_justify = "left"
        console.print(table)
        for part in live_state(topology):  # when it was read, and the processes
            console.print(part)
        if any(nvlink_cell(g, result.implied_nvlinks(g)).count(">=") for g in topology.gpus):
            console.print(Text("NVLink >=N: at least N active links, counted from the NV# words of the link "
                               "matrix (the source gives no count)", style="dim"))
        console.print(socket_picture(topology, result.places))
        if len(topology.gpus) > 1:
            if len(topology.gpus) <= MAX_MATRIX_GPUS:
                for table in link_matrices(result, console.width):
                    console.print(table)
                console.print(link_legend(result, speeds=True, colours=console.color_system is not None))
                matrices = p2p_matrices(topology, console.width)
                if matrices is not None:
                    console.print(matrices)
            else:
                console.print(link_summary(result))
                console.print(link_legend(result))
    if topology.tf is not None and importlib.util.find_spec("gputopo.views.tfview") is not None:
        from gputopo.views.tfview import render_tf_view

        render_tf_view(topology, console)
    if topology.nvlinks or topology.nccl is not None or topology.collectives or result.measured:
        from gputopo.views.observed import render_observed

        render_observed(result, console)
    render_findings(result, console)
