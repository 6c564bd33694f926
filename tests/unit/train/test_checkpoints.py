"""Nothing lost or damaged in a checkpoint folder: URLs refused, any ckpt-* file counts, one run per
folder (a lock naming its holder), damaged state files and checkpoints said so and worked around,
an interrupted run said so. The TensorFlow runs (a NaN run stopped without saving, --learning-rate
applied on --resume, a damaged checkpoint) are tests/system/test_checkpoints.py."""

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
from gputopo.train.checkpoints import (
    MARKER_FILE,
    check_checkpoint_choice,
    latest_checkpoint_step,
    saved_checkpoints,
    write_marker,
)
from gputopo.train.config import TrainConfig

STATE = 'model_checkpoint_path: "ckpt-20"\nall_model_checkpoint_paths: "ckpt-10"\nall_model_checkpoint_paths: "ckpt-20"\n'


def _fake_checkpoint(folder: Path, step: int, by_gputopo: bool = True) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if by_gputopo:  # the record the chief writes before its first save
        write_marker(TrainConfig(checkpoint_dir=str(folder)))
    (folder / f"ckpt-{step}.index").write_bytes(b"index")
    (folder / f"ckpt-{step}.data-00000-of-00001").write_bytes(b"data")


@pytest.mark.parametrize("url", ["gs://bucket/x", "s3://bucket/run1", "hdfs://namenode/ck"])
def test_urls_are_refused_in_one_line_and_no_local_folder_appears(cli, tmp_path: Path, monkeypatch, url):
    monkeypatch.chdir(tmp_path)
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--checkpoint-dir", url))
    assert "URLs are not supported" in line and url in line
    assert list(tmp_path.iterdir()) == []  # no gs:/bucket/x folder
    with pytest.raises(InputError, match="not supported"):
        check_checkpoint_choice(TrainConfig(checkpoint_dir=url, resume=True), scaling=False, dry_run=False)


def test_checkpoint_files_without_a_state_file_are_never_overwritten(cli, tmp_path: Path):
    ck = tmp_path / "ck"
    _fake_checkpoint(ck, 30)
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck)))
    assert "already holds a checkpoint (step 30)" in line and "--resume" in line
    (ck / "ckpt-30.index").unlink()  # only a data file left: still someone's checkpoint
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck)))
    assert "already holds a checkpoint" in line
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck), "--resume"))
    assert "no checkpoint in" in line and "only parts of checkpoints: ckpt-30.data" in line
    assert sorted(p.name for p in ck.iterdir()) == [MARKER_FILE, "ckpt-30.data-00000-of-00001"]


@pytest.mark.parametrize("damage", [b"\xff\xfe\x00garbage", b"model_checkpoint_path: {{{ not a proto"])
def test_a_damaged_state_file_gets_the_same_truth_from_both_commands(cli, tmp_path: Path, damage):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "checkpoint").write_bytes(damage)
    saved = saved_checkpoints(ck)
    assert saved.state_problem and "damaged" in saved.state_problem and not saved.holds_any
    # No checkpoint at all: --resume says why, and a plain run may start (its child sets the file aside).
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck), "--resume"))
    assert "no checkpoint in" in line and "state file is damaged" in line
    check_checkpoint_choice(TrainConfig(checkpoint_dir=str(ck)), scaling=False, dry_run=False)
    # With checkpoint files: a plain run says "add --resume", and --resume would find them.
    _fake_checkpoint(ck, 40)
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck)))
    assert "already holds a checkpoint (step 40)" in line
    check_checkpoint_choice(TrainConfig(checkpoint_dir=str(ck), resume=True), scaling=False, dry_run=False)
    assert saved_checkpoints(ck).restore_order() == [40]


def test_state_file_and_files_on_disk_decide_together(tmp_path: Path):
    (tmp_path / "checkpoint").write_text(STATE)
    assert latest_checkpoint_step(tmp_path) == 20  # the state file's word, as TF writes it
    _fake_checkpoint(tmp_path, 10)
    _fake_checkpoint(tmp_path, 30)
    saved = saved_checkpoints(tmp_path)
    assert saved.steps == [10, 30] and saved.state_step == 20
    assert saved.restore_order() == [30, 10]  # the state's ckpt-20 is not there: not tried


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


def test_an_interrupted_run_without_checkpoints_does_not_say_resume(capsys):
    from gputopo.views.train import render_summary

    summary = {"status": "interrupted", "steps": 3, "total_steps": 10, "steps_run": 3, "start_step": 0,
               "global_batch_size": 8, "per_replica_batch_size": 8, "replicas": 1, "devices": ["/cpu:0"],
               "checkpoint_path": None}  # fmt: skip
    render_summary(summary)
    shown = capsys.readouterr().out
    assert "--resume" not in shown and "no checkpoint was saved" in shown
