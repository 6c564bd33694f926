"""`gputopo watch` over the Python fake of pynvml: JSON lines, the Prometheus file, `-- COMMAND`."""

from __future__ import annotations

import json
import sys

import pytest
from fake_nvml import FakeNvml

from gputopo.sources import nvml_counters
from gputopo.sources.reference import load_reference


@pytest.fixture
def fake_host(monkeypatch):
    counters = {"gpus": {"0": {"nvlink_tx_bytes_per_s": {"3": 25e9}, "nvlink_replay_errors_per_s": {"1": 1000}}}}
    monkeypatch.setattr(nvml_counters, "reader",
                        lambda: nvml_counters.CounterReader(FakeNvml(load_reference("dgx-h100"), counters=counters)))


def test_json_lines_one_per_interval(cli, fake_host):
    result = cli("watch", "--interval", "0.05", "--count", "2", "--json")
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 2 and all(line["schema"] == "gputopo.watch/1" for line in lines)
    link3 = next(r for r in lines[1]["links"] if r["gpu"] == 0 and r["link"] == 3)
    assert link3["peer"] == "NVSwitch" and link3["tx_gbps"] == pytest.approx(25.0, rel=0.05)


def test_prometheus_file(cli, fake_host, tmp_path):
    target = tmp_path / "gputopo.prom"
    result = cli("watch", "-i", "0.05", "-c", "1", "--json", "--prometheus", str(target))
    assert result.exit_code == 0, result.output
    assert "gputopo_nvlink_tx_bytes_per_second{" in target.read_text()


def test_command_exit_code_and_summary(cli, fake_host):
    result = cli("watch", "-i", "0.05", "--json", "--planned-gpus", "0,1", "--", sys.executable, "-c",
                 "import time, sys; time.sleep(0.3); sys.exit(5)")
    assert result.exit_code == 5, result.output
    summary = json.loads(result.stdout.splitlines()[-1])
    assert summary["schema"] == "gputopo.watch-summary/1" and summary["exit_code"] == 5
    assert summary["plan"] == {"gpus": [0, 1], "verdict": "nvlink"}
    assert any(f["code"] == "watch-link-errors-rising" for f in summary["findings"])


@pytest.mark.parametrize("args", [["--interval", "0"], ["--count", "0"], ["--planned-gpus", "0,99", "-c", "1"],
                                  ["-c", "1", "--", "/nonexistent/command"]])
def test_user_errors_are_one_line_exit_2(cli, fake_host, args):
    result = cli("watch", *args)
    assert result.exit_code == 2 and result.output.count("gputopo: error:") == 1
