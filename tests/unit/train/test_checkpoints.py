"""Nothing lost or damaged in a checkpoint folder: URLs refused, any ckpt-* file counts, damaged state
files and checkpoints said so and worked around, an interrupted run said so. One run per folder is
tests/unit/train/launch/test_checkpoint_lock.py. The TensorFlow runs (a NaN run stopped without saving, --learning-rate
applied on --resume, a damaged checkpoint) are tests/system/test_checkpoints.py."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from conftest import assert_one_error_line

from gputopo.errors import InputError
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


def test_an_interrupted_run_without_checkpoints_does_not_say_resume(capsys):
    from gputopo.views.train import render_summary

    summary = {"status": "interrupted", "steps": 3, "total_steps": 10, "steps_run": 3, "start_step": 0,
               "global_batch_size": 8, "per_replica_batch_size": 8, "replicas": 1, "devices": ["/cpu:0"],
               "checkpoint_path": None}  # fmt: skip
    render_summary(summary)
    shown = capsys.readouterr().out
    assert "--resume" not in shown and "no checkpoint was saved" in shown
