"""TensorFlow devices: lazy import, logical CPU devices standing in for GPUs, device names.

Only ``bench-p2p`` and ``train`` reach this module; nothing here runs at import time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gputopo.errors import InputError, TensorFlowUnavailable


def import_tensorflow() -> Any:
    """Import TensorFlow (seconds), quietening its C++ start-up chatter unless the user set a level."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import tensorflow as tf
    except ImportError as exc:
        raise TensorFlowUnavailable(
            f"this command needs TensorFlow ({exc}); install it with `pip install 'gputopo[tf]'`"
        ) from None
    return tf


@dataclass(frozen=True)
class DeviceSet:
    """The devices a TensorFlow job runs on, and what kind they really are."""

    kind: str  # "GPU" or "CPU"
    names: tuple[str, ...]  # TF device names, e.g. "/device:GPU:0"
    gpu_indices: tuple[int, ...] | None = None  # NVML indices of the GPUs, where known

    @property
    def count(self) -> int:
        return len(self.names)


def configure_logical_cpu_devices(count: int) -> list[str]:
    """Split the host CPU into ``count`` logical devices (before TF initialises) and name them.

    If TensorFlow is already initialised with at least ``count`` logical CPUs, the first ``count``
    are returned; with fewer, an ``InputError`` says so (TF cannot reconfigure a running runtime).
    """
    if count < 1:
        raise InputError(f"--cpu-devices must be at least 1, got {count}")
    tf = import_tensorflow()
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration() for _ in range(count)]
        )
    except RuntimeError:
        pass  # already initialised: check below whether what exists is enough
    logical = tf.config.list_logical_devices("CPU")
    if len(logical) < count:
        raise InputError(
            f"TensorFlow is already running with {len(logical)} logical CPU devices; {count} were asked for"
        )
    return [d.name for d in logical[:count]]


def gpu_device_names() -> list[str]:
    tf = import_tensorflow()
    return [d.name for d in tf.config.list_logical_devices("GPU")]


def select_devices(cpu_devices: int | None = None, gpu_ordinals: list[int] | None = None) -> DeviceSet:
    """The devices to run on: ``cpu_devices`` logical CPUs, else the visible GPUs (all or some).

    ``gpu_ordinals`` are TensorFlow's ordinals (after CUDA_VISIBLE_DEVICES renumbering).
    """
    if cpu_devices:
        return DeviceSet("CPU", tuple(configure_logical_cpu_devices(cpu_devices)))
    names = gpu_device_names()
    if not names:
        raise InputError("TensorFlow sees no GPU here; use --cpu-devices N to run on N logical CPU devices")
    if gpu_ordinals is None:
        return DeviceSet("GPU", tuple(names))
    missing = [o for o in gpu_ordinals if o < 0 or o >= len(names)]
    if missing:
        raise InputError(f"TensorFlow sees {len(names)} GPUs; no GPU {missing[0]}")
    return DeviceSet("GPU", tuple(names[o] for o in gpu_ordinals))
