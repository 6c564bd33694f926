"""`report --watch`'s section: a sparkline per link, planned GPUs first, every file string escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from gputopo.sources.tools.watch_lines import Series, WatchLines
from gputopo.views.report_watch import POINTS, sparkline, watch_section


def test_sparkline_gaps_and_buckets():
    svg = ET.fromstring(sparkline([0.0, 50.0, None, 100.0], "GPU 0 <PCIe>"))
    assert svg.find("{http://www.w3.org/2000/svg}title").text == "GPU 0 <PCIe>"
    assert len(svg.findall("{http://www.w3.org/2000/svg}polyline")) == 1  # the lone last point is a dot
    assert len(svg.findall("{http://www.w3.org/2000/svg}circle")) == 1
    long = ET.fromstring(sparkline([float(i % 7) for i in range(10_000)], "x"))
    points = long.find("{http://www.w3.org/2000/svg}polyline").attrib["points"].split()
    assert len(points) == POINTS


def test_section_puts_the_plan_first_and_escapes_the_file():
    watch = WatchLines("<evil>&.jsonl", frames=2, first_at="2026-01-01T00:00:00Z<script>")
    watch.series = {(5, 0): Series(5, 0, "GPU <b>1</b>", [50.0, 80.0]), (1, None): Series(1, None, "CPU", [1.0, None]),
                    (5, 1): Series(5, 1, "GPU 2", [0.0, 0.0])}
    html = watch_section(watch, [1])
    assert "<script>" not in html and "<b>" not in html and "&lt;evil&gt;&amp;.jsonl" in html
    ET.fromstring(f"<div>{html}</div>")  # well-formed
    assert html.index("★ 1") < html.index(">5<") and "NVLink 1" not in html  # an idle NVLink is left out
