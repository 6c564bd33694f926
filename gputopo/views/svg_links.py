"""The drawing's shared primitives: colours by expected GB/s, escaping of untrusted text, and each
link's figures and tooltip (used by ``svg`` for the NVLink edges and ``svg_hub`` for the NVSwitch spokes)."""

from __future__ import annotations

import re
from html import escape
from typing import TYPE_CHECKING

from gputopo.model import Link
from gputopo.notation import format_gbps
from gputopo.views.topology import SPEED_STYLES

if TYPE_CHECKING:
    from gputopo.analysis.scan_result import ScanResult

# Hex colours for the terminal's speed styles (same thresholds, fastest first).
SPEED_HEX = ("#137333", "#4caf50", "#c99a00", "#e8710a", "#d93025")
UNKNOWN_HEX = "#8a8a8a"
FAULT_HEX = "#d93025"
# Measured against expected (``ScanResult.link_verdict``, ``Comparison.verdict``): the colour of a measured edge.
VERDICT_HEX = {"ok": "#4caf50", "low": "#c99a00", "far-below": "#d93025", "above-line-rate": "#8e44ad"}
VERDICT_WORDS = {"ok": "", "low": ": low", "far-below": ": far below",
                 "above-line-rate": ": above the link's line rate, suspect (the bytes did not cross this link)"}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ufffe\uffff]")


def esc(value: object) -> str:
    """Text or attribute value safe inside SVG/HTML/XML: escaped, control characters removed."""
    return escape(_CONTROL.sub("", str(value)), quote=True)


def speed_hex(gbps: float | None) -> str:
    if gbps is None:
        return UNKNOWN_HEX
    for (lowest, _, _), colour in zip(SPEED_STYLES, SPEED_HEX):
        if gbps >= lowest:
            return colour
    return SPEED_HEX[-1]


def link_figures(scan: ScanResult, link: Link) -> tuple[float, float | None, str]:
    """(expected GB/s per direction, measured GB/s or None, how the expectation was made), as the
    scan result has them (``ScanResult.expected``: once per class of pair, shared with the other views)."""
    expected = scan.expected(link)
    return expected.gbps, scan.measured_gbps(link), expected.explanation


def is_edge(link: Link) -> bool:
    """Whether the drawing draws this pair as an edge: NVLink only (a PCIe path is the nesting of
    the boxes, NUMA node > PCIe switch > GPU; drawn again as a line it would only be noise)."""
    return link.nvlink_count > 0 or link.type.startswith("NV")


def link_label(scan: ScanResult, link: Link) -> str:
    """An edge's label: link word and expected GB/s per direction, or measured (~expected)."""
    expected, measured, _ = link_figures(scan, link)
    word = "?" if link.type == "UNKNOWN" else link.type
    if measured is not None:
        return f"{word} {format_gbps(measured)} (~{format_gbps(expected)})"
    return f"{word} ~{format_gbps(expected)}"


def peer_word(link: Link) -> str:
    return {True: "ok", False: "no", None: "unknown"}[link.can_peer]


def link_tooltip(scan: ScanResult, link: Link) -> str:
    expected, measured, why = link_figures(scan, link)
    lines = [f"GPU {link.a} - GPU {link.b}: {link.type}" + (" through NVSwitch" if link.nvswitch else "")]
    lines.append(f"expected ~{format_gbps(expected)} GB/s per direction ({why})")
    if link.pcie_path and link.pcie_path != link.type:
        lines.append(f"PCIe path {link.pcie_path}")
    words = [f"{n} {w}" for n, w in (("read", link.p2p_read), ("write", link.p2p_write), ("atomics", link.p2p_atomics)) if w]
    lines.append("P2P " + (", ".join(words) if words else "not known"))
    m = link.measured
    if m is not None:
        parts = [
            f"{a}->{b} {format_gbps(v)}"
            for a, b, v in ((link.a, link.b, m.a_to_b_gbps), (link.b, link.a, m.b_to_a_gbps))
            if v is not None
        ]
        if m.bidirectional_gbps is not None:
            parts.append(f"both ways {format_gbps(m.bidirectional_gbps)}")
        lines.append(f"measured ({m.device_kind}): " + (", ".join(parts) or "no figure") + " GB/s")
        judged = scan.link_verdict(link)
        if judged is not None:
            lines.append(f"measured / expected: {judged}{VERDICT_WORDS[judged]}")
    if link.health:
        lines.append("doctor found on this pair's path: " + ", ".join(link.health))
    return "\n".join(lines)
