"""The report's heatmaps: GPU x GPU HTML tables with inline colours (no script needed).

Cells carry ``data-a``/``data-b`` (never ``data-gpu``/``data-link``, which belong to the drawing
alone, so counting those attributes in the page counts the drawing). Large uniform topologies
(a GB200 NVL72 rack: 2556 identical pairs) get one sentence instead of a 72 x 72 table.
"""

from __future__ import annotations

import itertools
import operator
from typing import TYPE_CHECKING, Callable

from gputopo.model import P2P_OK, P2P_STATUS_MEANING, Link, Topology
from gputopo.notation import format_gbps
from gputopo.views.svg_links import UNKNOWN_HEX, VERDICT_HEX, VERDICT_WORDS, esc, link_figures, speed_hex

if TYPE_CHECKING:
    from gputopo.analysis.scan_result import ScanResult

MAX_TABLE_GPUS = 32  # beyond this, a uniform matrix is summarised in one sentence
# Beyond this no matrix is written (a 4,096-GPU snapshot: 16.7 million cells per table, gigabytes of
# page); a GB200 NVL72 rack (72) and a 128-GPU table still are.
MAX_HEATMAP_GPUS = 128
Cell = tuple[str, str, str]  # (text, background colour, tooltip)


def _tint(hex_colour: str) -> str:
    """A light version of a colour, as a cell background that keeps black text readable."""
    r, g, b = (int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))
    return "#{:02x}{:02x}{:02x}".format(*(round(c + (255 - c) * 0.55) for c in (r, g, b)))


def matrix(topology: Topology, name: str, caption: str, cell: Callable[[int, int, Link], Cell | None]) -> str:
    """One heatmap: row GPU a, column GPU b; ``cell`` gives (text, colour, tooltip) or None (blank)."""
    indices = topology.gpu_indices
    links = topology.link_map()
    rows = [f'<table class="heat" data-heatmap="{esc(name)}"><caption>{esc(caption)}</caption>']
    rows.append("<tr><th></th>" + "".join(f"<th>{g}</th>" for g in indices) + "</tr>")
    for a in indices:
        cells = [f"<th>{a}</th>"]
        for b in indices:
            link = links.get((a, b))
            if a == b:
                cells.append('<td class="self">X</td>')
                continue
            value = cell(a, b, link) if link is not None else ("?", "#eeeeee", "no link in the source")
            if value is None:
                cells.append('<td class="blank"></td>')
                continue
            text, colour, tip = value
            cells.append(
                f'<td data-a="{a}" data-b="{b}" style="background:{_tint(colour)}" title="{esc(tip)}">{esc(text)}</td>'
            )
        rows.append("<tr>" + "".join(cells) + "</tr>")
    rows.append("</table>")
    return "".join(rows)


def _kind_cell(scan: ScanResult) -> Callable[[int, int, Link], Cell]:
    def cell(a: int, b: int, link: Link) -> Cell:
        expected, _, why = link_figures(scan, link)
        word = "?" if link.type == "UNKNOWN" else link.type
        tip = f"GPU {a} - GPU {b}: {link.type}, expected ~{format_gbps(expected)} GB/s per direction ({why})"
        return word, speed_hex(expected) if link.type != "UNKNOWN" else UNKNOWN_HEX, tip

    return cell


def _p2p_cell(a: int, b: int, link: Link) -> Cell:
    read, write = link.p2p_read, link.p2p_write
    if read is None and write is None:
        return "?", UNKNOWN_HEX, "the source does not say whether these GPUs can peer"
    text = read if read == write else f"{read or '?'}/{write or '?'}"
    words = {w for w in (read, write) if w}
    meaning = "; ".join(f"{w}: {P2P_STATUS_MEANING.get(w, w)}" for w in sorted(words))
    colour = "#4caf50" if words == {P2P_OK} else "#d93025"
    return text, colour, f"GPU {a} - GPU {b} P2P read {read or '?'}, write {write or '?'} ({meaning})"


def _measured(link: Link):
    m = link.measured
    return m if m is not None and m.device_kind == "GPU" else None


def _one_way_cell(a: int, b: int, link: Link) -> Cell | None:
    m = _measured(link)
    if m is None:
        return None
    value = m.a_to_b_gbps if a == link.a else m.b_to_a_gbps
    if value is None:
        return None
    return format_gbps(value), speed_hex(value), f"GPU {a} -> GPU {b}: measured {value:.1f} GB/s"


