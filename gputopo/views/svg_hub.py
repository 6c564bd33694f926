"""The NVSwitch hub (one node, one spoke per GPU, an empty ``data-link`` element per pair through
it) and the legend of the topology drawing."""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from gputopo.model import Link
from gputopo.notation import format_gbps
from gputopo.views.svg_layout import Layout, legend_notes
from gputopo.views.svg_links import (
    SPEED_HEX,
    UNKNOWN_HEX,
    esc,
    link_figures,
    link_tooltip,
    peer_word,
    speed_hex,
)
from gputopo.views.svg_tree import fit
from gputopo.views.topology import SPEED_STYLES

if TYPE_CHECKING:
    from gputopo.analysis.expect.bandwidth import Estimate
    from gputopo.analysis.scan_result import ScanResult

# Above this many pairs through the hub (a 576-GPU domain has 165,600) the drawing holds an element
# only for the pairs unlike the others (another word or figure, measured, no P2P); the hub's
# tooltip says what every other pair is. A GB200 NVL72 rack (2,556 pairs) keeps every pair.
MAX_HUB_PAIR_ELEMENTS = 5000


@dataclass
class _HubPairs:
    """The links between two GPUs of the hub, in link order, with what the drawing says of each:
    read in whole columns (a 576-GPU domain has 165,600 of them and a handful of classes)."""

    links: list[Link]
    classes: list[int]  # each link's class: its kind and its estimate say what it is drawn as
    kind: dict[int, int]  # class -> its kind of link (``Topology.link_table``)
    expected: dict[int, Estimate]  # class -> its estimate (``ScanResult.expected_column``)
    measured: dict[int, float]  # position in ``links`` -> measured GB/s, where measured

    @classmethod
    def of(cls, scan: ScanResult, members: set[int]) -> _HubPairs:
        topology = scan.topology
        table = topology.link_table()
        inside = list(map(operator.and_, map(members.__contains__, table.ends_a), map(members.__contains__, table.ends_b)))
        links = list(itertools.compress(topology.links, inside))
        measured = {}
        for k in itertools.compress(range(len(links)), map(operator.attrgetter("measured"), links)):
            value = scan.measured_gbps(links[k])
            if value is not None:
                measured[k] = value
        kinds, estimates = list(itertools.compress(table.kind_of, inside)), list(itertools.compress(scan.expected_column, inside))
        codes = scan.class_column
        if codes is not None:  # the class of pair names both (an integer each: counted in C)
            classes = list(itertools.compress(codes, inside))
        else:  # (links to GPUs the list lacks: one class per kind and estimate)
            numbers: dict[Any, int] = {}
            classes = [numbers.setdefault((kind, id(estimate)), len(numbers)) for kind, estimate in zip(kinds, estimates)]
        first = dict(zip(reversed(classes), range(len(classes) - 1, -1, -1)))
        return cls(links, classes, {c: kinds[k] for c, k in first.items()}, {c: estimates[k] for c, k in first.items()}, measured)

    def most_common(self, value: Callable[[int, Estimate], Any]) -> Any:
        """The most common ``value(kind, estimate)`` over the links (ties: the first link's), counted
        once per class."""
        counts: Counter[Any] = Counter()
        for code, n in Counter(self.classes).items():  # (in order of first link)
            counts[value(self.kind[code], self.expected[code])] += n
        return counts.most_common(1)[0][0]


