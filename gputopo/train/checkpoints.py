"""Checkpoints: which step the last one is at, whether the folder can be written, what to tell the
user, and the ``tf.train.CheckpointManager`` a training child saves with.

Checkpoints are numbered by step (``ckpt-<step>``) and written by ``tf.train.CheckpointManager``:
TF writes the data files first and rewrites its ``checkpoint`` state file (atomically) only after,
so a crash mid-write leaves the previous checkpoint as the latest. The parent reads that state file
without TensorFlow; the child's helpers take the ``tf`` module as an argument.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from gputopo.errors import InputError
from gputopo.train.config import TrainConfig, is_chief

MAX_TO_KEEP = 3


def latest_checkpoint_step(checkpoint_dir: str | os.PathLike[str] | None) -> int | None:
    """The step of the newest complete checkpoint, read from TF's ``checkpoint`` state file.

    The training child numbers checkpoints by step (``ckpt-<step>``); TF rewrites the state file
    atomically only after a checkpoint is complete, so what it names is always whole. No TF needed.
    """
    if checkpoint_dir is None:
        return None
    state = Path(checkpoint_dir) / "checkpoint"
    try:
        text = state.read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("model_checkpoint_path:"):
            name = line.split(":", 1)[1].strip().strip('"')
            _, _, number = Path(name).name.rpartition("-")
            if number.isdigit():
                return int(number)
    return None


def check_checkpoint_dir_writable(checkpoint_dir: str) -> None:
    """Create ``--checkpoint-dir`` and write a test file there, before any training starts.

    Otherwise a folder that cannot be written only shows at the first checkpoint, after the first
    ``--checkpoint-every`` steps of training. URLs (``gs://...``) are left to TensorFlow.
    """
    if "://" in checkpoint_dir:
        return
    try:
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=checkpoint_dir, prefix=".gputopo-write-test-"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write checkpoints to {checkpoint_dir}: {exc.strerror or exc}") from None


def resume_hint(checkpoint_dir: str | os.PathLike[str] | None) -> str:
    """Where the last checkpoint is and how to continue from it, for failure messages."""
    step = latest_checkpoint_step(checkpoint_dir)
    if step is None:
        return "no checkpoint was saved"
    return f"the last checkpoint is at step {step} in {checkpoint_dir}; rerun with --resume to continue"


def check_checkpoint_choice(config: TrainConfig, *, scaling: bool, dry_run: bool) -> None:
    """Decided in the parent, before any process starts, so that nothing is overwritten: ``--resume``
    needs a checkpoint, and a checkpoint already there needs ``--resume`` (or another folder)."""
    if config.resume and config.checkpoint_dir is None:
        raise InputError("--resume needs a --checkpoint-dir (not --no-checkpoint)")
    if config.checkpoint_dir is None:
        return
    if Path(config.checkpoint_dir).exists() and not Path(config.checkpoint_dir).is_dir():
        raise InputError(f"--checkpoint-dir {config.checkpoint_dir} is a file, not a folder")
    saved_step = latest_checkpoint_step(config.checkpoint_dir)
    if config.resume and saved_step is None:
        raise InputError(f"--resume: no checkpoint in {config.checkpoint_dir} to resume from")
    if not config.resume and saved_step is not None and not scaling and not dry_run:
        raise InputError(
            f"{config.checkpoint_dir} already holds a checkpoint (step {saved_step}); add --resume to continue "
            "from it, or give another --checkpoint-dir to start afresh"
        )


def checkpoint_dir_for(config: TrainConfig) -> Path | None:
    """The chief writes the real checkpoints; other workers write a throw-away copy (all must save)."""
    if config.checkpoint_dir is None:
        return None
    base = Path(config.checkpoint_dir)
    if is_chief(config):
        return base
    return base / f".worker-{config.task_index}-tmp"


def checkpoint_manager(tf: Any, config: TrainConfig, checkpoint: Any) -> Any:
    """The child's ``tf.train.CheckpointManager`` (None without ``--checkpoint-dir``)."""
    directory = checkpoint_dir_for(config)
    if directory is None:
        return None
    return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=MAX_TO_KEEP, checkpoint_name="ckpt")


def restore_checkpoint(tf: Any, config: TrainConfig, checkpoint: Any, step_variable: Any) -> int:
    """Restore the latest checkpoint with ``--resume``; refuse to overwrite one without it."""
    if config.checkpoint_dir is None:
        if config.resume:
            raise InputError("--resume needs --checkpoint-dir (where the checkpoints are)")
        return 0
    latest = tf.train.latest_checkpoint(config.checkpoint_dir)
    if latest is None:
        if config.resume:
            raise InputError(f"--resume: no checkpoint in {config.checkpoint_dir} to resume from")
        return 0
    if not config.resume:
        raise InputError(
            f"{config.checkpoint_dir} already holds a checkpoint ({Path(latest).name}); add --resume to continue "
            "from it, or give another --checkpoint-dir to start afresh"
        )
    try:
        checkpoint.restore(latest).expect_partial()
    except (tf.errors.OpError, ValueError, AssertionError) as exc:
        raise InputError(
            f"cannot restore {latest}: it was written for another model or data shape ({str(exc).splitlines()[0]})"
        ) from None
    return int(step_variable.numpy())
