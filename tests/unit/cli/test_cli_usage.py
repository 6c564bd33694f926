"""Usage errors and options mean one thing everywhere (issue 24): the hint names the command whose
help to read, --format's error lists every format, -h/-V exist, help fits 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, assert_one_error_line


def _gputopo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputopo", *args], cwd=REPO, timeout=120, text=True,
                          capture_output=True, env={**os.environ, **(env or {})})


def test_an_option_without_its_value_points_at_the_commands_help():
    run = _gputopo("scan", "--machine")
    assert run.returncode == 2
    assert run.stderr.strip().endswith("(see 'gputopo scan --help')"), run.stderr


def test_the_format_error_names_slurm_too(cli):
    line = assert_one_error_line(cli("recommend", "--machine", "dgx1", "-n", "2", "--format", "yaml"))
    assert "slurm" in line and "json" in line
