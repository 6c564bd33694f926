"""``report --watch``: the recorded link traffic beside the plan, a small SVG sparkline per link.

One row per GPU (its PCIe, then each of its NVLinks that carried anything, busiest first), the
planned GPUs first and marked; each row a sparkline of % of line rate over the watch, drawn from at
most ``POINTS`` points (the busiest interval of each bucket: a burst stays visible), gaps where a
figure is unknown. Every string from the file goes through ``esc``; the markup is well-formed XML.
"""

from __future__ import annotations

from collections.abc import Iterable

from gputopo.sources.tools.watch_lines import Series, WatchLines
from gputopo.views.svg_links import esc

POINTS = 120
WIDTH, HEIGHT = 240, 24
MAX_ROWS = 256


def _buckets(values: list[float | None], points: int = POINTS) -> list[float | None]:
    if len(values) <= points:
        return list(values)
    out: list[float | None] = []
    for i in range(points):
        chunk = [v for v in values[i * len(values) // points:(i + 1) * len(values) // points] if v is not None]
        out.append(max(chunk) if chunk else None)
    return out


def sparkline(values: list[float | None], label: str) -> str:
    """An inline SVG of ``values`` (% of line rate, 0 at the bottom, 100 at the top; None: a gap)."""
    points = _buckets(values)
    step = WIDTH / max(len(points) - 1, 1)
    segments: list[list[str]] = [[]]
    for i, value in enumerate(points):
        if value is None:
            if segments[-1]:
                segments.append([])
            continue
        y = HEIGHT - 1 - min(value, 100.0) / 100.0 * (HEIGHT - 2)
        segments[-1].append(f"{i * step:.1f},{y:.1f}")
    lines = "".join(f'<polyline points="{" ".join(s)}" fill="none" stroke="#0969da" stroke-width="1.2"/>'
                    if len(s) > 1 else f'<circle cx="{s[0].split(",")[0]}" cy="{s[0].split(",")[1]}" r="1.2" fill="#0969da"/>'
                    for s in segments if s)
    return (f'<svg class="spark" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
            f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img"><title>{esc(label)}</title>'
            f'<rect width="{WIDTH}" height="{HEIGHT}" fill="#f6f8fa"/>{lines}</svg>')


def _peak(series: Series) -> float:
    return max((v for v in series.percent if v is not None), default=0.0)


def _mean(series: Series) -> float | None:
    known = [v for v in series.percent if v is not None]
    return sum(known) / len(known) if known else None


def _rows(watch: WatchLines, planned: set[int]) -> Iterable[Series]:
    by_gpu: dict[int, list[Series]] = {}
    for series in watch.series.values():
        if series.link is None or _peak(series) > 0:
            by_gpu.setdefault(series.gpu, []).append(series)
    for gpu in sorted(by_gpu, key=lambda g: (g not in planned, g)):
        yield from sorted(by_gpu[gpu], key=lambda s: (s.link is not None, -_peak(s)))


def watch_section(watch: WatchLines, planned: list[int] | None = None) -> str:
    """The section's HTML: what was watched, then the table of sparklines."""
    group = set(planned or [])
    when = " to ".join(esc(t) for t in (watch.first_at, watch.last_at) if t)
    head = (f'<p>{esc(watch.frames)} intervals of {esc(watch.path)}'
            + (f" ({when})" if when else "")
            + ("; the planned GPUs (" + esc(",".join(map(str, sorted(group)))) + ") first, marked ★" if group else "")
            + ". Each line is % of the link's line rate over the watch (its busiest interval per point); "
              "a gap is an interval the file says nothing of.</p>")
    rows = []
    for series in _rows(watch, group):
        if len(rows) >= MAX_ROWS:
            rows.append(f'<tr><td colspan="5" class="muted">... and more links (first {MAX_ROWS} shown)</td></tr>')
            break
        name = "PCIe" if series.link is None else f"NVLink {series.link} → {series.peer}"
        mark = "★ " if series.gpu in group else ""
        mean = _mean(series)
        row_class = ' class="planned"' if series.gpu in group else ""
        rows.append(
            f"<tr{row_class}><td>{mark}{esc(series.gpu)}</td><td>{esc(name)}</td>"
            f"<td>{sparkline(series.percent, f'GPU {series.gpu} {name}')}</td>"
            f"<td>{_peak(series):.0f}%</td><td>{'-' if mean is None else f'{mean:.0f}%'}</td></tr>")
    if not rows:
        return head + '<p class="muted">No link carried traffic, and no PCIe figure was read.</p>'
    return (head + '<table class="gpus"><tr><th>GPU</th><th>link</th><th>% of line rate over time</th>'
            "<th>peak</th><th>mean</th></tr>" + "".join(rows) + "</table>")
