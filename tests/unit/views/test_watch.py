"""The live view fits 80 columns, the JSON line carries the schema and the documented keys."""

from __future__ import annotations

import io
import json

from rich.console import Console

from gputopo.analysis.watch.watch import Frame, LinkRate, PcieRate
from gputopo.analysis.watch.watch_summary import Summary
from gputopo.model import Finding
from gputopo.views.watch import bar, frame_json, json_line, live_table, summary_json, summary_text


def eight_gpus() -> Frame:
    gpus = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "utilization_percent": 100, "state": "moving"} for i in range(8)]
    links = [LinkRate(i, k, "NVSwitch", None, 24.5, 24.5, 25.0, 98.0) for i in range(8) for k in range(18)]
    pcie = [PcieRate(i, 12.3, 45.6, 63.0, 72.4) for i in range(8)]
    return Frame(1.0, gpus, links, pcie, findings=[Finding("warning", "watch-link-errors-rising", "GPU 0: \x1b[31m" + "x" * 300, [0])])


def test_live_view_fits_80_columns_and_is_terminal_safe():
    buffer = io.StringIO()
    Console(file=buffer, width=80, force_terminal=False).print(live_table(eight_gpus(), "title"))
    lines = buffer.getvalue().splitlines()
    assert len(lines) >= 10 and max(len(line) for line in lines) <= 80
    assert "\x1b" not in buffer.getvalue()
    assert lines[2].split()[0] == "0" and "441/441" in lines[2]


def test_bar():
    assert bar(None) == "?" * 10 and bar(0) == "·" * 10 and bar(100) == "█" * 10
    assert bar(0.1).startswith("█")  # any traffic shows


def test_json_line_is_one_line_with_schema():
    text = json_line(frame_json(eight_gpus(), "2026-01-01T00:00:00Z"))
    assert text.endswith("\n") and text.count("\n") == 1
    data = json.loads(text)
    assert data["schema"] == "gputopo.watch/1"
    assert set(data["links"][0]) >= {"gpu", "link", "peer", "tx_gbps", "rx_gbps", "percent_of_peak"}
    assert set(data["pcie"][0]) >= {"gpu", "tx_gbps", "rx_gbps", "percent_of_peak"}
    assert "errors" in data and data["findings"][0]["code"] == "watch-link-errors-rising"


def test_summary_json_and_text():
    summary = Summary()
    summary.add(eight_gpus())
    data = summary_json(summary, ["python", "train.py"], 3, {"gpus": [0, 1], "verdict": "nvlink"})
    assert data["schema"] == "gputopo.watch-summary/1" and data["exit_code"] == 3
    assert data["links"][0]["tx_bytes"] == 24_500_000_000 and data["links"][0]["peak_percent"] == 98.0
    text = summary_text(summary, 3, "the planned GPUs' NVLinks carried their traffic")
    assert text[0].startswith("watched 1.0 s") and "exited 3" in text[0]
    assert any("more links" in line for line in text)


def test_a_sampled_pcie_reading_is_said_as_such():
    from gputopo.views.watch import gpu_rows

    current = Frame(1.0, [{"index": 0, "name": "x", "utilization_percent": 5, "state": "moving"}],
                    pcie=[PcieRate(0, 2.0, 0.0, 63.0, 3.2, "sampled")])
    assert gpu_rows(current)[0][5] == "~2.0/0.0"
    assert frame_json(current, "t")["pcie"][0]["reading"] == "sampled"
    summary = Summary()
    summary.add(current)
    assert summary_json(summary, None, None, None)["pcie"][0]["reading"] == "sampled"
    assert any("(~20 ms samples, not counters)" in line for line in summary_text(summary, None, None))
