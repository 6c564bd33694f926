"""The link traffic a watch recorded, in words, from its summary as JSON (``gputopo.watch-summary/1``,
the ``watch`` of ``gputopo train --watch``'s result): what ``train`` prints under its table."""

from __future__ import annotations

from typing import Any

from gputopo.quoting import terminal_safe

MAX_LINKS = 8
VERDICT_WORDS = {"nvlink": "the planned GPUs' NVLinks carried their traffic", "idle": "the planned GPUs moved nothing",
                 "unknown": "no NVLink counters to judge by",
                 "pcie": "PCIe carried the traffic while the planned NVLinks idled"}


def _gb(entry: dict[str, Any]) -> float:
    return (float(entry.get("tx_bytes") or 0) + float(entry.get("rx_bytes") or 0)) / 1e9


def result_lines(data: dict[str, Any]) -> list[str]:
    """``train --watch``'s lines: not recorded and why, else the busiest links, PCIe, the verdict."""
    if not data.get("recorded"):
        return [f"link traffic: not recorded ({terminal_safe(str(data.get('reason') or 'unknown reason'))})"]
    lines = [f"link traffic over {float(data.get('seconds') or 0):.1f} s ({data.get('frames', 0)} intervals):"]
    links = sorted((e for e in data.get("links", []) if _gb(e) > 0), key=lambda e: -_gb(e))
    for entry in links[:MAX_LINKS]:
        lines.append(f"  GPU {entry['gpu']} NVLink {entry['link']} -> {terminal_safe(str(entry['peer']))}: "
                     f"{_gb(entry):.2f} GB, peak {entry.get('peak_percent') or 0:.0f}%")
    if len(links) > MAX_LINKS:
        lines.append(f"  ... and {len(links) - MAX_LINKS} more links (--json lists them all)")
    if not links:
        lines.append("  no NVLink carried traffic")
    for entry in data.get("pcie", []):
        if _gb(entry) > 0:
            sampled = " (~20 ms samples)" if entry.get("reading") == "sampled" else ""
            lines.append(f"  GPU {entry['gpu']} PCIe: {_gb(entry):.2f} GB, peak {entry.get('peak_percent') or 0:.0f}%{sampled}")
    plan = data.get("plan")
    if plan:
        lines.append(f"  plan: {VERDICT_WORDS.get(plan.get('verdict'), '?')}"
                     + (f"; link errors +{plan['link_errors']}" if plan.get("link_errors") else ""))
    for finding in data.get("findings", []):
        lines.append(f"  {finding.get('severity')}: {terminal_safe(str(finding.get('message')))}")
    if data.get("reason"):
        lines.append(f"  note: {terminal_safe(str(data['reason']))}")
    return lines
