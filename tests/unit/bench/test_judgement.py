"""bench-p2p's result judged once (gputopo/bench/judgement.py): each pair's expectation by the one
rule of analysis.expect.measured, ratings, shares, call-outs and the pairs host memory beat."""

from __future__ import annotations

from bench_results import make_result
from linktable import cube_mesh_8

from gputopo.analysis.expect.measured import rate
from gputopo.bench import judgement
from gputopo.views import bench as view


def test_rate_thresholds():
    assert rate(40.0, 40.0) == "ok"
    assert rate(30.0, 40.0) == "ok"
    assert rate(24.0, 40.0) == "low"
    assert rate(11.0, 40.0) == "far-below"



def test_callout_names_link_type_expectation_and_measurement():
    topo = cube_mesh_8()
    link_type = topo.link(0, 1).type
    assert link_type.startswith("NV")
    expected = judgement.pair_expectations(make_result("GPU", {(0, 1): 1.0, (1, 0): 1.0}), topo)[(0, 1)]
    # Healthy 1 -> 0, far too slow 0 -> 1.
    result = make_result("GPU", {(0, 1): 0.2 * expected.gbps, (1, 0): expected.gbps})
    lines = judgement.callouts(result, judgement.pair_expectations(result, topo))
    assert lines == [
        f"GPU 0 -> 1: {link_type} expected ~{expected.gbps:.0f} GB/s, measured {0.2 * expected.gbps:.0f}"
    ]



def test_expectation_ignores_an_earlier_measurement_on_the_link():
    topo = cube_mesh_8()
    before = judgement.pair_expectations(make_result("GPU", {(0, 1): 1.0}), topo)[(0, 1)].gbps
    from gputopo.model import Measurement

    topo.link(0, 1).measured = Measurement(a_to_b_gbps=1.0, b_to_a_gbps=1.0)
    assert judgement.pair_expectations(make_result("GPU", {(0, 1): 1.0}), topo)[(0, 1)].gbps == before



def test_host_memory_results_get_no_expectations():
    topo = cube_mesh_8()
    result = make_result("CPU", {(0, 1): 0.1, (1, 0): 0.1})
    assert judgement.pair_expectations(result, topo) == {}
    data = view.bench_json(result, judgement.judge(result, topo), topo)
    assert data["callouts"] == [] and data["device_kind"] == "CPU"
    assert "host memory" in data["measured"]



def test_a_figure_within_the_line_rates_slack_is_no_callout_and_one_above_it_is():
    """One rule for every view (analysis.expect.measured.verdict): bench-p2p once called 1% above the line
    rate suspect while scan, with its 5% slack for clocks and rounding, did not."""
    topo = cube_mesh_8()
    expected = judgement.pair_expectations(make_result("GPU", {(0, 1): 1.0}), topo)[(0, 1)]
    assert expected.line_rate_gbps
    within = make_result("GPU", {(0, 1): expected.line_rate_gbps * 1.01})
    assert judgement.callouts(within, judgement.pair_expectations(within, topo)) == []
    beyond = make_result("GPU", {(0, 1): expected.line_rate_gbps * 1.2})
    (line,) = judgement.callouts(beyond, judgement.pair_expectations(beyond, topo))
    assert "above the" in line and "line rate" in line



def test_logical_cpu_devices_get_no_call_outs():
    """docs/bench-p2p.md: on logical CPU devices every copy is in host memory: no call-outs."""
    result = make_result("CPU", {(0, 1): 1.0, (1, 0): 1.0}, via={(0, 1): 3.0, (1, 0): 3.0})
    assert judgement.via_host_notes(result) == []
    assert judgement.judge(result, None).via_host_faster == []
    gpu = make_result("GPU", {(0, 1): 1.0, (1, 0): 1.0}, via={(0, 1): 3.0, (1, 0): 3.0})
    assert judgement.via_host_notes(gpu)  # on GPUs the same figures are worth saying


def test_each_pair_is_rated_once_for_every_rendering():
    topo = cube_mesh_8()
    expected = judgement.pair_expectations(make_result("GPU", {(0, 1): 1.0}), topo)[(0, 1)]
    result = make_result("GPU", {(0, 1): 0.2 * expected.gbps, (1, 0): expected.gbps})
    judged = judgement.judge(result, topo)
    assert judged.rating == {(0, 1): "far-below", (1, 0): "ok"}
    assert round(judged.percent[(0, 1)]) == 20 and judged.suspect == {(0, 1): False, (1, 0): False}
    data = view.bench_json(result, judged, topo)
    assert {(p["src"], p["dst"]): (p["rating"], p["percent_of_expected"]) for p in data["pairs"]} == {
        (0, 1): ("far-below", 20), (1, 0): ("ok", 100)}
    assert data["callouts"] == judged.callouts and len(judged.callouts) == 1