def _both_ways_cell(a: int, b: int, link: Link) -> Cell | None:
    m = _measured(link)
    if m is None or m.bidirectional_gbps is None:
        return None
    value = m.bidirectional_gbps
    return format_gbps(value), speed_hex(value / 2), f"GPU {a} <-> GPU {b}: {value:.1f} GB/s both directions together"


_VERDICT_HEX, _VERDICT_WORDS = VERDICT_HEX, VERDICT_WORDS  # (shared with the drawing's measured edges)


def _ratio_cell(result: ScanResult) -> Callable[[int, int, Link], Cell | None]:
    """Each measured direction as the scan result judged it (``ScanResult.compared``: the one rule of
    ``analysis.expect.measured``); the share is ``?`` where the expectation rests on an assumption, as on
    the scan screen."""
    def cell(a: int, b: int, link: Link) -> Cell | None:
        c = result.comparison(a, b)
        if c is None:
            return None
        judged = c.verdict
        share = "?" if c.assumption else f"{c.ratio:.0%}"
        assumed = f"; assumes {c.assumption}" if c.assumption else ""
        return (share, _VERDICT_HEX[judged], f"GPU {a} -> GPU {b}: measured {c.measured_gbps:.1f} of ~{c.expected_gbps:.1f} "
                f"GB/s expected ({c.expected_explanation}{assumed}){_VERDICT_WORDS[judged]}")

    return cell


def _uniform_kind(topology: Topology) -> tuple[str, bool | None] | None:
    """(link word, whether the GPUs can peer) where every pair says the same, else None (once per
    kind of link: a 576-GPU domain has 165,600 links)."""
    table = topology.link_table()
    values = {(table.kinds[k][0], table.examples[k].can_peer) for k in set(table.kind_of)}
    complete = len(topology.links) == len(topology.gpus) * (len(topology.gpus) - 1) // 2
    return next(iter(values)) if len(values) == 1 and complete else None


def heatmaps(result: ScanResult) -> str:
    """Every heatmap the scan result's topology supports, as HTML."""
    topology = result.topology
    if len(topology.gpus) < 2:
        return "<p>One GPU: no pairs to show.</p>"
    parts: list[str] = []
    big = len(topology.gpus) > MAX_TABLE_GPUS
    same_kind = _uniform_kind(topology) if big else None
    if same_kind is not None:
        word, peer = same_kind  # type: ignore[misc]
        peer_text = {True: "ok", False: "not possible", None: "not known"}[peer]
        n = len(topology.gpus)
        parts.append(
            f'<p class="summary">All {len(topology.links)} GPU pairs: {esc(word)}, P2P {peer_text} '
            f"(a {n} x {n} table would show one colour).</p>"
        )
    elif len(topology.gpus) > MAX_HEATMAP_GPUS:
        n = len(topology.gpus)
        parts.append(f'<p class="summary">{n} GPUs: too many for a {n} x {n} table; each pair\'s link is in the '
                     "snapshot below and in <code>gputopo scan --json</code>.</p>")
    else:
        parts.append(matrix(topology, "kind", "Link kind (colour: expected GB/s per direction)", _kind_cell(result)))
        if topology.source != "tf-log":  # TF reports peer access, not read/write capability
            parts.append(matrix(topology, "p2p", "P2P read/write status (nvidia-smi topo -p2p words)", _p2p_cell))
    if len(topology.gpus) > MAX_HEATMAP_GPUS:  # (nor a table per measurement)
        return '<div class="heatmaps">' + "".join(parts) + "</div>"
    measured = list(itertools.compress(topology.links, map(operator.attrgetter("measured"), topology.links)))
    if any(_measured(lk) for lk in measured):
        parts.append(matrix(topology, "measured-one-way", "Measured GB/s, row GPU -> column GPU", _one_way_cell))
        parts.append(matrix(topology, "measured-both-ways", "Measured GB/s both ways at once", _both_ways_cell))
        parts.append(matrix(topology, "measured-vs-expected", "Measured / expected, row -> column", _ratio_cell(result)))
    elif measured:
        parts.append("<p>The measurements in this snapshot were taken on logical CPU devices (host memory), not GPUs.</p>")
    else:
        parts.append('<p class="muted">No measurements: add <code>--bench SNAPSHOT</code> (saved by '
                     "<code>gputopo bench-p2p --save FILE</code>) to see measured bandwidth.</p>")
    return '<div class="heatmaps">' + "".join(parts) + "</div>"
