"""`gputopo train` for real: TensorFlow on logical CPU devices in child processes, tiny image folders.

Every run is a separate process (as in real use: the child gets its CUDA environment before TF
starts), so these tests never configure TensorFlow in the pytest process.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest
from image_folders import make_image_folder

from gputopo.train.checkpoints import latest_checkpoint_step

pytestmark = pytest.mark.tf
if importlib.util.find_spec("tensorflow") is None:  # TF runs only in the children: no need to import it here
    pytest.skip("needs TensorFlow (pip install 'gputopo[tf-cpu]')", allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def image_folder(tmp_path_factory) -> Path:
    return make_image_folder(tmp_path_factory.mktemp("images"))


def _json_run(cli, *args: str) -> dict:
    result = cli("train", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_mirrored_training_on_an_image_folder(cli, image_folder: Path, tmp_path: Path):
    ck = tmp_path / "ck"
    summary = _json_run(
        cli, "--cpu-devices", "2", "--data", str(image_folder), "--batch-size", "16", "--epochs", "3",
        "--steps-per-epoch", "12", "--learning-rate", "0.003", "--checkpoint-dir", str(ck), "--checkpoint-every", "10",
    )
    assert summary["status"] == "completed"
    assert (summary["steps"], summary["steps_run"], summary["total_steps"]) == (36, 36, 36)
    assert summary["replicas"] == 2 and summary["per_replica_batch_size"] == 8
    assert [d.rsplit("/", 1)[-1] for d in summary["devices"]] == ["device:CPU:0", "device:CPU:1"]
    # Loss goes down: from about ln(3) at the start to well below it, epoch after epoch.
    assert summary["initial_loss"] == pytest.approx(math.log(3), abs=0.3)
    losses = [epoch["loss"] for epoch in summary["history"]]
    assert len(losses) == 3 and losses[-1] < losses[0] and summary["final_loss"] < 0.5 * summary["initial_loss"]
    assert 0.0 <= summary["final_accuracy"] <= 1.0 and summary["final_accuracy"] > 0.6
    assert all(epoch["test_accuracy"] is not None for epoch in summary["history"])  # evaluated each epoch
    assert summary["test_accuracy"] == summary["history"][-1]["test_accuracy"]
    assert summary["examples_per_second"] > 0
    assert summary["checkpoint_path"] == str(ck / "ckpt-36") and latest_checkpoint_step(ck) == 36
    assert {p.name for p in ck.glob("*.index")} == {"ckpt-20.index", "ckpt-30.index", "ckpt-36.index"}


def test_killed_run_resumes_at_the_checkpoint_and_ends_at_the_requested_step(cli, image_folder: Path, tmp_path: Path):
    ck = tmp_path / "ck"
    options = ["--cpu-devices", "2", "--data", str(image_folder), "--batch-size", "16", "--steps-per-epoch", "200",
               "--learning-rate", "0.003", "--checkpoint-dir", str(ck), "--checkpoint-every", "5", "--no-eval"]
    plan = json.loads(cli("train", *options, "--dry-run", "--json").output)
    (process,) = plan["processes"]
    child = subprocess.Popen(process["command"], env={**os.environ, **process["env"]},
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while (latest_checkpoint_step(ck) or 0) < 30 and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert child.poll() is None, "the run ended before it could be killed"
        child.send_signal(signal.SIGKILL)  # no chance to save: only what is on disk survives
    finally:
        child.kill()
        child.wait()
    killed_at = latest_checkpoint_step(ck)
    assert killed_at is not None and 30 <= killed_at < 200
    summary = _json_run(cli, *options, "--resume")
    assert summary["start_step"] == killed_at
    assert summary["steps"] == 200 and summary["steps_run"] == 200 - killed_at
    # Progress was kept: the resumed run starts well below the untrained loss of ln(3).
    assert summary["initial_loss"] < 0.6 * math.log(3)
    assert latest_checkpoint_step(ck) == 200


def test_ctrl_c_saves_and_exits_cleanly(image_folder: Path, tmp_path: Path):
    ck = tmp_path / "ck"
    command = [sys.executable, "-m", "gputopo", "train", "--cpu-devices", "1", "--data", str(image_folder),
               "--batch-size", "8", "--steps-per-epoch", "100000", "--checkpoint-dir", str(ck),
               "--checkpoint-every", "10", "--json"]
    env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}  # as a user's shell has it
    returncode, stdout, stderr = _ctrl_c_when(command, lambda parent: latest_checkpoint_step(ck) is not None, env=env)
    assert returncode == 130, stderr[-2000:]
    summary = json.loads(stdout)
    assert summary["status"] == "interrupted" and summary["stopped_by"] == "SIGINT"
    assert 10 <= summary["steps"] < 100000
    assert latest_checkpoint_step(ck) == summary["steps"]  # saved exactly where it stopped
    assert "Traceback" not in stderr
    # TensorFlow's start-up chatter (absl's pre-init notice, the oneDNN INFO line) stays off the terminal.
    assert "absl::InitializeLog" not in stderr and "oneDNN custom operations" not in stderr, stderr[-2000:]


def test_two_local_workers_end_with_identical_weights(cli, tmp_path: Path):
    summary = _json_run(
        cli, "--cpu-devices", "1", "--strategy", "multi-worker", "--local-workers", "2", "--batch-size", "32",
        "--steps-per-epoch", "15", "--image-size", "16", "--checkpoint-dir", str(tmp_path / "ck"),
        "--checkpoint-every", "10", "--startup-timeout", "90",
    )
    assert summary["strategy"] == "multi-worker" and summary["workers"] == 2 and summary["replicas"] == 2
    assert summary["worker_steps"] == [15, 15]
    assert [d.split("/")[3] for d in summary["devices"]] == ["task:0", "task:1"]  # every worker's devices
    first, second = summary["worker_weights_sha256"]
    assert first == second and first == summary["weights_sha256"]
    assert summary["final_loss"] < summary["initial_loss"]
    assert latest_checkpoint_step(tmp_path / "ck") == 15
    assert not list((tmp_path / "ck").glob(".worker-*"))  # the other worker's throw-away copy is gone


def test_unreadable_image_is_one_clear_line(cli, tmp_path: Path):
    folder = make_image_folder(tmp_path / "d", classes=("a", "b"), train_per_class=2, test_per_class=1)
    broken = folder / "train" / "b" / "001.png"
    broken.write_bytes(broken.read_bytes()[:40])  # a PNG signature, then a truncated body
    result = cli("train", "--cpu-devices", "1", "--data", str(folder), "--batch-size", "2", "--no-checkpoint")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    error_lines = [line for line in lines if line.startswith("gputopo: error:")]
    assert len(error_lines) == 1 and "could not be decoded" in error_lines[0], result.output
    assert f"image {broken} could not be decoded" in error_lines[0], result.output  # the file is named
    assert "Traceback" not in result.output


def test_an_unreadable_test_image_is_one_clear_line_at_evaluation(tmp_path: Path):
    folder = make_image_folder(tmp_path / "d", classes=("a", "b"), train_per_class=2, test_per_class=1)
    broken = folder / "test" / "a" / "000.png"
    broken.write_bytes(broken.read_bytes()[:40])  # found only when the first epoch is evaluated
    result = subprocess.run(
        [sys.executable, "-m", "gputopo", "train", "--cpu-devices", "1", "--data", str(folder), "--batch-size", "2",
         "--steps-per-epoch", "2", "--no-checkpoint"],
        cwd=REPO, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 2, result.stderr[-2000:]
    error_lines = [line for line in result.stderr.splitlines() if line.startswith("gputopo: error:")]
    assert len(error_lines) == 1 and "could not be decoded" in error_lines[0], result.stderr[-2000:]
    assert f"image {broken} could not be decoded" in error_lines[0], result.stderr[-2000:]
    assert "Traceback" not in result.stderr


def test_parameter_server_mode_completes_its_steps(cli, tmp_path: Path):
    summary = _json_run(
        cli, "--cpu-devices", "1", "--strategy", "parameter-server", "--workers", "2", "--ps", "1",
        "--batch-size", "16", "--steps-per-epoch", "20", "--image-size", "16", "--learning-rate", "0.003",
        "--checkpoint-dir", str(tmp_path / "ck"), "--checkpoint-every", "10",
    )
    assert summary["strategy"] == "parameter-server" and summary["status"] == "completed"
    assert len(summary["devices"]) == 2 and len(summary["parameter_servers"]) == 1
    assert (summary["steps"], summary["steps_run"]) == (20, 20)
    assert summary["final_loss"] < summary["initial_loss"]
    assert summary["test_accuracy"] is not None
    assert latest_checkpoint_step(tmp_path / "ck") == 20


def test_scaling_table_runs_each_size_in_its_own_process(cli):
    result = cli("train", "--cpu-devices", "2", "--batch-size", "16", "--scaling", "1,2", "--scaling-steps", "8",
                 "--image-size", "16", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = data["scaling"]
    assert [row["devices"] for row in rows] == [1, 2]
    assert [row["global_batch_size"] for row in rows] == [8, 16] and data["per_replica_batch_size"] == 8
    one, two = (row["examples_per_second"] for row in rows)
    assert one > 0 and two > 0
    assert rows[0]["scaling_efficiency"] == pytest.approx(1.0)
    assert rows[1]["scaling_efficiency"] == pytest.approx(two / (2 * one))
    assert rows[1]["speedup"] == pytest.approx(two / one)


def _worker_pid(checkpoint_dir: Path, task_index: int) -> int | None:
    """The pid of the training child of this test's run with ``--task-index`` (read from /proc)."""
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gputopo.train.child" in args and str(checkpoint_dir).encode() in args:
            index = args[args.index(b"--task-index") + 1] if b"--task-index" in args else b"0"
            if index == str(task_index).encode():
                return int(cmdline.parent.name)
    return None


