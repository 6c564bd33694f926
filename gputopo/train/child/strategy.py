"""The training child's devices and its ``tf.distribute`` strategy.

- ``setup_devices``: logical CPU devices or the visible GPUs (``gputopo.tfruntime``).
- ``make_strategy``: MirroredStrategy on this process's devices, or MultiWorkerMirroredStrategy
  with a ``TF_CONFIG`` built from ``--workers`` / ``--task-index`` (synchronous all-reduce across
  processes). The parent enforces the start-up timeout and names the workers that do not answer.

The parameter-server strategy is built by its own loop (``gputopo.train.child.ps_loop``).
"""

from __future__ import annotations

import os
from typing import Any

from gputopo.errors import InputError
from gputopo.tfruntime import DeviceSet, select_devices
from gputopo.train.workers import check_own_address, tf_config
from gputopo.train.config import TrainConfig


def setup_devices(tf: Any, config: TrainConfig) -> Any:
    """The devices this process trains on (logical CPU devices are split off here, before TF starts).

    Multi-worker and parameter-server jobs must not touch the runtime before their strategy
    configures it (collective ops and servers are set up at start-up); they use one CPU device
    per worker, or the visible GPUs.
    """
    if config.strategy == "mirrored":
        return select_devices(cpu_devices=config.cpu_devices)
    kind = "GPU" if tf.config.list_physical_devices("GPU") and not config.cpu_devices else "CPU"
    return DeviceSet(kind, ())


def make_strategy(tf: Any, config: TrainConfig, device_set: Any) -> Any:
    """MirroredStrategy on ``device_set`` or MultiWorkerMirroredStrategy from ``--workers``."""
    if config.strategy == "mirrored":
        cross_device_ops = None
        if device_set.kind == "GPU" and config.cross_device_ops:
            cross_device_ops = getattr(tf.distribute, config.cross_device_ops)()
        return tf.distribute.MirroredStrategy(devices=list(device_set.names), cross_device_ops=cross_device_ops)
    if config.strategy != "multi-worker":
        raise InputError(f"make_strategy does not build {config.strategy!r}")
    if not config.workers:
        raise InputError("--strategy multi-worker needs --workers host:port,... (or --local-workers N)")
    if not 0 <= config.task_index < len(config.workers):
        raise InputError(f"--task-index {config.task_index} is not one of 0..{len(config.workers) - 1}")
    check_own_address(config.workers[config.task_index])
    os.environ["TF_CONFIG"] = tf_config(config.workers, config.task_index)
    # This blocks (in C++, holding the interpreter) until every worker has joined; the parent
    # enforces --startup-timeout and names the workers that do not answer.
    return tf.distribute.MultiWorkerMirroredStrategy()
