"""The contract between ``gputopo train`` (the parent) and its training child processes.

``TrainConfig`` is the child's whole job description; it round-trips through command-line flags
(``to_argv`` / ``from_argv``) so the printed command is exactly what runs and can be rerun by hand.
The child answers through ``--result-file`` (JSON with ``RESULT_SCHEMA``), marks the end of its
start-up with ``started_marker`` and exits with ``INTERRUPTED_EXIT_CODE`` when stopped on a signal.

Pure Python, no TensorFlow: the parent and the child both import it.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from gputopo.errors import InputError

STRATEGIES = ("mirrored", "multi-worker", "parameter-server")
MODELS = ("cnn", "mobilenetv2")
CROSS_DEVICE_OPS = ("NcclAllReduce", "HierarchicalCopyAllReduce", "ReductionToOneDevice")
CHILD_MODULE = "gputopo.train.child"  # a package: train/child/__main__.py
INTERRUPTED_EXIT_CODE = 130  # a child stopped by Ctrl-C/SIGTERM after saving its checkpoint
RESULT_SCHEMA = "gputopo.train/1"
DEFAULT_LEARNING_RATE = 0.001
MAX_BATCH_SIZE = 1 << 20  # a global batch past a million images is a typo (and overflows TF's int32 shapes)
MAX_LOCAL_PROCESSES = 64  # local workers / in-process servers: each holds threads, sockets and files
MAX_CPU_DEVICES = 4096
MAX_SEED = 2**32 - 1  # numpy's and Keras' seeds are 32-bit unsigned


@dataclass
class TrainConfig:
    """Everything the training child needs; every field is a ``--flag`` of ``python -m gputopo.train.child``."""

    data: str = "synthetic"
    model: str = "cnn"
    batch_size: int = 64  # global batch: split evenly over all replicas (of all workers)
    epochs: int = 1
    steps_per_epoch: int | None = None  # None: one pass over the training images (synthetic: 50)
    learning_rate: float | None = None  # None: DEFAULT_LEARNING_RATE, or the checkpoint's with --resume
    image_size: int | None = None  # resize images to this square size (None: the data's own size)
    seed: int = 0
    evaluate: bool = True  # evaluate on test/ after each epoch
    cpu_devices: int | None = None  # N logical CPU devices stand in for GPUs
    strategy: str = "mirrored"
    cross_device_ops: str | None = None  # MirroredStrategy all-reduce on GPUs (from the recommendation)
    checkpoint_dir: str | None = None
    checkpoint_every: int = 100  # steps between checkpoints (0: only at the end)
    resume: bool = False
    result_file: str | None = None  # where the child writes its JSON summary (or error)
    workers: list[str] = field(default_factory=list)  # multi-worker: host:port of every worker
    task_index: int = 0  # multi-worker: which of ``workers`` this process is
    ps: int = 0  # parameter-server: number of in-process parameter servers
    ps_workers: int = 0  # parameter-server: number of in-process workers
    server_addresses: list[str] = field(default_factory=list)  # parameter-server: host:port of the in-process
    # servers, workers first (default: free loopback ports picked by the child)
    startup_timeout_s: float = 120.0  # multi-worker: give up if the peers do not answer by then
    progress: bool = True  # draw the progress bar on standard error

    def validate(self) -> None:
        """Reject option values that can never work, before any process or TensorFlow starts."""
        if self.model not in MODELS:
            raise InputError(f"unknown model {self.model!r}; choose one of: {', '.join(MODELS)}")
        if self.strategy not in STRATEGIES:
            raise InputError(f"unknown strategy {self.strategy!r}; choose one of: {', '.join(STRATEGIES)}")
        for name in ("batch_size", "epochs"):
            if getattr(self, name) < 1:
                raise InputError(f"--{name.replace('_', '-')} must be at least 1, got {getattr(self, name)}")
        if self.batch_size > MAX_BATCH_SIZE:
            raise InputError(f"--batch-size must be at most {MAX_BATCH_SIZE}, got {self.batch_size}")
        if self.steps_per_epoch is not None and self.steps_per_epoch < 1:
            raise InputError(f"--steps-per-epoch must be at least 1, got {self.steps_per_epoch}")
        if self.checkpoint_every < 0:
            raise InputError(f"--checkpoint-every must be 0 or more, got {self.checkpoint_every}")
        if self.learning_rate is not None and not 0 < self.learning_rate < float("inf"):
            raise InputError(f"--learning-rate must be a positive number, got {self.learning_rate}")
        if not self.startup_timeout_s > 0:  # a timeout already over would stop every multi-worker run
            raise InputError(f"--startup-timeout must be a positive number of seconds, got {self.startup_timeout_s}")
        if self.image_size is not None and self.image_size < 8:
            raise InputError(f"--image-size must be at least 8, got {self.image_size}")
        if self.model == "mobilenetv2" and self.image_size is not None and self.image_size < 32:
            raise InputError("MobileNetV2 needs images of at least 32x32; use --image-size 32 or more")
        if self.cpu_devices is not None and not 1 <= self.cpu_devices <= MAX_CPU_DEVICES:
            raise InputError(f"--cpu-devices must be from 1 to {MAX_CPU_DEVICES}, got {self.cpu_devices}")
        if not 0 <= self.seed <= MAX_SEED:
            raise InputError(f"--seed must be from 0 to {MAX_SEED}, got {self.seed}")
        if self.checkpoint_dir is not None and not self.checkpoint_dir.strip():
            raise InputError("--checkpoint-dir is empty: give a folder (or --no-checkpoint)")
        for name in ("ps", "ps_workers"):
            if not 0 <= getattr(self, name) <= MAX_LOCAL_PROCESSES:
                raise InputError(f"{name.replace('_', ' ')}: at most {MAX_LOCAL_PROCESSES} in-process servers, "
                                 f"got {getattr(self, name)}")
        for name in ("image_size", "steps_per_epoch", "epochs", "checkpoint_every"):
            if (getattr(self, name) or 0) > 2**31 - 1:
                raise InputError(f"--{name.replace('_', '-')} must be at most {2**31 - 1}, got {getattr(self, name)}")
        if self.cross_device_ops is not None and self.cross_device_ops not in CROSS_DEVICE_OPS:
            raise InputError(
                f"unknown cross-device op {self.cross_device_ops!r}; choose one of: {', '.join(CROSS_DEVICE_OPS)}"
            )

    def to_argv(self) -> list[str]:
        """The flags that reproduce this config (defaults left out, so the command stays short)."""
        argv: list[str] = []
        defaults = TrainConfig()
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if value == getattr(defaults, f.name):
                continue
            flag = "--" + f.name.replace("_", "-")
            if isinstance(value, bool):
                argv.append(flag if value else "--no-" + f.name.replace("_", "-"))
            elif isinstance(value, list):
                argv += [flag, ",".join(value)]
            elif value is None:
                continue
            else:
                argv += [flag, str(value)]
        return argv

    @classmethod
    def from_argv(cls, argv: Sequence[str]) -> TrainConfig:
        """Parse the child's command line (the inverse of ``to_argv``)."""
        parser = argparse.ArgumentParser(
            prog=f"python -m {CHILD_MODULE}",
            description="The training process that `gputopo train` launches (run it by hand to reproduce a run).",
        )
        defaults = cls()
        for f in dataclasses.fields(cls):
            flag = "--" + f.name.replace("_", "-")
            default = getattr(defaults, f.name)
            if isinstance(default, bool):
                parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=default)
            elif isinstance(default, list):
                parser.add_argument(flag, dest=f.name, default="", type=str)
            else:
                kind = {"int": int, "float": float}.get(str(f.type).split(" ")[0], str)
                parser.add_argument(flag, dest=f.name, default=default, type=kind)
        ns = parser.parse_args(list(argv))
        values = vars(ns)
        for f in dataclasses.fields(cls):
            if isinstance(getattr(defaults, f.name), list):
                text = values[f.name]
                values[f.name] = [part for part in text.split(",") if part] if isinstance(text, str) else list(text)
        config = cls(**values)
        config.validate()
        return config


def child_argv(config: TrainConfig, python: str | None = None) -> list[str]:
    """``python -m gputopo.train.child <flags>``: the training child's argv."""
    return [python or sys.executable, "-m", CHILD_MODULE, *config.to_argv()]


def started_marker(result_file: str | os.PathLike[str]) -> Path:
    """The file a child creates once its first step is done (its cluster, if any, has formed)."""
    return Path(str(result_file) + ".started")


def check_batch_split(global_batch: int, replicas: int, what: str = "replicas") -> None:
    """Every replica must get the same share of the global batch (the loss is averaged over all of it)."""
    if global_batch % replicas:
        suggestion = replicas * max(1, round(global_batch / replicas))
        raise InputError(
            f"global batch {global_batch} does not split evenly over {replicas} {what}; "
            f"use a multiple of {replicas} (e.g. --batch-size {suggestion})"
        )


def is_chief(config: TrainConfig) -> bool:
    """Whether this process is the chief: it reports progress and keeps the real checkpoints."""
    return config.strategy != "multi-worker" or config.task_index == 0
