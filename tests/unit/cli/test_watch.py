"""`gputopo watch` over the Python fake of pynvml: JSON lines, the Prometheus file, `-- COMMAND`."""

from __future__ import annotations

import json
import sys

import pytest
from cluster_plans import cluster_plan, host_entry, write_plan
from fake_nvml import FakeNvml

from gputopo.sources.host import nvml_counters
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
    assert summary["plan"]["gpus"] == [0, 1] and summary["plan"]["verdict"] == "nvlink"
    assert summary["plan"]["source"] == "--planned-gpus" and summary["plan"]["link_errors"] > 0
    assert any(f["code"] == "watch-link-errors-rising" for f in summary["findings"])


def fake_counters(monkeypatch, counters, **knobs):
    monkeypatch.setattr(nvml_counters, "reader", lambda: nvml_counters.CounterReader(
        FakeNvml(load_reference("dgx-h100"), counters={"gpus": counters}, **knobs)))


def last_summary(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout.splitlines()[-1])


def test_plan_file_of_one_host_and_p2p_off_in_the_environment(cli, monkeypatch, tmp_path):
    fake_counters(monkeypatch, {"0": {"pcie_tx_bytes_per_s": 40e9}, "1": {"pcie_rx_bytes_per_s": 40e9}})
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    entry = host_entry("n1", 0, ["n1:12345"], [0, 1])
    plan = write_plan(tmp_path / "plan.json", cluster_plan(["n1"], entries=[{"gpus": [0, 1]}]) | {"hosts": [entry]})
    summary = last_summary(cli("watch", "-i", "0.05", "-c", "3", "--json", "--plan", plan))
    assert summary["plan"]["gpus"] == [0, 1] and summary["plan"]["verdict"] == "pcie"
    assert summary["plan"]["source"].startswith("plan file") and "(host n1)" in summary["plan"]["source"]
    assert summary["plan"]["causes"] == ["watch-plan-p2p-off-by-setting"]
    idle = next(f for f in summary["findings"] if f["code"] == "watch-plan-nvlink-idle")
    assert idle["caused_by"] == "watch-plan-p2p-off-by-setting"
    text = cli("watch", "-i", "0.05", "-c", "3", "--plan", plan)
    assert "NCCL_P2P_DISABLE=1" in text.stderr and "plan: GPUs 0,1 (plan file" in text.stderr


def test_plan_file_without_this_host_is_one_line(cli, fake_host, tmp_path):
    plan = write_plan(tmp_path / "plan.json", cluster_plan(["elsewhere-a", "elsewhere-b"]))
    result = cli("watch", "-c", "1", "--plan", plan)
    assert result.exit_code == 2 and "no entry for this host" in result.output


def test_gpus_k_is_the_group_recommend_picks_and_traffic_elsewhere(cli, monkeypatch, tmp_path):
    from gputopo.analysis.recommend import recommend

    picked = sorted(recommend(load_reference("dgx-h100"), 2, alternatives=0).groups[0].gpus)
    others = [str(g) for g in range(8) if g not in picked][:2]
    fake_counters(monkeypatch, {g: {"nvlink_tx_bytes_per_s": {"0": 40e9}} for g in others})
    snapshot = tmp_path / "snap.json"
    snapshot.write_text(load_reference("dgx-h100").to_json_text())
    summary = last_summary(cli("watch", "-i", "0.05", "-c", "2", "--json", "--from", str(snapshot), "--gpus", "2"))
    plan = summary["plan"]
    assert plan["gpus"] == picked and plan["source"] == f"recommend --gpus 2 of {snapshot}"
    assert plan["verdict"] == "idle" and plan["causes"] == ["watch-plan-traffic-elsewhere"]


def test_a_planned_gpu_with_a_link_down(cli, monkeypatch):
    fake_counters(monkeypatch, {"0": {"pcie_tx_bytes_per_s": 40e9}}, inactive_links={0: 2})
    summary = last_summary(cli("watch", "-i", "0.05", "-c", "2", "--json", "--planned-gpus", "0,1"))
    assert summary["plan"]["verdict"] == "pcie" and summary["plan"]["causes"] == ["watch-plan-nvlink-down"]


@pytest.mark.parametrize("args", [["--interval", "0"], ["--count", "0"], ["--planned-gpus", "0,99", "-c", "1"],
                                  ["-c", "1", "--", "/nonexistent/command"], ["--planned-gpus", "0", "--gpus", "2"],
                                  ["-c", "1", "--from", "x.json"]])
def test_user_errors_are_one_line_exit_2(cli, fake_host, args):
    result = cli("watch", *args)
    assert result.exit_code == 2 and result.output.count("gputopo: error:") == 1


def test_a_failed_prometheus_write_never_stops_the_watched_command(cli, fake_host, tmp_path, monkeypatch):
    """Review 3: the metrics file's folder filling up (or removed) mid-run ended watch with exit 3 and
    killed the training it watched; now each failure is said once on stderr and the command runs on."""
    from gputopo import fileio
    from gputopo.errors import OutputError

    target = tmp_path / "gputopo.prom"
    real = fileio.atomic_write_text
    calls = []

    def flaky(path, text):
        calls.append(path)
        if len(calls) in (2, 3):
            raise OutputError(f"cannot write {path}: No space left on device")
        return real(path, text)

    monkeypatch.setattr(fileio, "atomic_write_text", flaky)
    done = tmp_path / "done"
    result = cli("watch", "-i", "0.05", "--json", "--prometheus", str(target), "--", sys.executable, "-c",
                 f"import time, pathlib; time.sleep(0.6); pathlib.Path({str(done)!r}).write_text('ok')")
    assert result.exit_code == 0, result.output
    assert done.exists() and len(calls) > 3
    assert result.stderr.count("No space left on device") == 1, result.stderr
    assert "gputopo_" in target.read_text()
