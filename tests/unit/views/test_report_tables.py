"""The report's heatmaps: the measured / expected matrix judges each figure by the one rule of
``analysis.expect.measured`` (the same thresholds as scan's findings and bench-p2p's colours)."""

from __future__ import annotations

from linktable import cube_mesh_8

from gputopo.analysis.expect.measured import OK_RATIO, expectation
from gputopo.analysis.scan_result import scan_result
from gputopo.model import Measurement
from gputopo.views.report_tables import _tint, heatmaps


def _ratio_cell_colour(html: str, a: int, b: int) -> str:
    section = html[html.index('data-heatmap="measured-vs-expected"'):]
    cell = section[section.index(f'data-a="{a}" data-b="{b}"'):]
    return cell[cell.index("background:") + len("background:"):].split('"')[0].strip()


def test_a_figure_the_rule_calls_ok_is_green_and_one_above_the_line_rate_is_suspect():
    topo = cube_mesh_8()
    link = topo.link(0, 1)
    exp = expectation(topo, link)
    assert exp is not None and exp.line_rate_gbps
    # 75% of expected: "ok" by the rule (>= 70%); the report's own 80% once painted it amber.
    link.measured = Measurement(a_to_b_gbps=max(OK_RATIO, 0.75) * exp.gbps, b_to_a_gbps=exp.line_rate_gbps * 1.5,
                                device_kind="GPU")
    html = heatmaps(scan_result(topo))
    assert _ratio_cell_colour(html, 0, 1) == _tint("#4caf50")
    assert _ratio_cell_colour(html, 1, 0) == _tint("#8e44ad") and "above the link&#x27;s line rate" in html
