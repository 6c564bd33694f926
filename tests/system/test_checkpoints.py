"""Checkpoints with TensorFlow, in real `gputopo train` child processes: a NaN run stopped without
saving, --learning-rate applied on --resume, a damaged checkpoint and state file worked around.
The checks without TensorFlow are tests/unit/train/test_checkpoints.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO, assert_one_error_line

from gputopo.train.checkpoints import latest_checkpoint_step, saved_checkpoints


def _train(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    return subprocess.run(
        [sys.executable, "-m", "gputopo", "train", "--cpu-devices", "1", "--batch-size", "16", "--no-eval", *args],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )  # fmt: skip


def _error_lines(proc: subprocess.CompletedProcess) -> list[str]:
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    return [line for line in proc.stderr.splitlines() if line.startswith("gputopo: error:")]


@pytest.mark.tf
def test_a_nan_loss_stops_the_run_and_keeps_the_last_finite_checkpoint(tmp_path: Path):
    pytest.importorskip("tensorflow")
    import numpy as np
    import tensorflow as tf

    ck = tmp_path / "ck"
    first = _train("--steps-per-epoch", "4", "--checkpoint-dir", str(ck))
    assert first.returncode == 0, first.stderr[-3000:]
    # --learning-rate on --resume is applied (said so) and, this large, makes the loss NaN.
    blown = _train("--steps-per-epoch", "40", "--checkpoint-every", "1", "--checkpoint-dir", str(ck), "--resume",
                   "--learning-rate", "1e38", "--json")  # fmt: skip
    assert blown.returncode != 0 and blown.stdout == "", blown.stderr[-3000:]
    assert "learning rate set to 1e+38 (the checkpoint had 0.001)" in blown.stderr
    (line,) = _error_lines(blown)
    assert "the loss became nan at step" in line or "the loss became inf at step" in line or "no longer finite" in line
    bad_step = int(line.split(" at step ")[1].split(";")[0])
    saved = saved_checkpoints(ck)
    assert saved.latest_step is not None and 4 <= saved.latest_step < bad_step <= 40, (saved, line)
    assert f"the last checkpoint is at step {saved.latest_step}" in line and "--resume" in line
    for step in saved.steps:  # nothing non-finite was ever saved
        reader = tf.train.load_checkpoint(str(ck / f"ckpt-{step}"))
        for name, _ in tf.train.list_variables(str(ck / f"ckpt-{step}")):
            value = reader.get_tensor(name)
            if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                assert np.isfinite(value).all(), (step, name)


@pytest.mark.tf
def test_resume_falls_back_from_a_damaged_checkpoint_and_sets_a_damaged_state_file_aside(tmp_path: Path, cli):
    pytest.importorskip("tensorflow")
    ck = tmp_path / "ck"
    first = _train("--steps-per-epoch", "6", "--checkpoint-every", "3", "--checkpoint-dir", str(ck))
    assert first.returncode == 0, first.stderr[-3000:]
    assert saved_checkpoints(ck).steps == [3, 6]
    (data,) = ck.glob("ckpt-6.data-*")
    os.truncate(data, data.stat().st_size // 2)
    resumed = _train("--steps-per-epoch", "8", "--checkpoint-dir", str(ck), "--resume", "--json")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "ckpt-6 (" in resumed.stderr and "is damaged; resumed from ckpt-3 instead" in resumed.stderr
    summary = json.loads(resumed.stdout)
    assert summary["start_step"] == 3 and summary["steps"] == 8 and summary["status"] == "completed"

    (ck / "checkpoint").write_bytes(b"\xff\xfe\x00 not text")
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck)))
    assert "already holds a checkpoint (step 8)" in line
    again = _train("--steps-per-epoch", "9", "--checkpoint-dir", str(ck), "--resume", "--json")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "state file in" in again.stderr and "is damaged (not UTF-8 text); moved it to checkpoint.damaged-" in again.stderr
    assert json.loads(again.stdout)["start_step"] == 8
    assert latest_checkpoint_step(ck) == 9 and list(ck.glob("checkpoint.damaged-*"))