def hub_text(scan: ScanResult, layout: Layout, pairs: _HubPairs | None = None) -> tuple[str, str]:
    """(label on the hub, its tooltip); ``pairs``: the hub's pairs where already read."""
    topology = scan.topology
    members = set(layout.hub_members)
    pairs = pairs or _HubPairs.of(scan, members)
    table = topology.link_table()
    word = pairs.most_common(lambda kind, _: table.kinds[kind][0])
    expected = pairs.most_common(lambda _, estimate: round(estimate.gbps, 1))
    # nvidia-smi text never names the switches: its nvswitch=True is inferred from the NV<n> pattern.
    inferred = topology.source == "nvidia-smi" or not all(table.examples[kind].nvswitch for kind in set(pairs.kind.values()))
    hosts = {topology.gpu(g).host for g in members}
    what = f"NVLink domain (NVSwitch) of {len(members)} GPUs on {len(hosts)} hosts" if len(hosts) > 1 else "NVSwitch"
    label = f"{what} · {word} between every pair · expected ~{format_gbps(expected)} GB/s per direction"
    measured = list(pairs.measured.values())
    if measured:
        label += f" · measured {format_gbps(min(measured))}-{format_gbps(max(measured))}"
    detail = label + (
        "\ninferred: the source shows the same NVLink count between every pair of these GPUs, as NVSwitch machines do"
        if inferred
        else "\nevery pair of these GPUs talks through the NVSwitch fabric (one spoke per GPU drawn)"
    )
    return label, detail


def hub_elements(scan: ScanResult, layout: Layout, best: set[int]) -> list[str]:
    if layout.hub is None:
        return []
    topology = scan.topology
    members = set(layout.hub_members)
    hx, hy, hw, hh = layout.hub
    hub = _HubPairs.of(scan, members)
    label, detail = hub_text(scan, layout, hub)
    table = topology.link_table()
    common = hub.most_common(lambda kind, estimate: (table.kinds[kind][0], round(estimate.gbps, 1), table.examples[kind].can_peer))
    pairs = hub.links
    drawn = pairs
    if len(pairs) > MAX_HUB_PAIR_ELEMENTS:  # a large domain: only the pairs unlike the hub's word
        alike = {code for code, kind in hub.kind.items()
                 if (table.kinds[kind][0], round(hub.expected[code].gbps, 1), table.examples[kind].can_peer) == common}
        unlike = itertools.compress(range(len(pairs)), map(operator.not_, map(alike.__contains__, hub.classes)))
        drawn = [pairs[k] for k in sorted({*unlike, *hub.measured})]
    figures = {(lk.a, lk.b): link_figures(scan, lk) for lk in drawn}
    summarised = len(pairs) - len(drawn)
    if summarised:
        detail += (f"\n{summarised} of the {len(pairs)} pairs are {common[0]} at the same expected figure: "
                   "not drawn one by one (the snapshot in this page lists every link)")
    parts = [f'<g class="hub-pairs" data-pairs-summarised="{summarised}">' if summarised else '<g class="hub-pairs">']
    for lk in drawn:
        expected, measured, _ = figures[(lk.a, lk.b)]
        extra = f' data-measured-gbps="{measured:.1f}"' if measured is not None else ""
        parts.append(
            f'<g class="via-hub" data-link="{lk.a}-{lk.b}" data-type="{esc(lk.type)}" data-gbps="{expected:.1f}"{extra} '
            f'data-peer="{peer_word(lk)}"><title>{esc(link_tooltip(scan, lk))}</title></g>'
        )
    parts.append("</g>")
    colour = speed_hex(common[1])
    for g in layout.hub_members:
        box = layout.gpus[g]
        cx = box.x + box.w / 2
        above = box.y < hy
        y1, y2 = (box.y + box.h, hy) if above else (box.y, hy + hh)
        cls = "spoke best" if g in best else "spoke"
        parts.append(
            f'<g class="{cls}" data-spoke="{g}"><title>GPU {g} - NVSwitch</title>'
            f'<line x1="{cx:.1f}" y1="{y1:.1f}" x2="{cx:.1f}" y2="{y2:.1f}" stroke="{colour}"/></g>'
        )
    kind = "inferred" if "inferred" in detail else "nvswitch"
    parts.append(
        f'<g class="hub" data-nvswitch="{kind}"><title>{esc(detail)}</title>'
        f'<rect x="{hx:.1f}" y="{hy:.1f}" width="{hw:.1f}" height="{hh:.1f}" rx="8"/>'
        f'<text x="{hx + hw / 2:.1f}" y="{hy + hh / 2 + 4:.1f}" text-anchor="middle" font-weight="600">'
        f"{esc(fit(label, hw - 16))}</text></g>"
    )
    return parts


