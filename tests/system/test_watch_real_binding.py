"""`gputopo watch` through NVIDIA's real binding on the fake libnvidia-ml.so.1, whose counters move
as GPUTOPO_FAKE_NVML_COUNTERS scripts them (tests/fake_nvml_counters.py describes both fakes)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_process_ends
from system.test_fake_libnvml import build_library  # a sibling test module (tests/ is on sys.path)

from gputopo.sources.reference import load_reference


@pytest.fixture(scope="module")
def libnvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("fake-nvml-watch"))


def watch(lib: Path, tmp: Path, machine: str, counters: dict, *args: str, utilization: dict | None = None):
    data = load_reference(machine).to_dict()
    if utilization:
        data["fake_nvml"] = {"gpus": {gpu: {"utilization": {"gpu": u, "memory": 0}} for gpu, u in utilization.items()}}
    (tmp / "snapshot.json").write_text(json.dumps(data))
    (tmp / "counters.json").write_text(json.dumps({"gpus": counters}))
    env = {**os.environ, "LD_LIBRARY_PATH": str(lib), "PYTHONPATH": str(REPO),
           "GPUTOPO_FAKE_NVML_SNAPSHOT": str(tmp / "snapshot.json"), "GPUTOPO_FAKE_NVML_COUNTERS": str(tmp / "counters.json")}
    return subprocess.run([sys.executable, "-m", "gputopo", "watch", *args], env=env, cwd=tmp,
                          capture_output=True, text=True, timeout=120)


def last_frame(result) -> dict:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.splitlines()[-1])


def test_dgx_h100_scripted_25_gbps_on_link_3(libnvml, tmp_path):
    frame = last_frame(watch(libnvml, tmp_path, "dgx-h100", {"0": {"nvlink_tx_bytes_per_s": {"3": 25e9}}},
                             "-i", "0.2", "-c", "2", "--json"))
    link = next(r for r in frame["links"] if r["gpu"] == 0 and r["link"] == 3)
    assert link["tx_gbps"] == pytest.approx(25.0, rel=0.05)
    assert link["percent_of_peak"] == pytest.approx(100.0, rel=0.05)  # NVLink4: 25 GB/s per link and direction
    assert link["peer"] == "NVSwitch"
    other = next(r for r in frame["links"] if r["gpu"] == 0 and r["link"] == 2)
    assert other["tx_gbps"] == 0


def test_dgx1_reports_each_links_peer_gpu(libnvml, tmp_path):
    frame = last_frame(watch(libnvml, tmp_path, "dgx1", {}, "-i", "0.1", "-c", "1", "--json"))
    peers = {r["peer_gpu"] for r in frame["links"] if r["gpu"] == 0}
    assert peers == {1, 2, 3, 4}
    assert all(r["peer"] == f"GPU {r['peer_gpu']}" for r in frame["links"])


def test_unsupported_and_zero_under_load_told_apart(libnvml, tmp_path):
    counters = {"0": {"unsupported": ["nvlink_throughput", "pcie_count", "pcie_throughput"]}}
    frame = last_frame(watch(libnvml, tmp_path, "dgx-h100", counters, "-i", "0.1", "-c", "1", "--json",
                             utilization={"0": 95, "1": 95}))
    states = {g["index"]: g["state"] for g in frame["gpus"]}
    assert states[0] == "not-supported" and states[1] == "zero-while-busy" and states[2] == "idle"
    codes = {f["code"]: f["gpus"] for f in frame["findings"]}
    assert codes["watch-counters-unsupported"] == [0] and codes["watch-counters-zero-while-busy"] == [1]


def test_rising_error_counter_is_a_finding(libnvml, tmp_path):
    frame = last_frame(watch(libnvml, tmp_path, "dgx-h100", {"2": {"nvlink_replay_errors_per_s": {"5": 100}}},
                             "-i", "0.2", "-c", "1", "--json"))
    finding = next(f for f in frame["findings"] if f["code"] == "watch-link-errors-rising")
    assert finding["gpus"] == [2] and finding["kind"] == "fault" and "NVLink 5 replay" in finding["message"]


def test_command_exit_code_is_returned(libnvml, tmp_path):
    result = watch(libnvml, tmp_path, "dgx1", {"0": {"nvlink_tx_bytes_per_s": {"0": 10e9}}}, "-i", "0.1", "--",
                   sys.executable, "-c", "import time, sys; time.sleep(0.4); print('child says hi'); sys.exit(3)")
    assert result.returncode == 3, result.stderr
    assert "child says hi" in result.stdout
    assert "the command exited 3" in result.stderr and "GPU 0 NVLink 0 -> GPU" in result.stderr


def test_both_fakes_answer_alike(libnvml, tmp_path):
    """The same script through the C fake (real binding) and the Python fake: the same links, peers
    and states, and rates within 5%."""
    from fake_nvml import FakeNvml

    from gputopo.analysis.watch.watch import frame
    from gputopo.sources.host.nvml_counters import CounterReader

    counters = {"1": {"nvlink_rx_bytes_per_s": {"0": 8e9}, "pcie_tx_bytes_per_s": 3e9, "unsupported": ["nvlink_errors"]}}
    real = last_frame(watch(libnvml, tmp_path, "dgx1", counters, "-i", "0.2", "-c", "1", "--json"))
    clock = [100.0]
    reader = CounterReader(FakeNvml(load_reference("dgx1"), counters={"gpus": counters}, clock=lambda: clock[0]))
    gpus = reader.open()
    before = reader.sample()
    clock[0] += 0.2
    python = frame(gpus, before, reader.sample())
    reader.close()
    assert [(r["gpu"], r["link"], r["peer"]) for r in real["links"]] == [(r.gpu, r.link, r.peer) for r in python.links]
    assert [g["state"] for g in real["gpus"]] == [g["state"] for g in python.gpus]
    for mine, theirs in zip(python.links, real["links"]):
        assert theirs["rx_gbps"] == pytest.approx(mine.rx_gbps, rel=0.05, abs=1e-3)
    assert real["pcie"][1]["tx_gbps"] == pytest.approx(python.pcie[1].tx_gbps, rel=0.05)


def test_sigterm_to_gputopo_stops_a_command_that_ignores_sigterm(libnvml, tmp_path):
    """Security review: `watch -- bash -c 'trap "" TERM; sleep 300'` outlived a SIGTERM'd gputopo (the
    kernel's parent-death SIGTERM is ignorable). gputopo now stops it as Ctrl-C does: SIGTERM, then
    SIGKILL after the grace; and a bad --prometheus target is refused before the command starts."""
    import signal
    import time

    data = load_reference("dgx1").to_dict()
    (tmp_path / "snapshot.json").write_text(json.dumps(data))
    (tmp_path / "counters.json").write_text(json.dumps({"gpus": {}}))
    env = {**os.environ, "LD_LIBRARY_PATH": str(libnvml), "PYTHONPATH": str(REPO),
           "GPUTOPO_FAKE_NVML_SNAPSHOT": str(tmp_path / "snapshot.json"),
           "GPUTOPO_FAKE_NVML_COUNTERS": str(tmp_path / "counters.json")}
    pid_file = tmp_path / "child.pid"
    script = f'trap "" TERM; echo $$ > {pid_file}; sleep 300'
    parent = subprocess.Popen([sys.executable, "-m", "gputopo", "watch", "-i", "0.5", "--json", "--", "bash", "-c", script],
                              env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        child = int(pid_file.read_text())
        parent.send_signal(signal.SIGTERM)
        parent.wait(60)
        assert_process_ends(child, 30, "the watched command outlived gputopo")
        assert parent.returncode == 143 and "Traceback" not in parent.stderr.read()
    finally:
        parent.kill()
    ran = tmp_path / "ran"
    refused = subprocess.run([sys.executable, "-m", "gputopo", "watch", "--prometheus", "/dev/null", "--", "touch", str(ran)],
                             env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and not ran.exists()


def test_pcie_sampled_where_the_byte_counters_are_not_supported(libnvml, tmp_path):
    counters = {"0": {"pcie_tx_bytes_per_s": 4e9, "unsupported": ["pcie_count"]}}
    frame = last_frame(watch(libnvml, tmp_path, "dgx-h100", counters, "-i", "0.1", "-c", "1", "--json"))
    assert frame["pcie"][0]["reading"] == "sampled" and frame["pcie"][0]["tx_gbps"] == pytest.approx(4.0, rel=0.01)
    assert frame["pcie"][1]["reading"] == "counters"


def test_planned_gpus_idle_with_p2p_off_through_the_real_binding(libnvml, tmp_path, monkeypatch):
    monkeypatch.setenv("NCCL_P2P_DISABLE", "1")
    counters = {"0": {"pcie_tx_bytes_per_s": 30e9}, "1": {"pcie_rx_bytes_per_s": 30e9}}
    result = watch(libnvml, tmp_path, "dgx-h100", counters, "-i", "0.1", "--json", "--planned-gpus", "0,1", "--",
                   sys.executable, "-c", "import time; time.sleep(0.5)")
    summary = last_frame(result)
    assert summary["plan"]["verdict"] == "pcie" and summary["plan"]["causes"] == ["watch-plan-p2p-off-by-setting"]
