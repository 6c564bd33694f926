"""`gputopo report`: one self-contained HTML page about the box.

The page holds the drawing (inline SVG from ``views.svg``), the plan for ``--gpus K`` (best group
highlighted, paste-ready lines), the findings, what the source did not say, the heatmaps, a GPU
table, and the snapshot itself (``sources.snapshot.report_snapshot_script``), which
``gputopo scan --from page.html`` reads back. No network: inline CSS, a few lines of inline script
for hover highlighting, nothing fetched. The page is also well-formed XML (every element closed,
no ``<`` or ``&`` in the style or script), so tests can parse it with ``xml.etree``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.model import Topology
from gputopo.notation import format_gbps, pair_list
from gputopo.sources.snapshot import report_snapshot_script
from gputopo.views.report_tables import heatmaps
from gputopo.views.svg import render_svg
from gputopo.views.svg_links import esc
from gputopo.views.vocabulary import severity_word

if TYPE_CHECKING:
    from gputopo.analysis.recommend import Recommendation
    from gputopo.analysis.scan_result import ScanResult
    from gputopo.sources.tools.watch_lines import WatchLines

CSS = """
body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;color:#1f2328;margin:20px 28px;background:#fff}
h1{font-size:21px;margin:0 0 4px}
h2{font-size:17px;margin:26px 0 8px;border-bottom:1px solid #d0d7de;padding-bottom:3px}
.meta,.muted,.hint{color:#57606a}
.drawing{overflow-x:auto}
.drawing svg{display:block}
pre{background:#f6f8fa;border:1px solid #d0d7de;border-radius:6px;padding:10px 12px;overflow-x:auto;font-size:13px}
code{font-size:13px}
#plan pre{white-space:pre-wrap;overflow-wrap:anywhere}
table.heat{border-collapse:collapse;margin:6px 22px 14px 0;display:inline-table;vertical-align:top;font-size:12px}
table.heat caption{text-align:left;font-weight:600;padding-bottom:4px}
table.heat td,table.heat th{border:1px solid #ffffff;padding:2px 5px;text-align:center;min-width:26px}
table.heat th{color:#57606a;font-weight:600}
table.heat td.self{color:#8c959f;background:#f6f8fa}
table.gpus{border-collapse:collapse;font-size:13px}
table.gpus td,table.gpus th{border-bottom:1px solid #d0d7de;padding:3px 10px;text-align:left}
.sev{display:inline-block;min-width:62px;font-weight:600}
.sev-error{color:#cf222e}.sev-warning{color:#9a6700}.sev-info{color:#0969da}
li{margin:3px 0}
"""
# Hover a GPU: its edges, its peers and its spoke stay bright, the rest fades, and each other GPU's
# box says the path to the hovered one (link word, expected or measured GB/s: PCIe paths are not
# drawn as lines). No '<' or '&' here.
SCRIPT = """
(function () {
  var svg = document.querySelector('svg.topology');
  if (!svg) { return; }
  function all(sel) { return Array.prototype.slice.call(svg.querySelectorAll(sel)); }
  function via(g) { return svg.querySelector('[data-gpu="' + g + '"] .via'); }
  function clear() {
    svg.classList.remove('focus');
    all('.hl').forEach(function (el) { el.classList.remove('hl'); });
    all('.via').forEach(function (el) { el.textContent = ''; });
  }
  function focus(g) {
    clear();
    svg.classList.add('focus');
    var peers = {}; peers[g] = true;
    all('[data-link]').forEach(function (el) {
      var p = el.getAttribute('data-link').split('-');
      if (p[0] !== g) { if (p[1] !== g) { return; } }
      el.classList.add('hl'); peers[p[0]] = true; peers[p[1]] = true;
      var text = via(p[0] === g ? p[1] : p[0]);
      if (text) {
        text.textContent = 'GPU ' + g + ': ' + el.getAttribute('data-label');
        text.style.fill = el.getAttribute('data-colour');
      }
    });
    all('[data-of]').forEach(function (el) {
      var p = el.getAttribute('data-of').split('-');
      if (p[0] === g || p[1] === g) { el.classList.add('hl'); }
    });
    all('[data-gpu]').forEach(function (el) { if (peers[el.getAttribute('data-gpu')]) { el.classList.add('hl'); } });
    all('[data-spoke]').forEach(function (el) { if (peers[el.getAttribute('data-spoke')]) { el.classList.add('hl'); } });
  }
  all('[data-gpu]').forEach(function (el) {
    el.addEventListener('mouseenter', function () { focus(el.getAttribute('data-gpu')); });
    el.addEventListener('mouseleave', clear);
  });
})();
"""


def _title(topology: Topology) -> str:
    return topology.label or f"{topology.source} {topology.source_detail or ''}".strip()


def _meta(topology: Topology) -> str:
    from gputopo import __version__

    facts = [
        f"source: {topology.source}" + (f" ({topology.source_detail})" if topology.source_detail else ""),
        f"{len(topology.gpus)} GPUs, {len(topology.links)} GPU pairs with a known link, {len(topology.nics)} NICs",
    ]
    if topology.host:
        facts.append(f"host {topology.host}")
    if topology.driver_version:
        facts.append(f"driver {topology.driver_version}")
    facts.append(f"written by gputopo {__version__}")
    return " · ".join(esc(f) for f in facts)


def _plan(recommendation: Recommendation | None) -> str:
    if recommendation is None:
        return (
            '<p class="muted">Add <code>--gpus K</code> to get the best group of K GPUs highlighted in the drawing, '
            "with the lines to paste.</p>"
        )
    from gputopo.views.recommend import (
        launch_lines,
        placement,
        ring_summary,
        strategy_line,
    )

    best = recommendation.best
    lines = launch_lines(best) + [strategy_line(best)]
    if best.cross_device_ops_reason:
        lines.append(f"# {best.cross_device_ops or best.strategy}: {best.cross_device_ops_reason}")
    parts = [
        f"<p><b>Best {recommendation.gpus_per_group} GPUs: {esc(','.join(map(str, best.gpus)))}</b> "
        f"(outlined in blue in the drawing) — {esc(ring_summary(best))}; {esc(placement(best))}.</p>",
        f"<p>Why: {esc(best.reason)}.</p>",
        f'<pre id="plan-lines">{esc(chr(10).join(lines))}</pre>',
    ]
    if len(recommendation.groups) > 1:
        rows = "".join(
            f"<tr><td>{g.rank}</td><td>{esc(','.join(map(str, g.gpus)))}</td><td>{esc(ring_summary(g))}</td>"
            f"<td>{'-' if g.allreduce_gbps is None else format_gbps(g.allreduce_gbps)}</td></tr>"
            for g in recommendation.groups
        )
        parts.append(
            '<table class="gpus"><tr><th>#</th><th>GPUs</th><th>ring</th><th>all-reduce GB/s</th></tr>' + rows + "</table>"
        )
    parts += [f'<p class="muted">{esc(note)}</p>' for note in recommendation.notes]
    return "".join(parts)


def _findings(result: ScanResult) -> str:
    """The findings as the scan result ranks them (``ScanResult.ranked_findings``: worst first, each
    with its kind)."""
    if not result.findings:
        return '<p class="muted">No findings.</p>'
    items = []
    for f, kind in result.ranked_findings:  # errors, warnings, infos; faults before design facts before notes
        fix = f"<br/><span class=\"muted\">Fix: {esc(f.fix)}</span>" if f.fix else ""
        items.append(f'<li data-kind="{esc(kind)}"><span class="sev sev-{esc(f.severity)}">{esc(severity_word(f.severity))}</span> '
                     f'<code>{esc(f.code)}</code> {esc(f.message)}{fix}</li>')
    return "<ul>" + "".join(items) + "</ul>"


def unknowns(result: ScanResult) -> list[str]:
    """What the source did not say (``ScanResult.unknowns``), in sentences (the page says it rather
    than guessing silently)."""
    said = result.unknowns
    notes = []
    if said.missing_pairs:
        notes.append(f"No link is known between GPUs {pair_list(said.missing_pairs)}: those pairs are not drawn.")
    if said.unknown_link_pairs:
        notes.append(f"The kind of link between GPUs {pair_list(said.unknown_link_pairs)} is not known (drawn dotted grey).")
    if said.unplaced_gpus:
        notes.append(f"NUMA node and CPU affinity are not known for GPU {','.join(map(str, said.unplaced_gpus))} "
                     "(the 'placement unknown' box).")
    if said.p2p_not_in_source:
        # (only topo -m's reader is nvidia-smi text: a p2pBandwidthLatencyTest or NCCL log is not "topo -m")
        notes.append("P2P support is not in the source (nvidia-smi topo -m alone does not say it; topo -p2p does)."
                     if result.topology.source == "nvidia-smi" else
                     "P2P support is not in the source (`nvidia-smi topo -p2p r` says it).")
    from gputopo.views.unknowns import assumption_notes

    return notes + assumption_notes(result)


def _gpu_table(result: ScanResult) -> str:
    """A row per GPU: its facts, and its place as the scan result gives it (bus id, NUMA node, CPUs,
    host; the NICs nearest it where the source shows any)."""
    topology = result.topology
    hosts = any(p.host for p in result.places)
    nics = any(p.nic_path for p in result.places)
    head = ("<tr><th>GPU</th><th>name</th><th>bus id</th><th>memory</th><th>NUMA</th><th>CPUs</th><th>PCIe</th><th>NVLink</th>"
            + ("<th>nearest NIC</th>" if nics else "") + ("<th>host</th>" if hosts else "") + "</tr>")
    from gputopo.views.unknowns import nvlink_cell

    rows = []
    for g, place in zip(topology.gpus, result.places):
        # Unknown is "?" (with why on hover), never an empty cell that reads as "none".
        memory = f"{g.memory_total_bytes / 2**30:.0f} GiB" if g.memory_total_bytes else None
        pcie = f"Gen{g.pcie_gen_current or '?'}/{g.pcie_gen_max or '?'} x{g.pcie_width_current or '?'}" if g.pcie_gen_max or g.pcie_gen_current else None
        nvlink = nvlink_cell(g, result.implied_nvlinks(g))
        cells = [g.index, g.name, place.pci_bus_id, memory, place.numa_node, place.cpu_affinity, pcie, nvlink]
        if nics:
            cells.append(f"{', '.join(place.nearest_nics)} ({place.nic_path})" if place.nic_path else None)
        if hosts:
            cells.append(place.host)
        rows.append("<tr>" + "".join(
            '<td title="not in the source">?</td>' if c is None else f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    return f'<table class="gpus">{head}{"".join(rows)}</table>'


def render_report(topology: Topology, recommendation: Recommendation | None = None,
                  watch: WatchLines | None = None, scan: ScanResult | None = None) -> str:
    """The whole page as one string; with ``watch`` (``report --watch``) the recorded link traffic
    beside the plan (``views.report_watch``). ``scan``: the topology's ``ScanResult``, whose
    findings, measured-vs-expected verdicts and unknowns the page shows as ``scan`` does (made here
    where the caller holds only the topology)."""
    if scan is None:
        from gputopo.analysis.scan_result import scan_result

        scan = scan_result(topology)
    best = recommendation.best.gpus if recommendation is not None else []
    svg = render_svg(topology, best=best, standalone=False, scan=scan)
    notes = unknowns(scan)
    unknown_html = "<ul>" + "".join(f"<li>{esc(n)}</li>" for n in notes) + "</ul>" if notes else '<p class="muted">Nothing: every pair has a known link.</p>'
    title = _title(topology)
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en"><head><meta charset="utf-8"/>',
            '<meta name="viewport" content="width=device-width, initial-scale=1"/>',
            f"<title>gputopo report: {esc(title)}</title><style>{CSS}</style></head><body>",
            f'<header><h1>{esc(title)}</h1><p class="meta">{_meta(topology)}</p></header>',
            f'<section id="drawing"><h2>The box</h2><div class="drawing">{svg}</div>',
            '<p class="hint">Hover a GPU to see its NVLinks and, in every other GPU, the path to it; hover a link, box or NIC for details.</p></section>',
            f'<section id="plan"><h2>Plan</h2>{_plan(recommendation)}</section>',
            _watch(watch, best),
            f'<section id="findings"><h2>Findings</h2>{_findings(scan)}</section>',
            f'<section id="unknown"><h2>Not known</h2>{unknown_html}</section>',
            f'<section id="heatmaps"><h2>Heatmaps</h2>{heatmaps(scan)}</section>',
            f'<section id="gpus"><h2>GPUs</h2>{_gpu_table(scan)}</section>',
            '<section id="snapshot"><h2>Snapshot</h2><p>This page carries the whole topology snapshot: '
            "<code>gputopo scan --from this-page.html</code> (or <code>recommend --from</code>) reads it back.</p></section>",
            report_snapshot_script(topology),
            f"<script>{SCRIPT}</script>",
            "</body></html>",
            "",
        ]
    )


def _watch(watch: WatchLines | None, best: list[int]) -> str:
    if watch is None:
        return ""
    from gputopo.views.report_watch import watch_section

    return f'<section id="watch"><h2>Link traffic</h2>{watch_section(watch, best)}</section>'


def report_summary(path: str, topology: Topology) -> dict[str, object]:
    """What ``report --json`` prints."""
    return {"schema": "gputopo.report/1", "output": path, "gpus": len(topology.gpus), "links": len(topology.links)}

