"""train.launch.checkpoint_lock: one run per checkpoint folder, the lock naming its holder and held
by the children after the parent is killed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_one_error_line

from gputopo.errors import InputError
from gputopo.train.launch.checkpoint_lock import LOCK_FILE, CheckpointLock


def test_one_run_per_folder_and_the_holder_is_named(tmp_path: Path, cli):
    with CheckpointLock.acquire(tmp_path):
        record = json.loads((tmp_path / LOCK_FILE).read_text())
        assert record["pid"] == os.getpid() and record["host"] and record["started"]
        holder = subprocess.run(
            [sys.executable, "-c", "from gputopo.train.launch.checkpoint_lock import CheckpointLock; import sys; "
             "CheckpointLock.acquire(sys.argv[1])", str(tmp_path)],
            capture_output=True, text=True, cwd=REPO, timeout=60,
        )  # fmt: skip
        assert holder.returncode == 1 and f"in use by another run (pid {os.getpid()} on host" in holder.stderr
        ck = tmp_path
        result = cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck), "--steps-per-epoch", "1")
        line = assert_one_error_line(result)
        assert f"checkpoint folder {ck} is in use by another run (pid {os.getpid()}" in line
    CheckpointLock.acquire(tmp_path).release()  # free again once released


def test_the_lock_outlives_a_killed_parent_while_a_child_holds_it(tmp_path: Path):
    """The lock goes to the children with their file descriptor: killing `gputopo train` alone
    must not let a second run in beside its still-saving child."""
    script = (
        "import subprocess, sys, time\n"
        "from gputopo.train.launch.checkpoint_lock import CheckpointLock\n"
        "lock = CheckpointLock.acquire(sys.argv[1])\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'], pass_fds=[lock.fd])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(60)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script, str(tmp_path)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    child_pid = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    try:
        with pytest.raises(InputError, match="in use by another run"):
            CheckpointLock.acquire(tmp_path)
    finally:
        os.kill(child_pid, 9)  # an orphan now: init reaps it
        parent.stdout.close()
