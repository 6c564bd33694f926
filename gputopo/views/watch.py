"""`gputopo watch`'s screens: the live view (one row per GPU, a bar per link class, fits 80 columns),
one JSON object per interval (schema ``gputopo.watch/1``, docs/json.md), and the summary at the end
of a watched command (``gputopo.watch-summary/1``)."""

from __future__ import annotations

import json
from typing import Any

from gputopo.analysis.watch.watch import Frame
from gputopo.analysis.watch.watch_summary import Summary, error_lines
from gputopo.model import Finding
from gputopo.model.json_text import finite_or_null
from gputopo.quoting import terminal_safe

SCHEMA = "gputopo.watch/1"
SUMMARY_SCHEMA = "gputopo.watch-summary/1"
BAR_CELLS = 10
STATE_WORDS = {"moving": "", "idle": "idle", "zero-while-busy": "0 busy?", "not-supported": "n/a", "lost": "LOST"}


def json_line(data: Any) -> str:
    """One JSON object on one line (JSON Lines), strict: a non-finite figure is null."""
    return json.dumps(finite_or_null(data), separators=(",", ":"), ensure_ascii=True) + "\n"


def _finding(finding: Finding) -> dict[str, Any]:
    return {"severity": finding.severity, "code": finding.code, "message": finding.message,
            "gpus": list(finding.gpus), "fix": finding.fix, "kind": finding.kind, "caused_by": finding.caused_by}


def frame_json(frame: Frame, captured_at: str) -> dict[str, Any]:
    """One interval as JSON (``gputopo.watch/1``)."""
    return {
        "schema": SCHEMA,
        "captured_at": captured_at,
        "interval_s": frame.interval_s,
        "gpus": frame.gpus,
        "links": [{"gpu": r.gpu, "link": r.link, "peer": r.peer, "peer_gpu": r.peer_gpu, "tx_gbps": r.tx_gbps,
                   "rx_gbps": r.rx_gbps, "line_rate_gbps": r.line_rate_gbps, "percent_of_peak": r.percent_of_peak}
                  for r in frame.links],
        "pcie": [{"gpu": p.gpu, "tx_gbps": p.tx_gbps, "rx_gbps": p.rx_gbps, "line_rate_gbps": p.line_rate_gbps,
                  "percent_of_peak": p.percent_of_peak, "reading": p.reading} for p in frame.pcie],
        "errors": [{"gpu": e.gpu, "link": e.link, "counter": e.counter, "delta": e.delta} for e in frame.errors],
        "findings": [_finding(f) for f in frame.findings],
    }


def summary_json(summary: Summary, command: list[str] | None, exit_code: int | None,
                 plan: dict[str, Any] | None) -> dict[str, Any]:
    """The whole watch (``gputopo.watch-summary/1``)."""

    def totals(t: Any) -> dict[str, Any]:
        return {"gpu": t.gpu, "link": t.link, "peer": t.peer, "tx_bytes": round(t.tx_bytes),
                "rx_bytes": round(t.rx_bytes), "peak_percent": t.peak_percent, "mean_percent": t.mean_percent}

    return {
        "schema": SUMMARY_SCHEMA,
        "command": command,
        "exit_code": exit_code,
        "seconds": round(summary.seconds, 3),
        "frames": summary.frames,
        "links": [totals(t) for t in summary.links.values()],
        "pcie": [{**{k: v for k, v in totals(t).items() if k not in ("link", "peer")}, "reading": t.reading}
                 for t in summary.pcie.values()],
        "errors": [{"gpu": g, "link": link, "counter": c, "count": n} for (g, link, c), n in summary.errors.items()],
        "plan": plan,
        "findings": [_finding(f) for f in summary.findings.values()],
    }


def bar(percent: float | None, cells: int = BAR_CELLS) -> str:
    """``[███·······]``-style bar of a percentage (``?`` cells where unknown)."""
    if percent is None:
        return "?" * cells
    filled = min(cells, max(0, round(percent / 100 * cells)))
    if percent > 0 and filled == 0:
        filled = 1  # any traffic shows
    return "█" * filled + "·" * (cells - filled)


def _gbps(value: float | None) -> str:
    return "?" if value is None else f"{value:.1f}" if value < 100 else f"{value:.0f}"