def test_a_run_leaves_nothing_in_the_temporary_folder(tmp_path: Path):
    """TensorFlow's AutoGraph writes ``__autograph_generated_file*.py`` into the temporary folder
    and never removes them (a test run left 431): each child's TMPDIR is its own, inside the run's
    folder, which goes with the run."""
    temp = tmp_path / "temp"
    temp.mkdir()
    result = subprocess.run(
        [sys.executable, "-m", "gputopo", "train", "--cpu-devices", "1", "--batch-size", "8", "--steps-per-epoch", "3",
         "--image-size", "16", "--no-eval", "--no-checkpoint", "--json"],
        cwd=REPO, capture_output=True, text=True, timeout=180, env={**os.environ, "TMPDIR": str(temp)},
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["steps"] == 3
    assert sorted(p.name for p in temp.rglob("*")) == []


def test_a_killed_worker_is_reported_and_resume_continues(tmp_path: Path):
    ck = tmp_path / "ck"
    options = ["train", "--cpu-devices", "1", "--strategy", "multi-worker", "--local-workers", "2",
               "--batch-size", "16", "--steps-per-epoch", "150", "--image-size", "16", "--no-eval",
               "--checkpoint-dir", str(ck), "--checkpoint-every", "5", "--startup-timeout", "90", "--json"]
    # As a user runs it: TF_CPP_MIN_LOG_LEVEL as they set it (unset), not as this test process's TensorFlow set it.
    user_env = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    parent = subprocess.Popen([sys.executable, "-m", "gputopo", *options], cwd=REPO, env=user_env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while (latest_checkpoint_step(ck) or 0) < 10 and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        pid = _worker_pid(ck, 1)
        assert pid is not None and parent.poll() is None, "worker 1 was not found running"
        os.kill(pid, signal.SIGKILL)
        stdout, stderr = parent.communicate(timeout=60)
    finally:
        parent.kill()
        parent.wait()
    assert parent.returncode == 2 and stdout == ""
    error = [line for line in stderr.splitlines() if line.startswith("gputopo: error:")]
    assert len(error) == 1 and "worker 1 (127.0.0.1:" in error[0] and "was killed by SIGKILL" in error[0], stderr
    saved = latest_checkpoint_step(ck)
    assert f"last checkpoint is at step {saved}" in error[0] and "--resume" in error[0]
    assert "Traceback" not in stderr
    # TensorFlow's native errors of the surviving worker (gRPC, collectives) stay in its log file:
    # none is printed before gputopo's one line.
    assert not [line for line in stderr.splitlines() if " E tensorflow/" in line or line[:1] == "E" and line[1:5].isdigit()], stderr
    resumed = subprocess.run([sys.executable, "-m", "gputopo", *options, "--resume"], cwd=REPO,
                             capture_output=True, text=True, timeout=180)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    summary = json.loads(resumed.stdout)
    assert summary["start_step"] == saved and summary["steps"] == 150 and summary["worker_steps"] == [150, 150]
    assert len(set(summary["worker_weights_sha256"])) == 1


def test_a_checkpoint_that_cannot_be_written_mid_run_is_one_clear_error(tmp_path: Path):
    from types import SimpleNamespace

    from gputopo.errors import TrainingFailed
    from gputopo.train.child.common import TrainingState
    from gputopo.train.config import TrainConfig

    class OpError(Exception):
        message = "/data/ck: No space left on device"

    def full_disk(checkpoint_number: int) -> None:
        raise OpError()

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-40"\n')
    manager = SimpleNamespace(save=full_disk, directory=str(tmp_path))
    state = TrainingState(None, None, SimpleNamespace(assign=lambda step: None), None, manager, 0)
    fake_tf = SimpleNamespace(errors=SimpleNamespace(OpError=OpError))
    with pytest.raises(TrainingFailed, match=r"cannot write the checkpoint of step 50 to .*No space left.*step 40"):
        state.save(fake_tf, 50, TrainConfig(checkpoint_dir=str(tmp_path)))


def test_ctrl_c_stops_a_scaling_table_instead_of_going_on_to_the_next_size():
    command = [sys.executable, "-m", "gputopo", "train", "--cpu-devices", "2", "--batch-size", "16",
               "--scaling", "1,2", "--scaling-steps", "100000", "--image-size", "16", "--json"]
    # Once the first (1-device) run is under way; 2 s more and its stop handler is surely installed.
    returncode, stdout, stderr = _ctrl_c_when(command, lambda parent: _has_child(parent.pid), settle_s=2.0)
    assert returncode == 130, stderr[-2000:]
    data = json.loads(stdout)
    assert data["status"] == "interrupted" and data["scaling"] == []  # the 2-device run never started
    assert "gputopo: error: interrupted: scaling stopped" in stderr and "Traceback" not in stderr


def _ctrl_c_when(
    command: list[str], ready: Callable[[subprocess.Popen], bool], settle_s: float = 0.0, env: dict | None = None
) -> tuple[int, str, str]:
    """Run ``gputopo`` and press Ctrl-C once ``ready(process)`` (SIGINT to gputopo only: it forwards
    it to the training child); returns its exit status, stdout and stderr."""
    parent = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + 120
        while not ready(parent) and parent.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(settle_s)
        parent.send_signal(signal.SIGINT)
        stdout, stderr = parent.communicate(timeout=60)
    finally:
        parent.kill()
        parent.wait()
    return parent.returncode, stdout, stderr


def _has_child(parent_pid: int) -> bool:
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == parent_pid:
            return True
    return False


def test_watch_records_link_traffic_beside_a_real_run(cli, tmp_path: Path, monkeypatch):
    """TensorFlow trains in its children while the parent samples the (Python fake) NVML counters."""
    from fake_nvml import FakeNvml

    from gputopo.sources.host import nvml_counters
    from gputopo.sources.reference import load_reference

    counters = {"gpus": {"0": {"nvlink_tx_bytes_per_s": {"0": 10e9}}}}
    monkeypatch.setattr(nvml_counters, "reader",
                        lambda: nvml_counters.CounterReader(FakeNvml(load_reference("dgx1"), counters=counters)))
    target = tmp_path / "watch.jsonl"
    summary = _json_run(cli, "--cpu-devices", "2", "--batch-size", "16", "--steps-per-epoch", "3", "--no-eval",
                        "--no-checkpoint", "--watch-file", str(target))
    assert summary["status"] == "completed" and summary["watch"]["recorded"] is True
    frames = [json.loads(line) for line in target.read_text().splitlines()]
    assert len(frames) == summary["watch"]["frames"] >= 1 and all(f["schema"] == "gputopo.watch/1" for f in frames)
    assert any(t["gpu"] == 0 and t["link"] == 0 and t["tx_bytes"] > 0 for t in summary["watch"]["links"])
