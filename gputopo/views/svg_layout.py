"""Where everything goes in the topology drawing: coordinates for the tree of ``svg_tree``.

Only NVLinks are edges (the boxes already show the PCIe paths). Vertical order, one band: [host
title] boxes with the GPU row at their bottom, the edges as arcs under the row, then the NVSwitch
hub if there is one. A row wider than a page (``MAX_ROW_W``) is drawn as two bands facing each
other, the second upside down (GPU row at its top): band 1, its arcs, the edges between the bands
(or the hub), band 2's arcs rising to it, band 2. A two-socket NVLink mesh so shows its shape
(DGX-1: two quads, four cross links straight down). A box at nesting level L starts L label strips
below its band's top and ends L paddings less far below the GPU row, so nested boxes never cross
and every GPU of a band sits on one row; an edge stays between the rows it joins, so it never
passes through a GPU box, and each label has its own place (arcs: at the apex, deeper the more
GPUs spanned; between the bands: rows of labels, each on its edge).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputopo.model import Link, Topology
from gputopo.views.svg_fabric import FABRIC, TreeSource, drawing_roots
from gputopo.views.svg_links import is_edge, link_label
from gputopo.views.svg_tree import (
    CHAR_W,
    COMPACT,
    COMPACT_ABOVE,
    GAP,
    HEAD_H,
    NORMAL,
    PAD,
    Box,
    GpuItem,
    Item,
    NicItem,
    hub_members,
    measure,
)

if TYPE_CHECKING:
    from gputopo.analysis.scan_result import ScanResult

MARGIN = 12
TITLE_H = 30
BAND_GAP = 18
ARC_BASE = 28  # depth of the shallowest arc label below (or above) its GPU row
ARC_STEP = 20  # extra depth per GPU spanned (more than a label's height: labels never overlap)
LABEL_H = 16
LABEL_PAD = 10  # a label's box: its text's width and this
HUB_H = 40
HUB_GAP = 36  # between a band (or the arcs) and the hub: room for the spokes
LEGEND_W = 880
MAX_ROW_W = 1180  # a wider row of boxes is split into two bands (a page at 100% has about this)


@dataclass
class Edge:
    """One NVLink edge: a cubic Bezier from (x1, y1) to (x2, y2) with its controls at (x1, c1y)
    and (x2, c2y) (vertical tangents at both GPU boxes), its label box centred at (lx, ly)."""

    x1: float
    y1: float
    x2: float
    y2: float
    c1y: float
    c2y: float
    lx: float = 0
    ly: float = 0
    label_w: float = 0

    def point(self, t: float) -> tuple[float, float]:
        u = 1 - t
        x = u**3 * self.x1 + 3 * u * u * t * self.x1 + 3 * u * t * t * self.x2 + t**3 * self.x2
        y = u**3 * self.y1 + 3 * u * u * t * self.c1y + 3 * u * t * t * self.c2y + t**3 * self.y2
        return x, y


@dataclass
class Layout:
    width: float
    height: float
    compact: bool
    frame: Box | None  # the single host around everything, when there is one host
    boxes: list[Box]  # every box, outermost first
    gpus: dict[int, GpuItem]
    nics: list[NicItem]
    arc_links: list[Link]  # links drawn as edges: NVLinks not through the hub
    path_links: list[Link]  # the others not through the hub: PCIe paths, shown by the boxes
    hub_members: list[int]
    hub: tuple[float, float, float, float] | None  # x, y, w, h
    edges: dict[tuple[int, int], Edge]  # (a, b) of each of arc_links -> its geometry
    legend_y: float
    missing_pairs: list[tuple[int, int]]  # GPU pairs without any link in the source
    tree: TreeSource = TreeSource("", "", "")  # where the boxes come from: the fabric read, or inferred


def _place(item: Item, x: float, level: int, band: dict, out: dict) -> None:
    """Give ``item`` and everything in it coordinates (the band's GPU row at ``band['gpu_top']``)."""
    sizes = band["sizes"]
    width, _ = measure(item, sizes)
    if isinstance(item, GpuItem):
        item.x, item.y, item.w, item.h = x, band["gpu_top"], sizes["gpu_w"], sizes["gpu_h"]
        out["gpus"][item.index] = item
        return
    if isinstance(item, NicItem):
        item.x, item.w, item.h = x, item.width(sizes), sizes["nic_h"]
        item.y = band["gpu_top"] + (sizes["gpu_h"] - sizes["nic_h"]) / 2
        out["nics"].append(item)
        return
    item.level = level
    item.x, item.w = x, width
    item.y = band["top"] + level * HEAD_H
    item.h = band["gpu_top"] + sizes["gpu_h"] + (band["depth"] - level) * PAD - item.y
    out["boxes"].append(item)
    cursor = x + PAD
    for child in item.children:
        _place(child, cursor, level + 1, band, out)
        cursor += measure(child, sizes)[0] + GAP
    _mark_connectors(item.children)


def _mark_connectors(children: list[Item]) -> None:
    """A NIC right beside one of its nearest GPUs gets a short connector to it (not across SYS)."""
    for pos, item in enumerate(children):
        if not isinstance(item, NicItem) or item.path in (None, "SYS"):
            continue
        left = children[pos - 1] if pos > 0 else None
        right = children[pos + 1] if pos + 1 < len(children) else None
        if isinstance(left, GpuItem) and left.index in item.nearest:
            item.connect_left = left.index
        if isinstance(right, GpuItem) and right.index in item.nearest:
            item.connect_right = right.index


def _place_band(roots: list[Item], x: float, y: float, sizes: dict, flipped: bool) -> tuple[float, float, dict]:
    """Lay one band out from (x, y); returns its width, its height and what it placed."""
    depth = max(measure(r, sizes)[1] for r in roots)
    height = depth * HEAD_H + sizes["gpu_h"] + depth * PAD
    band = {"sizes": sizes, "top": y, "gpu_top": y + depth * HEAD_H, "depth": depth}
    local: dict = {"gpus": {}, "nics": [], "boxes": []}
    cursor = x
    for root in roots:
        _place(root, cursor, 0, band, local)
        cursor += measure(root, sizes)[0] + GAP
    if flipped:  # mirror the band vertically: GPU row on top, box labels at the bottom
        for thing in [*local["gpus"].values(), *local["nics"], *local["boxes"]]:
            thing.y = 2 * y + height - (thing.y + thing.h)
        for box in local["boxes"]:
            box.header_at_bottom = True
    return cursor - GAP - x, height, local


def _shift(local: dict, dy: float) -> None:
    for thing in [*local["gpus"].values(), *local["nics"], *local["boxes"]]:
        thing.y += dy


def _split_in_two(roots: list[Item], sizes: dict) -> list[list[Item]]:
    """Two contiguous bands of about equal width."""
    widths = [measure(r, sizes)[0] for r in roots]
    total, run, cut = sum(widths), 0.0, 1
    for i, w in enumerate(widths[:-1]):
        run += w
        if run >= total / 2:
            cut = i + 1
            break
    return [roots[:cut], roots[cut:]]


def _attach(gpus: dict[int, GpuItem], ends: dict[int, list[tuple[int, float]]]) -> dict[tuple[int, int], float]:
    """Where each edge leaves its GPU box: (gpu, peer) -> x. ``ends[g]``: (peer, peer's x). Edges
    to the left leave nearest first, those to the right farthest first, those to the other band
    between them: arcs on one side nest instead of crossing at the box."""
    out = {}
    for g, peers in ends.items():
        box = gpus[g]
        here = box.x + box.w / 2
        left = sorted((p for p in peers if p[1] < here - box.w / 2), key=lambda p: -p[1])
        right = sorted((p for p in peers if p[1] > here + box.w / 2), key=lambda p: -p[1])
        middle = sorted((p for p in peers if p not in left and p not in right), key=lambda p: p[1])
        ordered = left + middle + right
        inset = min(14.0, box.w / 4)
        for i, (peer, _) in enumerate(ordered):
            out[(g, peer)] = box.x + inset + (box.w - 2 * inset) * (i + 0.5) / len(ordered)
    return out


def _arcs_of_band(links: list[Link], gpus: dict[int, GpuItem], row_y: float, down: bool,
                  attach: dict, widths: dict, edges: dict) -> float:
    """Arcs between GPUs of one row, hanging below it (``down``) or rising above it; returns the
    depth the labels need. A label sits at its arc's apex, deeper the more GPUs the arc spans."""
    rank = {g: i for i, g in enumerate(sorted(gpus, key=lambda g: gpus[g].x))}
    sign = 1 if down else -1
    deepest = 0.0
    for link in links:
        depth = ARC_BASE + (abs(rank[link.a] - rank[link.b]) - 1) * ARC_STEP
        x1, x2 = attach[(link.a, link.b)], attach[(link.b, link.a)]
        ctrl = row_y + sign * depth / 0.75  # a cubic Bezier with both controls at ctrl peaks at 3/4 of it
        edges[(link.a, link.b)] = Edge(x1, row_y, x2, row_y, ctrl, ctrl, (x1 + x2) / 2, row_y + sign * depth,
                                       widths[(link.a, link.b)])
        deepest = max(deepest, depth)
    return deepest + LABEL_H / 2 + 4 if links else 0.0


def _y_at(edge: Edge, y: float) -> float:
    """The parameter t where a (monotonic in y) cross-band edge is at height y (bisection on the
    curve's height alone, ``Edge.point``'s y written out: this runs for every label row tried)."""
    y1, c1, c2, y2 = edge.y1, edge.c1y, edge.c2y, edge.y2
    rising = y1 < y2
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = (lo + hi) / 2
        u = 1 - mid
        at = u * u * u * y1 + 3 * u * u * mid * c1 + 3 * u * mid * mid * c2 + mid * mid * mid * y2
        if (at < y) == rising:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


MAX_LABEL_ROWS_TRIED = 12  # rows a cross edge's label is tried in before it opens its own


def _cross_labels(cross: list[Edge], top: float) -> float:
    """Labels of the edges between the bands, in rows from ``top`` down, each on its edge and
    apart from the others; returns the height of the rows. Each row keeps its labels' spans sorted
    (a label's place is found by bisection, not by a scan of the row), and a label that fits none of
    the first ``MAX_LABEL_ROWS_TRIED`` rows opens a new one: a dense 256-GPU domain's thousands of
    cross edges cost seconds, not minutes (review)."""
    rows: list[list[tuple[float, float]]] = []
    for edge in sorted(cross, key=lambda e: (e.x1 + e.x2) / 2):
        tried = range(len(rows) + 1) if len(rows) < MAX_LABEL_ROWS_TRIED else [*range(MAX_LABEL_ROWS_TRIED), len(rows)]
        for k in tried:
            if k == len(rows):
                rows.append([])
            edge.ly = top + k * ARC_STEP + LABEL_H / 2
            edge.lx = edge.point(_y_at(edge, edge.ly))[0]
            span = (edge.lx - edge.label_w / 2 - 4, edge.lx + edge.label_w / 2 + 4)
            row = rows[k]
            at = bisect.bisect_left(row, span)
            if (at == 0 or row[at - 1][1] <= span[0]) and (at == len(row) or span[1] <= row[at][0]):
                row.insert(at, span)
                break
    return len(rows) * ARC_STEP


def _gpus_in(items: list[Item]) -> set[int]:
    out: set[int] = set()
    for item in items:
        if isinstance(item, GpuItem):
            out.add(item.index)
        elif isinstance(item, Box):
            out |= _gpus_in(item.children)
    return out


def _edge_links(topology: Topology, in_hub: set[int]) -> tuple[list[Link], list[Link]]:
    """The NVLinks not through the hub (drawn as edges) and the other links not through it (PCIe
    paths: not drawn). A 576-GPU domain has 165,600 links: read in whole columns."""
    table = topology.link_table()
    drawn = table.kinds_where(k for k, link in enumerate(table.examples) if is_edge(link))
    outside = list(map(operator.not_, map(operator.and_, map(in_hub.__contains__, table.ends_a),
                                          map(in_hub.__contains__, table.ends_b))))
    edges = list(itertools.compress(topology.links, map(operator.and_, drawn, outside)))
    paths = list(itertools.compress(topology.links, map(operator.and_, map(operator.not_, drawn), outside)))
    return edges, paths


def _halves(box: Box, sizes: dict) -> list[Item]:
    """A box too wide for a page, drawn as two boxes of the same name (its two halves)."""
    halves = _split_in_two(box.children, sizes)
    if len(box.children) < 2 or not halves[1]:
        return [box]
    return [Box(box.kind, f"{box.label} ({k} of 2)", box.detail + f"\n(drawn in two parts: part {k})", half)
            for k, half in enumerate(halves, 1)]


def _bands(roots: list[Item], sizes: dict, members: list[int], arc_links: list[Link], n_gpus: int) -> list[list[Item]]:
    """One band, or two (the second drawn upside down, the edges between them) where one row would
    be wider than a page: the two sockets of a server face each other (DGX-1's two quads, their
    cross links straight between them); a hub's GPUs above and below it (DGX-2's two baseboards).
    One box wider than a page is drawn in two parts."""
    if len(roots) == 1 and isinstance(roots[0], Box) and measure(roots[0], sizes)[0] > MAX_ROW_W:
        roots = _halves(roots[0], sizes)
    if len(roots) < 2:
        return [roots]
    one_row = sum(measure(r, sizes)[0] for r in roots) + GAP * (len(roots) - 1)
    if members:
        return _split_in_two(roots, sizes) if not arc_links and (n_gpus > 8 or one_row > MAX_ROW_W) else [roots]
    return _split_in_two(roots, sizes) if one_row > MAX_ROW_W else [roots]


def legend_notes(scan: ScanResult, layout: Layout) -> list[str]:
    """The legend's lines of notes (under its colours and edge kinds), one a line."""
    if layout.tree.kind == FABRIC:
        notes = ["PCIe paths: the boxes as read (NUMA node › root port › PCIe switch › GPU); hover a GPU for its path to each other GPU"]
        if any(box.hop for box in layout.boxes) or any(g.hop for g in layout.gpus.values()):
            notes.append("x8 of x16 (orange) on a switch or GPU: the PCIe link above it trained below what both its ends can do")
    else:
        notes = ["PCIe paths: the boxes (NUMA node › PCIe switch › GPU); hover a GPU for its path to each other GPU"]
    if any(lk.measured is not None for lk in layout.arc_links):
        notes.append("measured edges: colour = measured / expected (green ok, yellow low, red far below, "
                     "purple above line rate); expected in the tooltip")
    if any(f.gpus for f in scan.faults) \
            or any(lk.health for lk in [*layout.arc_links, *layout.path_links][:20000]):
        notes.append("red ! on a GPU, red dashes on an edge or a PCIe switch: a fault found there (hover for the finding)")
    if layout.hub is not None:
        notes.append("GPUs on the NVSwitch hub reach each other through it")
    table = scan.topology.link_table()  # (counted per kind of link)
    unknown = sum(table.kinds_where(k for k, kind in enumerate(table.kinds) if kind[0] == "UNKNOWN"))
    if unknown:
        notes.append(f"{unknown} links of unknown kind (the source says only whether TF could peer)")
    if layout.missing_pairs:
        notes.append(f"{len(layout.missing_pairs)} GPU pairs have no link in the source")
    return notes


def _second_band(layout: Layout, placed: tuple, levels: int, y: float, row1: float, within: list[Link],
                 cross_links: list[Link], band_of: dict[int, int], attach: dict, widths: dict) -> float:
    """Below ``y``: the edges between the bands (their labels in rows), band 2's arcs rising to it,
    and band 2 itself, upside down; returns the y under it. ``row1``: the bottom of band 1's GPU row."""
    depth2 = _arcs_of_band(within, layout.gpus, 0.0, False, attach, widths, {})
    cross_top = y + (8 if cross_links else 0)
    height = ARC_STEP if cross_links else 0.0
    geometry: dict[tuple[int, int], Edge] = {}
    for _ in range(len(cross_links) + 1):  # (rows of labels as the edges' slopes need: a few tries)
        row2 = cross_top + max(height + depth2 + 12, BAND_GAP + levels * PAD)
        mid = (row1 + row2) / 2
        geometry = {}
        for lk in cross_links:
            top_gpu, low_gpu = (lk.a, lk.b) if band_of[lk.a] == 0 else (lk.b, lk.a)
            x1, x2 = attach[(top_gpu, low_gpu)], attach[(low_gpu, top_gpu)]
            if top_gpu == lk.a:  # (the path is drawn from a to b)
                geometry[(lk.a, lk.b)] = Edge(x1, row1, x2, row2, mid, mid, label_w=widths[(lk.a, lk.b)])
            else:
                geometry[(lk.a, lk.b)] = Edge(x2, row2, x1, row1, mid, mid, label_w=widths[(lk.a, lk.b)])
        # (a compact drawing shows no label: placing 17,000 of them was most of a 256-GPU report's time)
        needed = _cross_labels(list(geometry.values()), cross_top) if geometry and not layout.compact else 0.0
        if needed <= height:
            break
        height = needed
    layout.edges.update(geometry)
    band2_top = row2 - levels * PAD
    _shift(placed[2], band2_top)
    _arcs_of_band(within, layout.gpus, row2, False, attach, widths, layout.edges)
    return band2_top + placed[1] + BAND_GAP


def build_layout(scan: ScanResult) -> Layout:
    """Every coordinate of the drawing of ``scan``'s topology."""
    topology = scan.topology
    compact = len(topology.gpus) > COMPACT_ABOVE
    sizes = COMPACT if compact else NORMAL
    frame, roots, tree = drawing_roots(topology, compact)
    members = hub_members(topology)
    arc_links, path_links = _edge_links(topology, set(members))
    bands = [b for b in _bands(roots, sizes, members, arc_links, len(topology.gpus)) if b]
    x = MARGIN + (PAD if frame else 0)
    y = TITLE_H + (HEAD_H + 4 if frame else 0)
    placed = [_place_band(band, x, 0, sizes, flipped=i == 1) for i, band in enumerate(bands)]
    layout = Layout(0, 0, compact, frame, [], {}, [], arc_links, path_links, members, None, {}, 0, [], tree)
    for _, _, local in placed:
        layout.gpus.update(local["gpus"])
        layout.nics.extend(local["nics"])
        layout.boxes.extend(local["boxes"])
    right = max([x] + [x + w for w, _, _ in placed])
    widths = {(lk.a, lk.b): len(link_label(scan, lk)) * CHAR_W + LABEL_PAD for lk in arc_links} if not compact else {}
    widths = widths or {(lk.a, lk.b): 0.0 for lk in arc_links}
    band_of = {g: i for i, (_, _, local) in enumerate(placed) for g in local["gpus"]}
    ends: dict[int, list[tuple[int, float]]] = {}
    for lk in arc_links:
        ga, gb = layout.gpus[lk.a], layout.gpus[lk.b]
        ends.setdefault(lk.a, []).append((lk.b, gb.x + gb.w / 2))
        ends.setdefault(lk.b, []).append((lk.a, ga.x + ga.w / 2))
    attach = _attach(layout.gpus, ends)
    # Band 1 at its place, its arcs under it; then the edges between the bands, band 2's arcs and band 2.
    _shift(placed[0][2], y)
    row1 = y + placed[0][1] - max(measure(r, sizes)[1] for r in bands[0]) * PAD
    y += placed[0][1]
    within = [[lk for lk in arc_links if band_of[lk.a] == band_of[lk.b] == i] for i in range(len(bands))]
    y += _arcs_of_band(within[0], layout.gpus, row1, True, attach, widths, layout.edges) if len(topology.gpus) > 1 else 0
    hub_y = None
    if members:
        hub_y = y + HUB_GAP
        y = hub_y + HUB_H + (HUB_GAP if len(bands) > 1 else BAND_GAP)
    if len(bands) > 1:
        cross_links = [lk for lk in arc_links if band_of[lk.a] != band_of[lk.b]]
        levels2 = max(measure(r, sizes)[1] for r in bands[1])
        y = _second_band(layout, placed[1], levels2, y, row1, within[1], cross_links, band_of, attach, widths)
    elif not members:
        y += BAND_GAP
    if hub_y is not None:
        xs = [layout.gpus[g].x for g in members] + [layout.gpus[g].x + layout.gpus[g].w for g in members]
        layout.hub = (min(xs) - 6, hub_y, max(xs) - min(xs) + 12, HUB_H)
        right = max(right, min(xs) - 6 + max(xs) - min(xs) + 12)
    if frame is not None:
        frame.x, frame.y, frame.w, frame.h = MARGIN, TITLE_H, right + PAD - MARGIN, y - TITLE_H
        layout.boxes.insert(0, frame)
        y += PAD
        right += PAD
    layout.missing_pairs = scan.unknowns.missing_pairs
    layout.legend_y = y + 10
    layout.width = max(right + MARGIN, LEGEND_W)
    layout.height = layout.legend_y + 8 + 22 + 22 + 18 * len(legend_notes(scan, layout)) + 4  # (svg_hub.legend)

    return layout
