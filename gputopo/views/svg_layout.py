"""Where everything goes in the topology drawing: coordinates for the tree of ``svg_tree``.

Vertical order, one band: [host title] boxes with the GPU row at their bottom, the arcs under the
row (one per GPU pair not joined through the hub), then the NVSwitch hub if there is one. With two
bands (hub only, more than 8 GPUs): band, hub, band drawn upside down (GPU row at its top).
A box at nesting level L starts L label strips below its band's top and ends L paddings less far
below the GPU row, so nested boxes never cross and every GPU of a band sits on one row.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass

from gputopo.model import Link, Topology
from gputopo.views.svg_tree import (
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
    build_roots,
    hub_members,
    measure,
)

MARGIN = 12
TITLE_H = 30
BAND_GAP = 18
ARC_BASE = 26  # depth of the shallowest arc label below the GPU row
ARC_STEP = 18  # extra depth per GPU spanned (more than a label's height: labels never overlap)
LABEL_H = 14
HUB_H = 40
HUB_GAP = 36  # between a band (or the arcs) and the hub: room for the spokes
LEGEND_W = 880


@dataclass
class Layout:
    width: float
    height: float
    compact: bool
    frame: Box | None  # the single host around everything, when there is one host
    boxes: list[Box]  # every box, outermost first
    gpus: dict[int, GpuItem]
    nics: list[NicItem]
    arc_links: list[Link]  # links drawn as arcs (not through the hub)
    hub_members: list[int]
    hub: tuple[float, float, float, float] | None  # x, y, w, h
    gpu_row_bottom: float  # where arcs start (single band)
    arc_label_y: dict[tuple[int, int], float]  # (a, b) -> y of the arc's apex (its label's centre)
    attach: dict[tuple[int, int], float]  # (gpu, peer) -> x where the arc to peer leaves the GPU box
    legend_y: float
    missing_pairs: list[tuple[int, int]]  # GPU pairs without any link in the source


def _place(item: Item, x: float, level: int, band: dict, out: dict) -> None:
    """Give ``item`` and everything in it coordinates (the band's GPU row at ``band['gpu_top']``)."""
    sizes = band["sizes"]
    width, _ = measure(item, sizes)
    if isinstance(item, GpuItem):
        item.x, item.y, item.w, item.h = x, band["gpu_top"], sizes["gpu_w"], sizes["gpu_h"]
        out["gpus"][item.index] = item
        return
    if isinstance(item, NicItem):
        item.x, item.w, item.h = x, sizes["nic_w"], sizes["nic_h"]
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


def _place_band(roots: list[Item], x: float, y: float, sizes: dict, flipped: bool, out: dict) -> tuple[float, float]:
    """Lay one band out from (x, y); returns its width and height."""
    depth = max(measure(r, sizes)[1] for r in roots)
    height = depth * HEAD_H + sizes["gpu_h"] + depth * PAD
    band = {"sizes": sizes, "top": y, "gpu_top": y + depth * HEAD_H, "depth": depth}
    local = {"gpus": {}, "nics": [], "boxes": []}
    cursor = x
    for root in roots:
        _place(root, cursor, 0, band, local)
        cursor += measure(root, sizes)[0] + GAP
    if flipped:  # mirror the band vertically: GPU row on top, box labels at the bottom
        for thing in [*local["gpus"].values(), *local["nics"], *local["boxes"]]:
            thing.y = 2 * y + height - (thing.y + thing.h)
        for box in local["boxes"]:
            box.header_at_bottom = True
    out["gpus"].update(local["gpus"])
    out["nics"].extend(local["nics"])
    out["boxes"].extend(local["boxes"])
    return cursor - GAP - x, height


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


def _arcs(layout: Layout) -> float:
    """Label depth and attach points of every arc; returns the depth of the deepest label."""
    order = sorted(layout.gpus, key=lambda g: layout.gpus[g].x)
    rank = {g: i for i, g in enumerate(order)}
    deepest = 0.0
    partners: dict[int, list[int]] = {g: [] for g in order}
    for link in layout.arc_links:
        span = abs(rank[link.a] - rank[link.b])
        depth = ARC_BASE + (span - 1) * ARC_STEP
        layout.arc_label_y[(link.a, link.b)] = layout.gpu_row_bottom + depth
        deepest = max(deepest, depth)
        partners[link.a].append(link.b)
        partners[link.b].append(link.a)
    for g, peers in partners.items():
        left = sorted((p for p in peers if rank[p] < rank[g]), key=lambda p: -rank[p])  # nearest first
        right = sorted((p for p in peers if rank[p] > rank[g]), key=lambda p: rank[p], reverse=True)
        ordered = left + right
        box = layout.gpus[g]
        inset = min(12.0, box.w / 4)
        for i, p in enumerate(ordered):
            layout.attach[(g, p)] = box.x + inset + (box.w - 2 * inset) * (i + 0.5) / len(ordered)
    return deepest


def missing_pairs(topology: Topology) -> list[tuple[int, int]]:
    """The pairs of GPUs without a link in the source (none, found in whole columns, where every
    pair has one)."""
    if topology.link_table().covers_every_pair(topology.gpu_indices):
        return []
    links = topology.link_map()
    return [p for p in topology.pairs() if p not in links]


def build_layout(topology: Topology) -> Layout:
    """Every coordinate of the drawing of ``topology``."""
    compact = len(topology.gpus) > COMPACT_ABOVE
    sizes = COMPACT if compact else NORMAL
    frame, roots = build_roots(topology, compact)
    members = hub_members(topology)
    in_hub = set(members)
    table = topology.link_table()  # (a 576-GPU domain: 165,600 links: in whole columns)
    arc_links = list(itertools.compress(topology.links, map(operator.not_, map(
        operator.and_, map(in_hub.__contains__, table.ends_a), map(in_hub.__contains__, table.ends_b)))))
    two_bands = bool(members) and not arc_links and len(topology.gpus) > 8 and len(roots) >= 2
    bands = _split_in_two(roots, sizes) if two_bands else [roots]
    out: dict = {"gpus": {}, "nics": [], "boxes": []}
    x = MARGIN + (PAD if frame else 0)
    y = TITLE_H + (HEAD_H + 4 if frame else 0)
    right = x
    layout = Layout(0, 0, compact, frame, [], {}, [], arc_links, members, None, 0, {}, {}, 0, [])
    hub_y = None
    for i, band in enumerate(bands):
        if not band:
            continue
        width, height = _place_band(band, x, y, sizes, flipped=i == 1, out=out)
        right = max(right, x + width)
        y += height
        if i == 0:
            layout.gpu_row_bottom = y - max(measure(r, sizes)[1] for r in band) * PAD
            layout.gpus = out["gpus"]
            if arc_links and len(topology.gpus) > 1:
                y += _arcs(layout) + LABEL_H
            if members:
                hub_y = y + HUB_GAP
                y = hub_y + HUB_H + (HUB_GAP if len(bands) > 1 else BAND_GAP)
            else:
                y += BAND_GAP
    layout.gpus, layout.nics, layout.boxes = out["gpus"], out["nics"], out["boxes"]
    if hub_y is not None:
        xs = [layout.gpus[g].x for g in members] + [layout.gpus[g].x + layout.gpus[g].w for g in members]
        layout.hub = (min(xs) - 6, hub_y, max(xs) - min(xs) + 12, HUB_H)
        right = max(right, min(xs) - 6 + max(xs) - min(xs) + 12)
    if frame is not None:
        frame.x, frame.y, frame.w, frame.h = MARGIN, TITLE_H, right + PAD - MARGIN, y - TITLE_H
        layout.boxes.insert(0, frame)
        y += PAD
        right += PAD
    layout.missing_pairs = missing_pairs(topology)
    layout.legend_y = y + 10
    layout.width = max(right + MARGIN, LEGEND_W)
    layout.height = layout.legend_y + 74
    return layout
