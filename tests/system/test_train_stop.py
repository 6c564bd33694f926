"""A stop that reaches the workers of a synchronous multi-worker run at different steps (Slurm's
scancel and job time limits send SIGTERM to every task, then SIGKILL after KillWait; the tasks see
it whenever they see it): every worker stops at one agreed step, saves it, and exits 130.

Before, the worker that saw the signal first stopped and entered the (collective) save while the
other entered the next step's all-reduce: both waited for each other until SIGKILL, and nothing was
saved. Here only one of two ``gputopo train --launcher tf-config`` tasks is signalled at all (the
extreme of "at different steps", and one that does not depend on timing): the other must stop at
the same step as it, through the stop flag all-reduced with every step. The real Slurm version
(scancel) is tests/system/test_slurm.py.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from cluster_plans import cluster_plan, free_ports, write_plan

REPO = Path(__file__).resolve().parents[2]
STARTUP_S = 240.0  # two TensorFlow workers forming a cluster on two loaded cores
STOP_S = 180.0  # one more step, the save and the exit; the run hung for ever before the fix

pytestmark = [pytest.mark.tf, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]


def _training_child(parent_pid: int) -> int | None:
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            ppid = next(line.split()[1] for line in status.read_text().splitlines() if line.startswith("PPid:"))
            cmdline = (status.parent / "cmdline").read_bytes()
        except (OSError, StopIteration):
            continue
        if ppid == str(parent_pid) and b"gputopo.train.child" in cmdline:
            return int(status.parent.name)
    return None


def _saved_steps(folder: Path) -> list[int]:
    return sorted(int(p.name[len("ckpt-"):-len(".index")]) for p in folder.glob("ckpt-*.index"))


def test_a_stop_seen_by_one_worker_stops_every_worker_at_one_saved_step(tmp_path):
    pytest.importorskip("tensorflow")
    workers = [f"127.0.0.1:{port}" for port in free_ports(2)]
    plan = write_plan(tmp_path / "plan.json", cluster_plan(["hostA", "hostB"]))
    checkpoint_dir = tmp_path / "ck"
    tasks = []
    for index in range(2):
        temp = tmp_path / f"tmp{index}"
        temp.mkdir()
        env = {**os.environ, "TMPDIR": str(temp), "TF_CONFIG": json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}})}
        command = [sys.executable, "-m", "gputopo", "train", "--launcher", "tf-config", "--plan", plan,
                   "--cpu-devices", "1", "--steps-per-epoch", "100000", "--batch-size", "8", "--image-size", "16",
                   "--no-eval", "--checkpoint-dir", str(checkpoint_dir), "--checkpoint-every", "100000",
                   "--startup-timeout", "200", "--json"]  # fmt: skip
        tasks.append(subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True))  # fmt: skip
    try:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline and all(task.poll() is None for task in tasks):
            if all(list((tmp_path / f"tmp{i}").glob("gputopo-train-*/*.started")) for i in range(2)):
                break
            time.sleep(0.2)
        assert all(list((tmp_path / f"tmp{i}").glob("gputopo-train-*/*.started")) for i in range(2)), (
            "the cluster did not start: " + " | ".join(task.stderr.read() if task.poll() is not None else "running"
                                                       for task in tasks))  # fmt: skip
        # Only worker 1's training process is told (as Slurm's TERM reaches every process of a task).
        child = _training_child(tasks[1].pid)
        assert child is not None
        os.kill(child, signal.SIGTERM)
        tasks[1].send_signal(signal.SIGTERM)
        outputs = []
        deadline = time.monotonic() + STOP_S
        for task in tasks:
            try:
                outputs.append(task.communicate(timeout=max(1.0, deadline - time.monotonic())))
            except subprocess.TimeoutExpired:
                pytest.fail(f"the workers did not stop within {STOP_S:g} s of the stop request (they wait for each "
                            f"other; saved steps: {_saved_steps(checkpoint_dir)})")  # fmt: skip
    finally:
        for task in tasks:
            if task.poll() is None:
                child = _training_child(task.pid)
                task.kill()
                if child is not None:
                    os.kill(child, signal.SIGKILL)
                task.wait()
    for task, (_stdout, stderr) in zip(tasks, outputs):
        assert task.returncode == 130, stderr
    first, second = (json.loads(stdout) for stdout, _ in outputs)
    assert first["status"] == second["status"] == "interrupted"
    assert first["steps"] == second["steps"]  # one agreed step ...
    assert first["weights_sha256"] == second["weights_sha256"]
    assert _saved_steps(checkpoint_dir) == [first["steps"]]  # ... saved by the chief
    assert first["checkpoint_path"].endswith(f"ckpt-{first['steps']}")
    assert second["stopped_by"] in ("SIGTERM", "SIGINT")  # its own signal, or its parent's forwarded one
    assert first["stopped_by"] == "another worker"  # never signalled: stopped by the agreement
