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


def test_more_gpus_than_a_table_can_show_are_said_in_a_sentence_not_a_matrix_per_pair():
    """(A snapshot of 2,048 GPUs and no links - 1.2 MB - made two 2,048 x 2,048 tables: 40 s and
    2.9 GB to write the report; 4,096 GPUs, the most a snapshot may hold, four times that.)"""
    from gputopo.model import Gpu, Link, Topology
    from gputopo.views.report_tables import MAX_HEATMAP_GPUS

    n = MAX_HEATMAP_GPUS + 1
    topo = Topology(source="test", gpus=[Gpu(index=k) for k in range(n)],
                    links=[Link(0, 1, "NV4"), Link(1, 2, "PIX")])
    html = heatmaps(scan_result(topo))
    assert "data-heatmap" not in html and len(html) < 2000
    assert f"{n} GPUs" in html and "scan --json" in html
