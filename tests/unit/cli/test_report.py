"""`gputopo report` and `scan --svg` on the command line: the page and its JSON summary, --bench,
one-line errors; the drawing and the page themselves are tests/unit/views/test_report.py."""

from __future__ import annotations

import dataclasses
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from conftest import assert_one_error_line

from gputopo.model import Measurement
from gputopo.sources.reference import load_reference
from gputopo.sources.registry import read_file
from gputopo.sources.snapshot import save_snapshot


def _attrs(root: ET.Element, name: str) -> list[str]:
    return [e.attrib[name] for e in root.iter() if name in e.attrib]


def _measured_snapshot(tmp_path) -> Path:
    topo = load_reference("dgx1")
    for lk in topo.links:
        if (lk.a, lk.b) in ((0, 1), (0, 5)):
            lk.measured = Measurement(a_to_b_gbps=19.5, b_to_a_gbps=18.0, bidirectional_gbps=36.0)
    path = tmp_path / "bench.json"
    save_snapshot(topo, path)
    return path


def test_report_cli_writes_the_page_and_a_json_summary(cli, tmp_path):
    out = tmp_path / "box.html"
    result = cli("report", "--machine", "dgx1", "--gpus", "4", "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == {"schema": "gputopo.report/1", "output": str(out), "gpus": 8, "links": 28}
    page = out.read_text()
    assert page.count('class="gpu best"') == 4
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3" in page and "MirroredStrategy(devices=" in page
    again = cli("scan", "--from", str(out), "--json")
    assert again.exit_code == 0, again.output
    reference = cli("scan", "--machine", "dgx1", "--json")
    assert json.loads(again.stdout) == json.loads(reference.stdout)


def test_report_cli_with_bench_labels_measured_links(cli, tmp_path):
    bench = _measured_snapshot(tmp_path)
    for args in (["--machine", "dgx1", "--bench", str(bench)], ["--bench", str(bench)]):
        out = tmp_path / "bench.html"
        result = cli("report", *args, "-o", str(out))
        assert result.exit_code == 0, result.output
        page = out.read_text()
        assert page.count("data-measured-gbps=") == 2
        assert 'data-heatmap="measured-one-way"' in page and 'data-heatmap="measured-vs-expected"' in page
        assert "NV1 18 (~20)" in page


def test_report_cli_refuses_a_bench_of_other_gpus(cli, tmp_path):
    bench = read_file(str(_measured_snapshot(tmp_path)))
    bench.gpus[0] = dataclasses.replace(bench.gpus[0], pci_bus_id="0000:ff:00.0")
    path = tmp_path / "other.json"
    save_snapshot(bench, path)
    line = assert_one_error_line(cli("report", "--machine", "dgx1", "--bench", str(path), "-o", str(tmp_path / "x.html")))
    assert "measured on other GPUs" in line
    assert not (tmp_path / "x.html").exists()


def test_unwritable_output_is_one_line_and_writes_nothing(cli, tmp_path):
    target = tmp_path / "missing" / "box.html"
    line = assert_one_error_line(cli("report", "--machine", "dgx1", "-o", str(target)))
    assert "does not exist" in line
    assert not target.parent.exists()
    assert list(tmp_path.iterdir()) == []


def test_scan_svg_writes_only_the_drawing(cli, tmp_path):
    out = tmp_path / "box.svg"
    result = cli("scan", "--machine", "dgx-h100", "--svg", str(out), "--json")
    assert result.exit_code == 0, result.output
    root = ET.fromstring(out.read_text())
    assert root.tag.endswith("svg") and len(_attrs(root, "data-gpu")) == 8
    assert not re.search(r"<html|<script", out.read_text())


def test_an_html_page_without_snapshot_is_one_clear_line(cli, tmp_path):
    page = tmp_path / "other.html"
    page.write_text("<!DOCTYPE html><html><body>hello</body></html>")
    line = assert_one_error_line(cli("scan", "--from", str(page)))
    assert "without an embedded gputopo snapshot" in line


def test_a_bench_of_cpu_devices_is_refused_on_a_gpu_snapshot_in_one_line(cli, tmp_path):
    """issue 32: `report --from box.json --bench bench.json`, a DGX-1 and 4 logical CPU devices."""
    from conftest import OWN_FIXTURES, assert_one_error_line

    box = tmp_path / "box.json"
    assert cli("scan", "--machine", "dgx1", "--save", str(box)).exit_code == 0
    bench = str(OWN_FIXTURES / "snapshots" / "bench_cpu4.json")
    for extra in ((), ("--join-by-index",)):
        result = cli("report", "--from", str(box), "--bench", bench, "-o", str(tmp_path / "r.html"), *extra)
        line = assert_one_error_line(result, 2)
        assert "host memory on logical CPU devices" in line
    assert not (tmp_path / "r.html").exists()


def test_report_says_when_the_work_budget_stopped_the_search(cli, tmp_path, monkeypatch):
    import gputopo.analysis.recommend.budget as budget_module

    monkeypatch.setattr(budget_module, "WORK_BUDGET", 50)
    out = tmp_path / "box.html"
    result = cli("report", "--machine", "dgx1", "--gpus", "5", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "search stopped after" in out.read_text()


def test_report_watch_draws_each_link_beside_the_plan(cli, tmp_path):
    line = {"schema": "gputopo.watch/1", "captured_at": "2026-01-01T00:00:00Z", "interval_s": 1.0,
            "links": [{"gpu": 0, "link": 0, "peer": "GPU 1", "tx_gbps": 10.0, "rx_gbps": 0.0, "percent_of_peak": 40.0}],
            "pcie": [{"gpu": 0, "tx_gbps": 0.0, "rx_gbps": 0.0, "percent_of_peak": 0.0}]}
    watch = tmp_path / "watch.jsonl"
    watch.write_text(json.dumps(line) + "\n" + json.dumps(line) + "\n")
    out = tmp_path / "box.html"
    result = cli("report", "--machine", "dgx1", "--gpus", "4", "--watch", str(watch), "-o", str(out))
    assert result.exit_code == 0, result.output
    page = out.read_text()
    assert 'id="watch"' in page and page.index('id="plan"') < page.index('id="watch"') < page.index('id="findings"')
    assert "NVLink 0 → GPU 1" in page and 'class="spark"' in page
    ET.fromstring(page.split("\n", 1)[1])  # still well-formed XML


def test_report_watch_garbage_is_one_line_exit_2(cli, tmp_path):
    watch = tmp_path / "watch.jsonl"
    watch.write_bytes(b'{"schema": "gputopo.watch/1", "links": [{"gpu": -1}]}\n')
    out = tmp_path / "box.html"
    result = cli("report", "--machine", "dgx1", "--watch", str(watch), "-o", str(out))
    assert result.exit_code == 2 and "line 1" in assert_one_error_line(result) and not out.exists()
