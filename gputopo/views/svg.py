"""The topology drawing as one SVG document (``gputopo scan --svg``, and the heart of ``report``).

Hand-made SVG, standard library only. Machine-checkable: each GPU is an element with
``data-gpu="<index>"``, each GPU pair with a link in the topology exactly one element with
``data-link="<a>-<b>"`` and ``data-type`` (the nvidia-smi word, or ``UNKNOWN``), each NIC
``data-nic="<name>"``, the NVSwitch hub ``data-nvswitch`` and its spokes ``data-spoke="<gpu>"``.
Only NVLinks are drawn as edges; pairs joined by a PCIe path only (the nesting of the boxes shows
it) or through the hub (drawn by the spokes) have empty ``data-link`` groups that carry the
attributes and a tooltip. Faults are marked on the GPUs and edges they concern. Every text comes
from ``esc`` (untrusted input).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.model import Link, Topology
from gputopo.views.svg_hub import hub_elements, legend
from gputopo.views.svg_layout import LABEL_H, Layout, build_layout
from gputopo.views.svg_links import (
    FAULT_HEX,
    UNKNOWN_HEX,
    VERDICT_HEX,
    esc,
    link_figures,
    link_label,
    link_tooltip,
    peer_word,
    speed_hex,
)
from gputopo.views.svg_tree import CHAR_W, Box, GpuItem, Hop, NicItem, fit, wrap

if TYPE_CHECKING:
    from gputopo.analysis.scan_result import ScanResult

SVG_NS = "http://www.w3.org/2000/svg"
BOX_STYLE = {
    "host": ("#f6f7f9", "#7a8594", ""),
    "numa": ("#eaf1fb", "#8aa4c8", ""),
    "cpus": ("#eaf1fb", "#8aa4c8", ""),
    "switch": ("#fff6e0", "#d1a850", ""),
    "socket": ("#f0f3f7", "#7a8594", ""),
    "root": ("#f4f7fb", "#9aa7b5", ""),
    "unknown": ("#f2f2f2", "#999999", "5 4"),
}
STYLE = """
text{font-family:system-ui,-apple-system,'Segoe UI',Roboto,sans-serif;font-size:11px;fill:#1f2328}
.gpu rect{fill:#ffffff;stroke:#3d4b5c;stroke-width:1.3}
.gpu.best rect{stroke:#1a56db;stroke-width:3.5}
.gpu .idx{font-weight:700;font-size:12px}
.gpu .sub{fill:#57606a}
.gpu .via{font-weight:700}
.nic rect{fill:#f0ecff;stroke:#7a5cc2}
.link path{fill:none}
.lbl text{text-anchor:middle}
.lbl rect{fill:#ffffff;stroke-width:1}
.link.best path{stroke-width:5}
.spoke line{stroke-width:2.5}
.spoke.best line{stroke:#1a56db;stroke-width:4}
.hub rect{fill:#e7f5ea;stroke:#137333;stroke-width:1.5}
.boxlabel{font-weight:600;fill:#3d4b5c}
.focus .link:not(.hl),.focus .spoke:not(.hl),.focus .lbl:not(.hl){opacity:.12}
.focus .gpu:not(.hl){opacity:.45}
.link:hover path{stroke-width:6}
.nic .sub{fill:#57606a}
.gpu.fault>rect{stroke:#d93025;stroke-width:2.5}
.fault-mark circle{fill:#d93025}
.fault-mark text{fill:#ffffff;font-weight:700;text-anchor:middle}
.hop{font-weight:700}
"""
CAPTION_CHAR_W = 6.2  # an 11px character of the caption's words, on average (CHAR_W: the widest, for fitting)
NARROW_HEX, SLOW_HEX = "#e8710a", "#c99a00"  # a PCIe link trained narrower / slower than both ends can do


def _hop_hex(hop: Hop) -> str:
    return NARROW_HEX if hop.narrow else SLOW_HEX


def _pair_faults_outside_hub(scan: ScanResult, layout: Layout) -> dict[tuple[int, int], list[str]]:
    """The pairs doctor named with what it found on their path (``ScanResult.pair_faults``), but
    those through the NVSwitch hub (drawn by its spokes, not one by one)."""
    hub = set(layout.hub_members)
    return {pair: words for pair, words in scan.pair_faults.items() if not (pair[0] in hub and pair[1] in hub)}


def switch_faults(scan: ScanResult, layout: Layout) -> dict[int, list[str]]:
    """The PCIe switches where a pair doctor found at fault meets (``acs``: ACS redirecting peer
    traffic up to the root instead of across the switch): for each pair it named that the drawing
    shows by the boxes, not as an edge, the innermost switch box holding both its GPUs at any depth
    (in a nested fabric, the outer switch for two GPUs under two inner ones). ``id(box)`` -> what, per pair."""
    faults = {pair: words for pair, words in _pair_faults_outside_hub(scan, layout).items() if pair not in layout.edges}
    if not faults:
        return {}
    switches: dict[int, list[Box]] = {}  # GPU -> the switch boxes holding it, innermost first
    for box in sorted((b for b in layout.boxes if b.kind == "switch"), key=lambda b: len(_gpus_in(b))):
        for g in _gpus_in(box):
            switches.setdefault(g, []).append(box)
    out: dict[int, list[str]] = {}
    for (a, b), words in sorted(faults.items()):
        meet = next((box for box in switches.get(a, ()) if any(box is other for other in switches.get(b, ()))), None)
        if meet is not None:
            out.setdefault(id(meet), []).append(f"GPU {a} - GPU {b}: " + ", ".join(words))
    return out


def _box(box: Box, faults: list[str] | None = None) -> str:
    fill, stroke, dash = BOX_STYLE.get(box.kind, BOX_STYLE["unknown"])
    detail = box.detail + (f"\n{box.hop.detail}" if box.hop else "")
    if box.hop:
        stroke = _hop_hex(box.hop)
    if faults:  # doctor's problems on paths through this switch
        stroke, dash = FAULT_HEX, "6 3"
        detail += "\nfaults on paths through this switch:\n" + "\n".join(faults)
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    ty = box.y + box.h - 6 if box.header_at_bottom else box.y + 14
    cls = f"box box-{box.kind}" + (" fault" if faults else "")
    attrs = f' data-fabric="{esc(box.fabric_id)}" data-gpus="{",".join(map(str, _gpus_in(box)))}"' if box.fabric_id else ""
    hop, room = "", box.w - 14
    if box.hop:  # the link above this box, trained down: on the right of its label strip
        room -= len(box.hop.words) * CHAR_W + 8
        attrs += f' data-hop="{esc(box.hop.words)}"'
        hop = (f'<text class="hop" x="{box.x + box.w - 8:.1f}" y="{ty:.1f}" text-anchor="end" '
               f'style="fill:{_hop_hex(box.hop)}">{esc(box.hop.words)}</text>')
    return (
        f'<g class="{cls}"{attrs}><title>{esc(detail)}</title>'
        f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.w:.1f}" height="{box.h:.1f}" rx="6" '
        f'fill="{fill}" stroke="{stroke}"{dash_attr}' + (' stroke-width="2.5"' if faults or box.hop else "") + "/>"
        f'<text class="boxlabel" x="{box.x + 8:.1f}" y="{ty:.1f}">{esc(fit(box.label, room))}</text>{hop}</g>'
    )


def _gpus_in(box: Box) -> list[int]:
    """The GPUs drawn inside ``box``, at any depth, by index."""
    found, stack = [], list(box.children)
    while stack:
        item = stack.pop()
        if isinstance(item, GpuItem):
            found.append(item.index)
        elif isinstance(item, Box):
            stack.extend(item.children)
    return sorted(found)


def _gpu_text_lines(topology: Topology, index: int, width: float, hop: Hop | None = None) -> list[str]:
    """The lines under a GPU's number: its name (wrapped on two lines; cut further only with the
    full name in the tooltip), bus id, PCIe (the fabric's link above it where it trained down) and NVLinks."""
    gpu = topology.gpu(index)
    gen, lanes = gpu.pcie_gen_max or gpu.pcie_gen_current, gpu.pcie_width_current or gpu.pcie_width_max
    pcie = f"Gen{gen} x{lanes}" if gen and lanes else "PCIe not known"
    pcie = f"PCIe {hop.words}" if hop else pcie
    nvlink = f"{gpu.nvlink_active_links} NVLinks" if gpu.nvlink_active_links else ""
    name = wrap(gpu.name or "name not known", width)
    return [*name, gpu.pci_bus_id or "bus id not known", fit(" · ".join(w for w in (pcie, nvlink) if w), width)]


def gpu_tooltip(topology: Topology, index: int) -> str:
    gpu = topology.gpu(index)
    facts = [
        ("name", gpu.name), ("bus id", gpu.pci_bus_id), ("memory", _memory(gpu.memory_total_bytes)),
        ("UUID", gpu.uuid), ("NUMA node", gpu.numa_node), ("CPU affinity", gpu.cpu_affinity),
        ("PCIe", f"Gen{gpu.pcie_gen_current}/{gpu.pcie_gen_max} x{gpu.pcie_width_current}/{gpu.pcie_width_max}"
         if gpu.pcie_gen_current or gpu.pcie_gen_max else None),
        ("NVLink", f"{gpu.nvlink_version}, {gpu.nvlink_active_links} links" if gpu.nvlink_version else None),
        ("compute capability", gpu.compute_capability), ("host", gpu.host),
    ]
    return f"GPU {index}\n" + "\n".join(f"{k}: {v}" for k, v in facts if v not in (None, ""))


def _memory(n: int | None) -> str | None:
    return None if not n else f"{n / 2**30:.0f} GiB"


def gpu_faults(scan: ScanResult, layout: Layout) -> dict[int, list[str]]:
    """What is wrong where, by GPU: the faults that name GPUs (``ScanResult.faults``) and doctor's
    problems on a pair's path (``ScanResult.pair_faults``) on both its GPUs."""
    out: dict[int, list[str]] = {}
    for finding in scan.faults:
        for g in dict.fromkeys(finding.gpus):
            out.setdefault(g, []).append(finding.message)
    pairs = _pair_faults_outside_hub(scan, layout)
    for (a, b) in sorted(pairs, key=lambda pair: pair not in layout.edges):  # the edges' first, then the paths'
        words = pairs[(a, b)]
        for g, peer in ((a, b), (b, a)):
            out.setdefault(g, []).append(f"to GPU {peer}: " + ", ".join(words))
    return {g: words for g, words in out.items() if g in layout.gpus}


def _fault_mark(item: GpuItem, words: list[str]) -> str:
    """A red mark on the GPU's corner; its tooltip: the findings' words."""
    text = "\n".join(dict.fromkeys(words))
    cx, cy = item.x + 8 + 8.5 * (4 + len(str(item.index))) + 12, item.y + 12  # right after "GPU <n>"
    return (f'<g class="fault-mark"><title>{esc(text)}</title><circle cx="{cx:.1f}" cy="{cy:.1f}" r="8"/>'
            f'<text x="{cx:.1f}" y="{cy + 4:.1f}">!</text></g>')


def _gpu_item(topology: Topology, item: GpuItem, layout: Layout, best: set[int], faults: list[str] | None = None) -> str:
    cls = "gpu best" if item.index in best else "gpu"
    cls += " fault" if faults else ""
    tooltip = gpu_tooltip(topology, item.index) + ("\nfaults:\n" + "\n".join(dict.fromkeys(faults)) if faults else "")
    tooltip += f"\n{item.hop.detail}" if item.hop else ""
    hop = f' data-hop="{esc(item.hop.words)}"' if item.hop else ""
    head = (
        f'<g class="{cls}" data-gpu="{item.index}"{hop}><title>{esc(tooltip)}</title>'
        f'<rect x="{item.x:.1f}" y="{item.y:.1f}" width="{item.w:.1f}" height="{item.h:.1f}" rx="5"/>'
        + (_fault_mark(item, faults) if faults and not layout.compact else "")
    )
    if layout.compact:
        return head + (
            f'<text class="idx" x="{item.x + item.w / 2:.1f}" y="{item.y + item.h / 2 + 4:.1f}" '
            f'text-anchor="middle">{item.index}</text></g>'
        )
    x = item.x + 8
    memory = _memory(topology.gpu(item.index).memory_total_bytes) or ""
    parts = [
        head,
        f'<text class="idx" x="{x:.1f}" y="{item.y + 17:.1f}">GPU {item.index}</text>',
        f'<text class="sub" x="{item.x + item.w - 8:.1f}" y="{item.y + 17:.1f}" text-anchor="end">{esc(memory)}</text>',
    ]
    lines = _gpu_text_lines(topology, item.index, item.w - 16, item.hop)
    for k, line in enumerate(lines):
        hop = f' class="sub hop" style="fill:{_hop_hex(item.hop)}"' if item.hop and k == len(lines) - 1 else ' class="sub"'
        parts.append(f'<text{hop} x="{x:.1f}" y="{item.y + 33 + 15 * k:.1f}">{esc(line)}</text>')
    # The path to the GPU under the pointer, written here by the page's script on hover.
    parts.append(f'<text class="via" x="{x:.1f}" y="{item.y + item.h - 7:.1f}"></text>')
    return "".join(parts) + "</g>"


def _nic_item(item: NicItem, layout: Layout) -> str:
    near = f"{item.path} · GPU {','.join(map(str, item.nearest))}" if item.nearest else "no GPU path"
    cy = item.y + item.h / 2
    parts = [f'<g class="nic" data-nic="{esc(item.name)}"><title>NIC {esc(item.name)}: {esc(near)} (nearest GPUs and their path)</title>']
    for gpu, side in ((item.connect_left, item.x), (item.connect_right, item.x + item.w)):
        if gpu is not None:
            g = layout.gpus[gpu]
            end = g.x + g.w if side == item.x else g.x
            parts.append(f'<line x1="{side:.1f}" y1="{cy:.1f}" x2="{end:.1f}" y2="{cy:.1f}" stroke="#7a5cc2" stroke-width="2"/>')
    parts.append(f'<rect x="{item.x:.1f}" y="{item.y:.1f}" width="{item.w:.1f}" height="{item.h:.1f}" rx="4"/>')
    text_y = cy + 4 if layout.compact else item.y + 16
    parts.append(f'<text x="{item.x + 6:.1f}" y="{text_y:.1f}">{esc(fit(item.name, item.w - 10))}</text>')
    if not layout.compact:
        for k, line in enumerate(item.lines()):
            parts.append(f'<text class="sub" x="{item.x + 6:.1f}" y="{item.y + 32 + 15 * k:.1f}">{esc(fit(line, item.w - 10))}</text>')
    return "".join(parts) + "</g>"


def _stroke(scan: ScanResult, link: Link, expected: float) -> tuple[str, float, str]:
    """(colour, width, dash pattern) of an edge: colour = expected speed, or measured/expected where
    measured, red where doctor found the link at fault; width = NVLink count; dashes = no P2P or a fault."""
    if link.type == "UNKNOWN":
        return UNKNOWN_HEX, 1.6, "2 4"
    width = 2.0 + 0.5 * min(link.nvlink_count, 8) if link.nvlink_count else 1.6
    if link.health:
        return FAULT_HEX, width, "4 3"
    judged = scan.link_verdict(link)
    colour = VERDICT_HEX[judged] if judged is not None else speed_hex(expected)
    return colour, width, "7 5" if link.can_peer is False else ""


def _link_attrs(scan: ScanResult, link: Link, colour: str) -> str:
    """The machine-checkable attributes of a pair (docs/report.md), and what the hover script shows."""
    expected, measured, _ = link_figures(scan, link)
    extra = f' data-measured-gbps="{measured:.1f}"' if measured is not None else ""
    return (
        f'data-link="{link.a}-{link.b}" data-type="{esc(link.type)}" data-gbps="{expected:.1f}"{extra} '
        f'data-peer="{peer_word(link)}" data-label="{esc(link_label(scan, link))}" data-colour="{colour}"'
    )


def _edge(scan: ScanResult, link: Link, layout: Layout, best: set[int]) -> tuple[str, str]:
    """An NVLink edge (its group with the path) and its label (drawn later, above every edge)."""
    expected, _, _ = link_figures(scan, link)
    colour, width, dash = _stroke(scan, link, expected)
    e = layout.edges[(link.a, link.b)]
    cls = "link best" if link.a in best and link.b in best else "link"
    dash_attr = f' stroke-dasharray="{dash}"' if dash else ""
    path = (
        f'<g class="{cls}" {_link_attrs(scan, link, colour)}><title>{esc(link_tooltip(scan, link))}</title>'
        f'<path d="M{e.x1:.1f},{e.y1:.1f} C{e.x1:.1f},{e.c1y:.1f} {e.x2:.1f},{e.c2y:.1f} {e.x2:.1f},{e.y2:.1f}" '
        f'stroke="{colour}" stroke-width="{width:.1f}"{dash_attr}/></g>'
    )
    if layout.compact:
        return path, ""
    label = (
        f'<g class="lbl" data-of="{link.a}-{link.b}"><title>{esc(link_tooltip(scan, link))}</title>'
        f'<rect x="{e.lx - e.label_w / 2:.1f}" y="{e.ly - LABEL_H / 2:.1f}" width="{e.label_w:.1f}" height="{LABEL_H}" '
        f'rx="3" stroke="{colour}"/><text x="{e.lx:.1f}" y="{e.ly + 4:.1f}">{esc(link_label(scan, link))}</text></g>'
    )
    return path, label


def _path_only(scan: ScanResult, link: Link) -> str:
    """A pair joined by a PCIe path only: not drawn (the boxes show it), an empty group that
    carries its attributes and tooltip; hovering a GPU writes its word into the peer's box."""
    expected, _, _ = link_figures(scan, link)
    colour = UNKNOWN_HEX if link.type == "UNKNOWN" else speed_hex(expected)
    return f'<g class="via-path" {_link_attrs(scan, link, colour)}><title>{esc(link_tooltip(scan, link))}</title></g>'


def render_svg(topology: Topology, best: list[int] | tuple[int, ...] = (), standalone: bool = True,
               scan: ScanResult | None = None) -> str:
    """The drawing of ``topology``; ``best`` GPUs (a recommended group) are highlighted. ``scan``: the
    topology's ``ScanResult``, whose figures, verdicts and faults the drawing shows (made here where
    the caller has none)."""
    if scan is None:
        from gputopo.analysis.scan_result import scan_result

        scan = scan_result(topology)
    layout = build_layout(scan)
    chosen = set(best)
    ns = f' xmlns="{SVG_NS}"' if standalone else ""
    title = topology.label or f"{topology.source} {topology.source_detail or ''}".strip()
    parts = [
        f'<svg{ns} class="topology" width="{layout.width:.0f}" height="{layout.height:.0f}" '
        f'viewBox="0 0 {layout.width:.0f} {layout.height:.0f}" role="img" aria-label="GPU topology drawing">',
        f"<style>{STYLE}</style>",
        f'<rect x="0" y="0" width="{layout.width:.0f}" height="{layout.height:.0f}" fill="#ffffff"/>',
    ]
    caption = layout.tree.caption  # where the boxes come from, on the right of the title's row
    if caption:
        parts.append(f'<text class="tree-source" data-tree="{layout.tree.kind}" x="{layout.width - 12:.1f}" y="20" '
                     f'text-anchor="end" style="fill:#57606a"><title>{esc(layout.tree.detail)}</title>{esc(caption)}</text>')
    if standalone:  # in the report the page's own heading says it
        room = layout.width - 24 - (len(caption) * CAPTION_CHAR_W + 16 if caption else 0)
        shown = fit(title, room, 7.8)  # (cut: the whole title on hover)
        tip = f"<title>{esc(title)}</title>" if shown != title else ""
        parts.append(f'<text x="12" y="20" font-size="14" font-weight="700">{tip}{esc(shown)}</text>')
    at_fault = switch_faults(scan, layout)
    parts += [_box(b, at_fault.get(id(b))) for b in layout.boxes]
    edges = [_edge(scan, lk, layout, chosen) for lk in layout.arc_links]
    parts.append('<g class="links">')
    parts += [path for path, _ in edges]
    parts.append("</g>")
    parts.append('<g class="paths">')
    parts += [_path_only(scan, lk) for lk in layout.path_links]
    parts.append("</g>")
    parts += hub_elements(scan, layout, chosen)
    parts += [_nic_item(n, layout) for n in layout.nics]
    faults = gpu_faults(scan, layout)
    parts += [_gpu_item(topology, g, layout, chosen, faults.get(g.index)) for g in layout.gpus.values()]
    parts.append('<g class="labels">')
    parts += [label for _, label in edges]
    parts.append("</g>")
    parts.append(legend(scan, layout))
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
