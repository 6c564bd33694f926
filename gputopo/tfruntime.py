"""The one door to TensorFlow: its lazy import (start-up chatter held back), logical CPU devices
standing in for GPUs, TF's GPUs with their PCI bus ids, and the devices a job runs on.

Nothing else in gputopo imports ``tensorflow``. Only ``bench-p2p`` and the training child reach
this module; nothing here runs TensorFlow at import time.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
from dataclasses import dataclass
from typing import Any, Iterator

from gputopo.errors import InputError, TensorFlowUnavailable
from gputopo.model import normalize_pci_bus_id

# What absl prints before it is initialised, whatever TF_CPP_MIN_LOG_LEVEL says: this notice, and
# messages such as TensorFlow's "oneDNN custom operations are on" (INFO), all during the import.
ABSL_PREAMBLE = "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR"
_ABSL_LINE_RE = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ [^\]\s]+:\d+\] ")
_QUIET_LEVEL = 2  # TF_CPP_MIN_LOG_LEVEL set for the user: errors only


def filter_startup_log(text: str, min_level: int) -> str:
    """``text`` without the absl lines below ``min_level`` (TF_CPP_MIN_LOG_LEVEL: 1 hides INFO,
    2 also WARNING, 3 also ERROR) and, from level 1, without absl's pre-initialisation notice.
    Everything else (errors, Python warnings, any other output) is kept as it is."""
    hidden = "IWE"[: max(0, min(min_level, 3))]
    kept = []
    for line in text.splitlines(keepends=True):
        if min_level >= 1 and line.rstrip("\r\n") == ABSL_PREAMBLE:
            continue
        match = _ABSL_LINE_RE.match(line)
        if match and match.group(1) in hidden:
            continue
        kept.append(line)
    return "".join(kept)


@contextlib.contextmanager
def startup_log_filtered(min_level: int) -> Iterator[None]:
    """Hold back what is written to file descriptor 2 (C++ included) meanwhile, then pass it on
    through ``filter_startup_log``."""
    sys.stderr.flush()
    with tempfile.TemporaryFile() as capture:
        saved_fd = os.dup(2)
        os.dup2(capture.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved_fd, 2)
            os.close(saved_fd)
            capture.seek(0)
            kept = filter_startup_log(capture.read().decode("utf-8", errors="replace"), min_level).encode()
            while kept:
                kept = kept[os.write(2, kept) :]


def import_tensorflow(for_check: bool = False) -> Any:
    """Import TensorFlow (seconds), quietening its C++ start-up chatter unless the user set a level.

    With no ``TF_CPP_MIN_LOG_LEVEL`` from the user it is set to 2 (errors only), and the INFO and
    WARNING lines absl prints during the import regardless of it are held back too; TensorFlow's
    errors still show. ``TF_CPP_MIN_LOG_LEVEL=0`` shows everything. ``for_check``: TensorFlow is
    started only to check something gputopo reports itself (one ``gputopo: error:`` line), so its
    own ERROR lines are held back too (level 3).
    """
    quiet = "TF_CPP_MIN_LOG_LEVEL" not in os.environ and "tensorflow" not in sys.modules
    level = 3 if for_check else _QUIET_LEVEL
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", str(level))
    try:
        with startup_log_filtered(level) if quiet else contextlib.nullcontext():
            import tensorflow as tf
    except ModuleNotFoundError as exc:
        if exc.name != "tensorflow":  # a module TensorFlow itself needs is missing: it is broken
            raise _broken(exc) from None
        raise TensorFlowUnavailable(
            f"this command needs TensorFlow ({exc}); install it with `pip install 'gputopo[tf]'`"
        ) from None
    except Exception as exc:  # a missing CUDA library, a NumPy it was not built for, ...
        raise _broken(exc) from None
    finally:
        if for_check and quiet:  # read once by TF here; the processes this one starts choose their own
            os.environ.pop("TF_CPP_MIN_LOG_LEVEL", None)
    return tf


def _broken(exc: BaseException) -> TensorFlowUnavailable:
    """TensorFlow is there but its import failed: say so, not "install it"."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return TensorFlowUnavailable(f"TensorFlow is installed but failed to import: {type(exc).__name__}: {first[:300]}")


@dataclass(frozen=True)
class DeviceSet:
    """The devices a TensorFlow job runs on, and what kind they really are."""

    kind: str  # "GPU" or "CPU"
    names: tuple[str, ...]  # TF device names, e.g. "/device:GPU:0"

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


def tf_gpus_with_bus_ids(tf: Any) -> list[tuple[str, str | None]]:
    """TensorFlow's GPUs in ordinal order, each with its PCI bus id where TF reports it."""
    names = [d.name for d in tf.config.list_logical_devices("GPU")]
    bus_ids: dict[str, str | None] = {}
    try:
        from tensorflow.python.client import device_lib

        for dev in device_lib.list_local_devices():
            match = re.search(r"pci bus id: ([0-9a-fA-F:.]+)", dev.physical_device_desc or "")
            if match:
                bus_ids[dev.name] = normalize_pci_bus_id(match.group(1))
    except Exception:  # device_lib is TF-internal; without it we fall back to ordinal order
        pass
    return [(name, bus_ids.get(name)) for name in names]


def select_devices(cpu_devices: int | None = None) -> DeviceSet:
    """The devices to run on: ``cpu_devices`` logical CPUs, else every GPU TensorFlow sees (the
    launcher has already narrowed them with CUDA_VISIBLE_DEVICES)."""
    if cpu_devices:
        return DeviceSet("CPU", tuple(configure_logical_cpu_devices(cpu_devices)))
    names = gpu_device_names()
    if not names:
        raise InputError("TensorFlow sees no GPU here; use --cpu-devices N to run on N logical CPU devices")
    return DeviceSet("GPU", tuple(names))
