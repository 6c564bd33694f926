"""bench-p2p views: expectations per link type, call-outs, JSON keys, and the rich output."""

from __future__ import annotations

import json

import pytest
from bench_results import make_result
from linktable import table_machine, two_socket_4

from gputopo.notation import MIB
from gputopo.bench.judgement import judge
from gputopo.views import bench as view


def test_json_contract_keys():
    topo = two_socket_4()
    result = make_result("GPU", {(0, 2): 1.0, (2, 0): 5.0}, via={(0, 2): 3.0, (2, 0): 3.0})
    data = json.loads(json.dumps(view.bench_json(result, judge(result, topo), topo)))
    pair = data["pairs"][0]
    assert (pair["src"], pair["dst"]) == (0, 2)
    assert pair["gbps"] == 1.0 and pair["latency_us"] == 10.0 and pair["size_bytes"] == MIB
    assert pair["link_type"] == "SYS" and pair["expected_gbps"] > 0 and pair["rating"] in ("ok", "low", "far-below")
    assert data["device_kind"] == "GPU" and data["sizes_bytes"] == [MIB] and data["repeats"] == 3
    # Through the host beat the direct copy 0 -> 2 (3 vs 1 GB/s), not 2 -> 0.
    assert data["via_host_faster"] == ["GPU 0 -> 2: through host memory 3.0 GB/s beats the direct copy 1.0 GB/s"]


def test_render_says_host_memory_and_shows_failures(capsys):
    result = make_result("CPU", {(0, 1): 2.5, (1, 0): 2.4}, via={(0, 1): 1.2, (1, 0): 1.1})
    result.pair(0, 1).errors.append("CPU 0 -> 1 1 MiB: timed out after 1 s (a hung copy or a wedged device)")
    result.pairs[(1, 0)].points[0].uni_gbps = None
    result.pairs[(1, 0)].errors.append("CPU 1 -> 0 1 MiB: out of memory")
    view.render_bench(result, judge(result, None))
    text = capsys.readouterr().out
    assert "host memory" in text
    assert "2.5" in text and "1.2" in text  # direct and via-host side by side
    assert "failed: CPU 1 -> 0 1 MiB: out of memory" in text
    assert "timed out" in text


@pytest.mark.parametrize("kind", ["GPU", "CPU"])
def test_render_matrix_titles(capsys, kind):
    result = make_result(kind, {(0, 1): 2.0, (1, 0): 2.0})
    view.render_bench(result, judge(result, two_socket_4()))
    text = capsys.readouterr().out
    for title in ("Unidirectional copy GB/s", "Bidirectional GB/s", "Latency us"):
        assert title in text


def test_render_prints_tensorflow_errors_and_notes_literally(capsys):
    """TF errors carry brackets ("[Op:DeepCopy]", "[/]"-like paths); they are text, not rich markup."""
    result = make_result("CPU", {(0, 1): 2.5, (1, 0): 2.4})
    result.pair(0, 1).errors.append("CPU 0 -> 1 1 MiB: [Op:DeepCopy] {{node x}} [/]")
    result.notes.append("note about /tmp/[bold]dir[/bold]")
    view.render_bench(result, judge(result, None))
    text = capsys.readouterr().out
    assert "failed: CPU 0 -> 1 1 MiB: [Op:DeepCopy] {{node x}} [/]" in text
    assert "note about /tmp/[bold]dir[/bold]" in text


def test_allreduce_table_keeps_op_names_whole_at_80_columns(capsys, monkeypatch):
    from gputopo.bench.results import AllReduceResult, Stat

    monkeypatch.setenv("COLUMNS", "80")
    result = make_result("CPU", {(0, 1): 2.5, (1, 0): 2.4})
    for op in ("HierarchicalCopyAllReduce", "ReductionToOneDevice"):
        stat = Stat(1.5, 1.0, 2.0, 3)
        result.allreduce_results.append(AllReduceResult(op, [0, 1], MIB, Stat(2500.0, 2000.0, 3000.0, 3), stat, stat))
    view.render_bench(result, judge(result, None))
    text = capsys.readouterr().out
    assert "HierarchicalCopyAllReduce" in text and "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80


@pytest.mark.parametrize("count", [4, 8, 16])
def test_matrices_fit_80_columns_without_cutting_figures(capsys, monkeypatch, count):
    """16 GPUs (DGX-2) at 80 columns: the matrices split into blocks of columns; no '…' anywhere."""
    monkeypatch.setenv("COLUMNS", "80")
    pairs = {(a, b): 123.4 for a in range(count) for b in range(count) if a != b}
    result = make_result("GPU", pairs, via=pairs)
    view.render_bench(result, judge(result, table_machine("nvswitch-16-nv6")))
    text = capsys.readouterr().out
    assert "…" not in text
    assert max(len(line) for line in text.splitlines()) <= 80
    assert text.count("123.4") == 2 * len(pairs)  # direct and via host, every pair shown
    assert ("to 8..15" in text) == (count == 16)


