"""TensorFlow's native log of a training child goes to a file, not the user's terminal; the parent's
one line carries its last error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from gputopo.train.native_log import LOG_ENV, last_native_error, log_env

REPO = Path(__file__).resolve().parents[3]
CHILD = ("import os, sys\n"
         "from gputopo.train.native_log import redirect_native_stderr\n"
         "print(redirect_native_stderr())\n"
         "os.write(2, b'2026-12-06 07:00:00.123456: E tensorflow/core/x.cc:12] Socket closed \\x1b[31m\\n')\n"
         "os.write(2, b'W0000 00:00:1.0 42 y.cc:3] a warning\\n')\n"
         "sys.stderr.write('gputopo train: step 1\\n')\n")


def _run(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO), **env})


def test_native_lines_go_to_the_log_and_python_keeps_the_terminal(tmp_path):
    log = tmp_path / "result-1.tf.log"
    done = _run({LOG_ENV: str(log)})
    assert done.stdout.strip() == "True"
    assert done.stderr == "gputopo train: step 1\n"  # nothing of TensorFlow's on the terminal
    assert "Socket closed" in log.read_text() and oct(log.stat().st_mode & 0o777) == "0o600"
    said = last_native_error(log)  # the warning after it is no error
    assert said.startswith("Socket closed") and "\x1b" not in said  # the escape cannot act on a terminal


def test_a_link_at_the_log_path_is_not_followed_and_nothing_changes(tmp_path):
    target = tmp_path / "elsewhere"
    os.symlink(target, tmp_path / "x.tf.log")
    done = _run({LOG_ENV: str(tmp_path / "x.tf.log")})
    assert done.stdout.strip() == "False" and "Socket closed" in done.stderr and not target.exists()


def test_a_user_who_set_tf_cpp_min_log_level_sees_tensorflow_as_before():
    assert log_env("/run/x.tf.log", {"TF_CPP_MIN_LOG_LEVEL": "0"}) == {}
    assert log_env("/run/x.tf.log", {}) == {LOG_ENV: "/run/x.tf.log"}


def test_the_last_error_in_either_format_and_none_without_one(tmp_path):
    log = tmp_path / "a.log"
    log.write_text("E0601 10:00:00.1 4242 collective.cc:9] Collective ops is aborted by: peer down\nI0601 info] x\n")
    assert last_native_error(log) == "Collective ops is aborted by: peer down"
    log.write_text("W0601 10:00:00.1 4242 a.cc:9] only a warning\n")
    assert last_native_error(log) is None and last_native_error(tmp_path / "missing") is None