def gpu_rows(frame: Frame) -> list[list[str]]:
    """Per GPU: index, utilisation, NVLink TX/RX (sum over its links), NVLink bar and %, PCIe TX/RX,
    PCIe bar and %, errors this interval, state."""
    rows = []
    for gpu in frame.gpus:
        index = gpu["index"]
        links = [r for r in frame.links if r.gpu == index]
        tx = [r.tx_gbps for r in links if r.tx_gbps is not None]
        rx = [r.rx_gbps for r in links if r.rx_gbps is not None]
        line = sum(r.line_rate_gbps or 0 for r in links)
        nv_percent = round(100 * max(sum(tx), sum(rx)) / line, 1) if (tx or rx) and line else None
        pcie = next((p for p in frame.pcie if p.gpu == index), None)
        errors = sum(e.delta for e in frame.errors if e.gpu == index)
        util = gpu.get("utilization_percent")
        nv_text = f"{_gbps(sum(tx) if tx else None)}/{_gbps(sum(rx) if rx else None)}" if links else "-"
        rows.append([
            str(index), "?" if util is None else f"{util}%", nv_text,
            bar(nv_percent) if links else " " * BAR_CELLS, "" if nv_percent is None else f"{nv_percent:.0f}%",
            ("~" if pcie and pcie.reading == "sampled" else "")  # the driver's ~20 ms glimpse, not counters
            + f"{_gbps(pcie.tx_gbps if pcie else None)}/{_gbps(pcie.rx_gbps if pcie else None)}",
            bar(pcie.percent_of_peak if pcie else None),
            "" if not pcie or pcie.percent_of_peak is None else f"{pcie.percent_of_peak:.0f}%",
            str(errors) if errors else "", STATE_WORDS.get(str(gpu.get("state")), str(gpu.get("state"))),
        ])
    return rows


HEADERS = ["GPU", "util", "NVLink GB/s", "", "%", "PCIe GB/s", "", "%", "err", ""]


def live_table(frame: Frame, title: str | None = None) -> Any:
    """The live view of one interval: a rich Table, its findings under it."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, box=None, pad_edge=False, padding=(0, 1), title_justify="left")
    for i, header in enumerate(HEADERS):
        table.add_column(header, justify="right" if i in (0, 1, 2, 4, 5, 7, 8) else "left", no_wrap=True)
    for row in gpu_rows(frame):
        table.add_row(*row)
    notes = [Text(f"{finding.severity}: {terminal_safe(finding.message)}"[:400]) for finding in frame.findings]
    return Group(table, *notes)


def summary_text(summary: Summary, exit_code: int | None, verdict: str | None) -> list[str]:
    """The summary as lines: per link with traffic its GB moved and peak/mean %, PCIe per GPU, errors."""
    lines = [f"watched {summary.seconds:.1f} s ({summary.frames} intervals)"
             + ("" if exit_code is None else f"; the command exited {exit_code}")]
    moved = [t for t in summary.links.values() if t.tx_bytes + t.rx_bytes > 0]
    for t in sorted(moved, key=lambda t: -(t.tx_bytes + t.rx_bytes))[:32]:
        lines.append(f"  GPU {t.gpu} NVLink {t.link} -> {t.peer}: {t.tx_bytes / 1e9:.2f} GB out, "
                     f"{t.rx_bytes / 1e9:.2f} GB in, peak {t.peak_percent or 0:.0f}%, mean {t.mean_percent or 0:.0f}%")
    if len(moved) > 32:
        lines.append(f"  ... and {len(moved) - 32} more links that carried traffic (--json lists them all)")
    if not moved:
        lines.append("  no NVLink carried traffic")
    for t in summary.pcie.values():
        if t.tx_bytes + t.rx_bytes > 0:
            lines.append(f"  GPU {t.gpu} PCIe: {t.tx_bytes / 1e9:.2f} GB out, {t.rx_bytes / 1e9:.2f} GB in, "
                         f"peak {t.peak_percent or 0:.0f}%, mean {t.mean_percent or 0:.0f}%"
                         + (" (~20 ms samples, not counters)" if t.reading == "sampled" else ""))
    lines.extend(f"  errors: {line}" for line in error_lines(summary))
    if verdict:
        lines.append(f"  plan: {verdict}")
    for finding in summary.findings.values():
        lines.append(f"{finding.severity}: {terminal_safe(finding.message)}")
        if finding.fix:
            lines.append(f"  fix: {terminal_safe(finding.fix)}")
    return lines
