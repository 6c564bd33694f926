"""`gputopo bench-p2p` end to end: a real child process with --json and --allreduce, --save read
back as a Topology, Ctrl-C keeping partial results, and garbage options giving exit code 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO

from gputopo.model import Topology

pytestmark = pytest.mark.tf

# bench-p2p sets these for TensorFlow (setdefault) when it runs in this process; undo that so that
# other tests' child processes do not inherit them.
_TF_SETTINGS = ("CUDA_DEVICE_ORDER", "TF_CPU_ALLOCATOR_USE_BFC")


@pytest.fixture(autouse=True)
def _keep_environment():
    saved = {name: os.environ.get(name) for name in _TF_SETTINGS}
    yield
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def test_child_process_json_with_allreduce():
    pytest.importorskip("tensorflow")
    proc = subprocess.run(
        [sys.executable, "-m", "gputopo", "bench-p2p", "--cpu-devices", "4", "--size", "1MiB", "--repeat", "2",
         "--warmup", "1", "--min-sample-ms", "2", "--allreduce", "--json"],
        capture_output=True, text=True, timeout=300, cwd=REPO, env=_child_env(),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout)
    assert "gputopo.bench-p2p/1" == data["schema"]
    assert data["device_kind"] == "CPU" and "host memory" in data["measured"]
    assert data["sizes_bytes"] == [1024 * 1024] and data["repeats"] == 2
    assert [d["index"] for d in data["devices"]] == [0, 1, 2, 3]
    assert len(data["pairs"]) == 12
    for pair in data["pairs"]:
        assert pair["errors"] == []
        # Units, not speed: GB/s (a bytes/s or GiB/ms mix-up is a factor of 1000 or more); the floor
        # leaves room for CI's 2 shared cores, where contention has slowed small copies tenfold.
        assert 0.005 < pair["gbps"] < 200 and 0.005 < pair["bidir_gbps"] < 400
        assert pair["latency_us"] > 0
        assert pair["expected_gbps"] is None  # nothing to expect of host memory
    ops = {r["cross_device_ops"].split(" ")[0] for r in data["allreduce"]}
    assert {"HierarchicalCopyAllReduce", "ReductionToOneDevice"} <= ops
    assert "NcclAllReduce" not in ops  # GPUs only
    for r in data["allreduce"]:
        assert r["error"] is None and r["devices"] == [0, 1, 2, 3]
        # nccl-tests: busbw = algbw * 2(n-1)/n, here n = 4.
        assert r["busbw_gbps"]["median"] == pytest.approx(r["algbw_gbps"]["median"] * 1.5)
        assert r["time_us"]["median"] > 0


def test_save_writes_measurements_into_a_snapshot(cli, tf_cpu_devices, tmp_path):
    target = tmp_path / "measured.json"
    result = cli("bench-p2p", "--cpu-devices", "4", "--machine", "two-socket-4gpu", "--devices", "0,1,2",
                 "--size", "256KiB", "--repeat", "2", "--warmup", "0", "--min-sample-ms", "1",
                 "--save", str(target))  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "host memory" in result.output
    from gputopo.sources import TopologyRequest, resolve

    topo = resolve(TopologyRequest(from_files=(str(target),)))  # what `recommend --from` reads
    assert topo.gpu_indices == [0, 1, 2, 3]  # the base topology, with figures added
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        m = topo.link(a, b).measured
        assert m is not None and m.device_kind == "CPU"
        assert 0.005 < m.a_to_b_gbps < 200 and 0.005 < m.b_to_a_gbps < 200  # units (see above)
        assert m.latency_us > 0 and m.size_bytes == 256 * 1024 and m.repeats == 2
    assert topo.link(0, 3).measured is None  # GPU 3 was not chosen
    assert any(f.code == "measured-host-memory" for f in topo.diagnostics)


def test_a_save_that_fails_after_measuring_still_shows_the_figures(cli, tf_cpu_devices, tmp_path, monkeypatch):
    import gputopo.sources.snapshot
    from gputopo.errors import InputError

    def disk_full(topology, path):
        raise InputError(f"cannot write {path}: No space left on device")

    monkeypatch.setattr(gputopo.sources.snapshot, "save_snapshot", disk_full)
    result = cli("bench-p2p", "--cpu-devices", "2", "--size", "4KiB", "--repeat", "1", "--warmup", "0",
                 "--min-sample-ms", "1", "--json", "--save", str(tmp_path / "m.json"))  # fmt: skip
    assert result.exit_code == 2
    assert "gputopo: error: cannot write" in result.output and "No space left" in result.output
    figures = json.loads(result.stdout)  # printed before the save was tried
    assert len(figures["pairs"]) == 2 and all(pair["gbps"] > 0 for pair in figures["pairs"])


def test_ctrl_c_prints_and_saves_partial_results(cli, tf_cpu_devices, tmp_path, monkeypatch):
    from gputopo.bench import engine

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.CopyBench, "measure_bidir", interrupted)
    target = tmp_path / "partial.json"
    result = cli("bench-p2p", "--cpu-devices", "3", "--size", "64KiB", "--repeat", "1", "--warmup", "0",
                 "--min-sample-ms", "1", "--save", str(target))  # fmt: skip
    assert result.exit_code == 130
    assert "interrupted" in result.output and "Unidirectional copy GB/s" in result.output
    topo = Topology.from_dict(json.loads(target.read_text()))
    assert topo.source == "bench-p2p" and "host memory" in topo.label
    measured = topo.link(0, 1).measured
    assert measured.a_to_b_gbps > 0 and measured.bidirectional_gbps is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cpu-devices", "0"], "gputopo: error: --cpu-devices must be at least 1"),
        (["--cpu-devices", "-2"], "gputopo: error: --cpu-devices must be at least 1"),
        (["--cpu-devices", "abc"], "Invalid value"),  # typer's own usage error, also exit 2
        (["--cpu-devices", "2", "--size", "12XB"], "gputopo: error: bad size '12XB'"),
        (["--cpu-devices", "2", "--size", "0"], "gputopo: error: bad size '0'"),
        (["--cpu-devices", "2", "--sizes", "1MiB:1KiB"], "gputopo: error: bad --sizes"),
        (["--cpu-devices", "2", "--size", "1MiB", "--sizes", "1KiB:2KiB"], "gputopo: error: give either"),
        (["--cpu-devices", "2", "--repeat", "0"], "gputopo: error: --repeat"),
        (["--cpu-devices", "2", "--timeout", "0"], "gputopo: error: --timeout"),
        (["--cpu-devices", "2", "--timeout", "inf"], "gputopo: error: --timeout"),
        (["--cpu-devices", "2", "--min-sample-ms", "inf"], "gputopo: error: --min-sample-ms"),
        (["--cpu-devices", "2", "--min-sample-ms", "nan"], "gputopo: error: --min-sample-ms"),
        (["--cpu-devices", "2", "--devices", "a,b"], "gputopo: error: bad --devices"),
        (["--cpu-devices", "2", "--save", "/nonexistent-folder/x.json"], "gputopo: error: cannot write"),
        (["--cpu-devices", "2", "--save", "/"], "gputopo: error: cannot write /: it is a folder"),
        (["--cpu-devices", "2", "--machine", "no-such-machine"], "gputopo: error:"),
        (["--cpu-devices", "1000"], "gputopo: error: --cpu-devices must be at most 64"),
        (["--cpu-devices", "2", "--gpus", "0-99"], "9900 ordered pairs to measure, more than 4096; measure a part"),
        (["--cpu-devices", "2", "--save", "/dev/null"], "cannot write /dev/null: it is a character device"),
    ],
)
def test_garbage_options_exit_2_before_tensorflow(cli, monkeypatch, args, message):
    import gputopo.tfruntime

    def no_tensorflow():
        raise AssertionError("garbage options must be refused before TensorFlow is imported")

    monkeypatch.setattr(gputopo.tfruntime, "import_tensorflow", no_tensorflow)
    result = cli("bench-p2p", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--cpu-devices", "4", "--gpus", "0,9"], "no GPU 9"),
        (["--cpu-devices", "4", "--gpus", "1"], "at least two devices"),
        (["--gpus", "0,1"], "TensorFlow sees no GPU"),
        (["--cpu-devices", "4", "--machine", "workstation-2x4090"], "more than the 2 GPUs"),
    ],
)
def test_unknown_devices_exit_2(cli, tf_cpu_devices, args, message):
    result = cli("bench-p2p", *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_cli_import_does_not_import_tensorflow():
    proc = subprocess.run(
        [sys.executable, "-c", "import sys, gputopo.cli; print('tensorflow' in sys.modules)"],
        capture_output=True, text=True, cwd=REPO, env=_child_env(), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


def test_a_fifo_save_target_is_refused_before_measuring(cli, monkeypatch, tmp_path):
    import gputopo.tfruntime

    def no_tensorflow():
        raise AssertionError("a bad --save target must be refused before TensorFlow is imported")

    monkeypatch.setattr(gputopo.tfruntime, "import_tensorflow", no_tensorflow)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = cli("bench-p2p", "--cpu-devices", "2", "--save", str(fifo))
    assert result.exit_code == 2, result.output
    assert f"cannot write {fifo}: it is a named pipe (FIFO)" in result.output


def test_failed_measurements_exit_1_after_showing_and_saving_the_rest(cli, tf_cpu_devices, tmp_path, monkeypatch):
    from gputopo.bench import engine

    def refused(*args, **kwargs):
        raise engine.BenchStepError("copy refused")

    monkeypatch.setattr(engine.CopyBench, "measure_bidir", refused)
    target = tmp_path / "m.json"
    result = cli("bench-p2p", "--cpu-devices", "2", "--size", "4KiB", "--repeat", "1", "--warmup", "0",
                 "--min-sample-ms", "1", "--json", "--save", str(target))  # fmt: skip
    assert result.exit_code == 1, result.output
    figures = json.loads(result.stdout)  # printed first
    assert all(pair["gbps"] > 0 for pair in figures["pairs"])
    assert target.exists()
    error_lines = [line for line in result.output.splitlines() if line.startswith("gputopo: error:")]
    assert len(error_lines) == 1 and "1 measurement failed (first: CPU 0 <-> 1 4 KiB: copy refused)" in error_lines[0]

    monkeypatch.setattr(engine.CopyBench, "measure_uni", refused)  # now every figure fails
    result = cli("bench-p2p", "--cpu-devices", "2", "--size", "4KiB", "--repeat", "1", "--warmup", "0",
                 "--min-sample-ms", "1")  # fmt: skip
    assert result.exit_code == 1, result.output
    assert "5 measurements failed" in result.output


_SIGTERM_SCRIPT = """
import pathlib, sys
from gputopo.bench import run
marker = pathlib.Path(sys.argv[1])
real_step = run._PairRun.step
def step(self, description, *args, **kwargs):
    if self.result.pairs:  # at least one pair measured: tell the test, then go on slowly
        marker.touch()
    return real_step(self, description, *args, **kwargs)
run._PairRun.step = step
from gputopo.cli import main
sys.argv = ["gputopo", "bench-p2p", *sys.argv[2:]]
main()
"""


def test_sigterm_prints_and_saves_the_partial_figures_and_exits_143(tmp_path):
    import signal
    import time

    marker, target = tmp_path / "measuring", tmp_path / "partial.json"
    proc = subprocess.Popen(
        [sys.executable, "-c", _SIGTERM_SCRIPT, str(marker), "--cpu-devices", "4", "--sizes", "4KiB,8KiB,16KiB,32KiB",
         "--repeat", "50", "--min-sample-ms", "20", "--json", "--save", str(target)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO, env=_child_env(),
    )  # fmt: skip
    deadline = time.monotonic() + 240
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), proc.communicate(timeout=60)
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 143, stderr[-3000:]
    data = json.loads(stdout)
    assert data["interrupted"] is True and "interrupted (SIGTERM)" in " ".join(data["notes"])
    assert any(pair["gbps"] for pair in data["pairs"])
    assert "interrupted by SIGTERM: the results above are partial (saved to" in stderr and "Traceback" not in stderr
    assert Topology.from_dict(json.loads(target.read_text())).source == "bench-p2p"
