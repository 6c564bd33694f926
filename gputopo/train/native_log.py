"""TensorFlow's native log of a training child, kept out of the user's terminal (both sides; no TF).

TensorFlow's C++ runtime writes its errors straight to file descriptor 2: when one worker of a
cluster dies, the others print gRPC and collective errors there, and the user saw a screen of them
before gputopo's one line naming the cause. So the parent names a file in the run's private folder
(``LOG_ENV``), and the child, before TensorFlow loads, points descriptor 2 at it while Python's own
``sys.stderr`` (the progress bar, ``gputopo train:`` messages) keeps the terminal. When a child
fails, the parent's one line ends with TensorFlow's last error line from that file (bounded,
terminal-safe), and the file goes with the run folder.

Where the user set ``TF_CPP_MIN_LOG_LEVEL`` (to see TensorFlow's own log), nothing is redirected.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Mapping

from gputopo.quoting import one_line

LOG_ENV = "GPUTOPO_TF_LOG"
MAX_TAIL_BYTES = 64 << 10
MAX_SHOWN = 300


def log_env(log_path: os.PathLike[str] | str, environ: Mapping[str, str]) -> dict[str, str]:
    """What the parent adds to a child's environment: the log file, unless the user asked to see
    TensorFlow's own output (``TF_CPP_MIN_LOG_LEVEL`` set)."""
    return {} if "TF_CPP_MIN_LOG_LEVEL" in environ else {LOG_ENV: os.fspath(log_path)}


def redirect_native_stderr(environ: Mapping[str, str] = os.environ) -> bool:
    """In the child, before TensorFlow loads: descriptor 2 to the file ``LOG_ENV`` names (a new
    file, never through a link), ``sys.stderr`` to a copy of the terminal. False where not asked or
    the file cannot be made (then nothing changes)."""
    path = environ.get(LOG_ENV)
    if not path:
        return False
    try:
        log_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    except OSError:
        return False
    try:
        sys.stderr.flush()
        terminal_fd = os.dup(2)
        os.dup2(log_fd, 2)
    finally:
        os.close(log_fd)
    sys.stderr = io.TextIOWrapper(os.fdopen(terminal_fd, "wb", buffering=0), encoding="utf-8",
                                  errors="backslashreplace", line_buffering=True, write_through=True)
    return True


def last_native_error(path: os.PathLike[str] | str) -> str | None:
    """TensorFlow's last error line in the child's log (``E`` severity, either of its two formats:
    ``2024-06-01 10:00:00.1: E tensorflow/...cc:12] message`` or ``E0601 10:00:00.1 123 x.cc:12] message``),
    its message one line and bounded; None where there is none (or no file)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as log:
        size = os.fstat(log.fileno()).st_size
        log.seek(max(0, size - MAX_TAIL_BYTES))
        tail = log.read(MAX_TAIL_BYTES).decode("utf-8", "replace")
    for line in reversed(tail.splitlines()):
        head, bracket, message = line[:2000].partition("] ")
        if bracket and message.strip() and _is_error_head(head):
            return one_line(message.strip())[:MAX_SHOWN]
    return None


def _is_error_head(head: str) -> bool:
    words = head.split()
    if not words:
        return False
    if words[0][:1] == "E" and words[0][1:5].isdigit():  # absl: E0601 10:00:00.123 4242 file.cc:12
        return True
    return "E" in words[:4]  # TensorFlow's own: 2024-06-01 10:00:00.1: E tensorflow/...
