"""A source for ``gputopo scan --tf``: TensorFlow initialises its GPUs in a child process; its log is read.

So that a user need not produce the log: the child imports TensorFlow with
``TF_CPP_MAX_VLOG_LEVEL=1`` (recent TF prints its peer matrix only at that level) and
``TF_CPP_MIN_LOG_LEVEL=0``, lists the GPUs and creates them, and its output is read like a saved
log. A child process keeps TensorFlow (seconds to import, gigabytes of GPU memory once devices are
created) out of the ``scan`` process, which never imports it, and lets a hang be cut off.

Only the source lives here (start the child, capture its output, read it into a ``TfView``); the
command line shows the progress and joins the view to a topology.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from typing import Any, Iterator

from gputopo.errors import GputopoError, TensorFlowUnavailable
from gputopo.model import ReadingNote, TfView

DEFAULT_TIMEOUT_S = 180.0
SOURCE_LABEL = "TensorFlow GPU initialisation (gputopo scan --tf)"
_GPU_COUNT_MARK = "GPUTOPO_TF_GPUS"
_VERSION_MARK = "GPUTOPO_TF_VERSION"
_IMPORT_ERROR_MARK = "GPUTOPO_TF_IMPORT_ERROR"

# The child: import TF, list the GPUs, create them (that logs "Created device" and the peer matrix).
CHILD_SCRIPT = f"""
import sys
try:
    import tensorflow as tf
except ImportError as exc:
    print("{_IMPORT_ERROR_MARK}", exc, flush=True)
    sys.exit(3)
gpus = tf.config.list_physical_devices("GPU")
print("{_VERSION_MARK}", tf.__version__, flush=True)
print("{_GPU_COUNT_MARK}", len(gpus), flush=True)
if gpus:
    tf.config.list_logical_devices("GPU")
"""

# Lines in which TensorFlow says why it found no GPU, worth showing to the user.
_NO_GPU_REASON_RE = re.compile(
    r"failed call to cuInit|Could not find cuda drivers|Cannot dlopen some GPU libraries|"
    r"CUDA_ERROR_\w+|no CUDA-capable device",
    re.IGNORECASE,
)


def tensorflow_installed() -> bool:
    """Whether TensorFlow can be imported, found without importing it (that takes seconds)."""
    return importlib.util.find_spec("tensorflow") is not None


def child_environment() -> dict[str, str]:
    env = dict(os.environ)
    env["TF_CPP_MAX_VLOG_LEVEL"] = "1"
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    return env


@contextlib.contextmanager
def _stop_signals_as_interrupt() -> Iterator[None]:
    """SIGTERM and SIGHUP as Ctrl-C while the child runs: ``subprocess.run`` then kills the child and
    the child's temporary folder is removed, where their default action would end ``scan`` at once."""
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGHUP):
            previous[sig] = signal.signal(sig, _raise_interrupt)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def capture_tf_init_log(timeout_s: float = DEFAULT_TIMEOUT_S, script: str = CHILD_SCRIPT) -> str:
    """Run TensorFlow's GPU initialisation in a child process and return its whole output.

    Raises ``TensorFlowUnavailable`` without TensorFlow and ``GputopoError`` when the child hangs
    past ``timeout_s`` or dies before saying how many GPUs it sees. The child's ``TMPDIR`` is a
    private folder (0700) removed when it ends, however it ends: what TensorFlow writes there
    (AutoGraph's generated files) is not left in the system's temporary folder.
    """
    if not tensorflow_installed():
        raise TensorFlowUnavailable(
            "`scan --tf` needs TensorFlow, which is not installed; install it with "
            "`pip install 'gputopo[tf]'`, or give a saved log with --tf-log FILE"
        )
    try:
        with tempfile.TemporaryDirectory(prefix="gputopo-tf-init-") as private_tmp, _stop_signals_as_interrupt():
            completed = subprocess.run(
                [sys.executable, "-c", script],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**child_environment(), "TMPDIR": private_tmp},
                timeout=timeout_s,
                check=False,
            )
    except subprocess.TimeoutExpired:
        raise GputopoError(
            f"TensorFlow's GPU initialisation did not finish within {timeout_s:.0f} s; "
            "run it by hand and give the log with --tf-log FILE"
        ) from None
    output = completed.stdout.decode("utf-8", errors="replace")
    if _IMPORT_ERROR_MARK in output:
        reason = output.split(_IMPORT_ERROR_MARK, 1)[1].strip().splitlines()[0]
        raise TensorFlowUnavailable(f"TensorFlow is installed but cannot be imported: {reason}")
    if _GPU_COUNT_MARK not in output:
        last = next((line.strip() for line in reversed(output.splitlines()) if line.strip()), "no output")
        raise GputopoError(
            f"TensorFlow's GPU initialisation failed (exit code {completed.returncode}): {last[:200]}"
        )
    return output


def tf_view_from_init_log(output: str) -> TfView:
    """TensorFlow's view from the child's output; a clear empty view when TF sees no GPU."""
    from gputopo.sources.tf.tflog import ERA_NO_GPU, parse_tf_log

    match = re.search(rf"{_GPU_COUNT_MARK} (\d+)", output)
    gpu_count = int(match.group(1)) if match else 0
    version = re.search(rf"{_VERSION_MARK} (\S+)", output)
    source = SOURCE_LABEL + (f", TensorFlow {version.group(1)}" if version else "")
    if gpu_count == 0:
        notes = []
        reasons = [line.strip() for line in output.splitlines() if _NO_GPU_REASON_RE.search(line)]
        if reasons:  # the first line that says why (its last 300 characters)
            notes.append(ReadingNote("tf-no-gpu-reason", {"said": reasons[0][-300:]}))
        return TfView(devices=[], peer=[], era=ERA_NO_GPU, source=source, visible_ordinals=[], reading_notes=notes)
    view = parse_tf_log(output, source)
    return view

