"""A real two-worker TensorFlow cluster whose parent is killed with SIGKILL: the workers are gone
within a bounded time (they trained on with PPID 1 before), and so are the run's temporary folder
and the workers' copies in the checkpoint folder (issue 20, item 5). One small run: TF on 2 cores."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import process_alive

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.tf, pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]


def _workers_of(parent_pid: int) -> list[int]:
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line)
            cmdline = (status.parent / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if fields.get("PPid", "").strip() == str(parent_pid) and b"gputopo.train.child" in cmdline:
            found.append(int(status.parent.name))
    return found




def test_workers_of_a_killed_parent_stop_within_the_grace(tmp_path):
    pytest.importorskip("tensorflow")
    ck = tmp_path / "ck"
    env = {**os.environ, "GPUTOPO_ORPHAN_GRACE_S": "5", "TMPDIR": str(tmp_path)}
    parent = subprocess.Popen(
        [sys.executable, "-m", "gputopo", "train", "--cpu-devices", "1", "--strategy", "multi-worker",
         "--local-workers", "2", "--batch-size", "16", "--steps-per-epoch", "100000", "--image-size", "16",
         "--no-eval", "--checkpoint-dir", str(ck), "--checkpoint-every", "5", "--startup-timeout", "120",
         "--allow-exposed-ports", "--json"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    workers: list[int] = []
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and parent.poll() is None:
            workers = _workers_of(parent.pid)
            if len(workers) == 2 and list(tmp_path.glob("gputopo-train-*/*.started")):
                break
            time.sleep(0.2)
        assert len(workers) == 2 and parent.poll() is None, "the cluster did not start"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 90  # the grace (5 s) plus a save and TF's exit on 2 busy cores
        while any(process_alive(pid) for pid in workers) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(process_alive(pid) for pid in workers), "a worker outlived its parent"
        assert list(tmp_path.glob("gputopo-train-*")) == [], "the run's temporary folder was left behind"
    finally:
        parent.kill()
        for pid in workers:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)