def _swatches(x: float, y: float) -> tuple[list[str], float]:
    parts = [f'<text x="{x:.1f}" y="{y + 4:.1f}">link colour = expected GB/s per direction:</text>']
    x += 250
    for k, ((lowest, _, _), colour) in enumerate(zip(SPEED_STYLES, SPEED_HEX)):
        upper = SPEED_STYLES[k - 1][0] if k else None
        span = f"≥ {lowest:.0f}" if upper is None else (f"< {upper:.0f}" if lowest == 0 else f"{lowest:.0f}-{upper:.0f}")
        parts.append(f'<rect x="{x:.1f}" y="{y - 5:.1f}" width="22" height="10" rx="2" fill="{colour}"/>')
        parts.append(f'<text x="{x + 27:.1f}" y="{y + 4:.1f}">{esc(span)}</text>')
        x += 86
    return parts, x


def _edge_samples(scan: ScanResult, layout: Layout) -> list[tuple[str, str, float, str]]:
    """One legend line per kind of NVLink edge drawn, in the colour and width it is drawn with
    (so the legend's NVLink colours are the drawing's), then the dashes and dots where drawn."""
    samples: dict[str, tuple[str, str, float, str]] = {}
    dashed = dotted = False
    for link in layout.arc_links[:5000]:  # (a few kinds; a large domain's links are on its hub)
        expected, _, _ = link_figures(scan, link)
        if link.type == "UNKNOWN":
            dotted = True
            continue
        dashed = dashed or link.can_peer is False
        width = 2.0 + 0.5 * min(link.nvlink_count, 8) if link.nvlink_count else 1.6
        samples.setdefault(link.type, (f"{link.type} ~{format_gbps(expected)}", speed_hex(expected), width, ""))
    out = [samples[k] for k in sorted(samples, key=lambda w: (len(w), w))][:6]
    if layout.hub is not None:
        table = scan.topology.link_table()
        hub = _HubPairs.of(scan, set(layout.hub_members))
        word, gbps = hub.most_common(lambda kind, estimate: (table.kinds[kind][0], estimate.gbps))
        out.append((f"{word} ~{format_gbps(gbps)} through the hub", speed_hex(gbps), 2.5, ""))
    if dashed:
        out.append(("dashed: cannot peer (no P2P)", "#d93025", 1.6, "7 5"))
    if dotted:
        out.append(("dotted: kind not known", UNKNOWN_HEX, 1.6, "2 4"))
    return out


def legend(scan: ScanResult, layout: Layout) -> str:
    y = layout.legend_y + 8
    parts, _ = _swatches(12, y)
    y += 22
    x = 12.0
    samples = _edge_samples(scan, layout)
    if samples:
        parts.append(f'<text x="{x:.1f}" y="{y + 4:.1f}">NVLink edges (thicker: more links):</text>')
        x += 226
    for text, colour, width, dash in samples:
        dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
        parts.append(f'<line x1="{x:.1f}" y1="{y:.1f}" x2="{x + 30:.1f}" y2="{y:.1f}" stroke="{colour}" stroke-width="{width}"{dash_attr}/>')
        parts.append(f'<text x="{x + 36:.1f}" y="{y + 4:.1f}">{esc(text)}</text>')
        x += 46 + len(text) * 7.0
    if not samples:
        parts.append(f'<text x="{x:.1f}" y="{y + 4:.1f}">no NVLink between these GPUs</text>')
    y += 22
    notes = legend_notes(scan, layout)
    for note in notes:
        parts.append(f'<text x="12" y="{y + 4:.1f}" fill="#57606a">{esc(note)}</text>')
        y += 18
    return '<g class="legend">' + "".join(parts) + "</g>"

