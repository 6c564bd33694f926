"""Exit codes scripts can trust (docs/exit-codes.md): 0 fine, 1 a check failed, 2 usage or bad
input, 3 the environment; and every failure is one `gputopo: error:` line, also for usage errors and
for output that cannot be written."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import REPO, assert_one_error_line

from gputopo.errors import (
    EXIT_CHECK_FAILED,
    EXIT_ENVIRONMENT,
    EXIT_PIPE_CLOSED,
    EXIT_USAGE,
    CheckFailed,
    GputopoError,
    InputError,
    NvmlUnavailable,
    OutputError,
    TensorFlowUnavailable,
)


def _gputopo(*args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """The real console path (``python -m gputopo``), for what only a real process shows."""
    kwargs.setdefault("stdout", subprocess.PIPE)
    kwargs.setdefault("stderr", subprocess.PIPE)
    return subprocess.run([sys.executable, "-m", "gputopo", *args], cwd=REPO, timeout=120,
                          env={**os.environ, **(env or {})}, **kwargs)


def test_each_error_class_has_its_exit_code():
    assert GputopoError.exit_code == InputError.exit_code == EXIT_USAGE == 2
    assert NvmlUnavailable.exit_code == TensorFlowUnavailable.exit_code == OutputError.exit_code == EXIT_ENVIRONMENT == 3
    assert CheckFailed.exit_code == EXIT_CHECK_FAILED == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["scan", "--bogus"], "No such option: --bogus"),
        (["scan", "--from"], "Option '--from' requires an argument"),
        (["recommend", "--machine", "dgx1"], "--gpus is needed"),
        (["recommend", "--machine", "dgx1", "--gpus", "four"], "Invalid value for '--gpus'"),
        (["no-such-command"], "No such command 'no-such-command'"),
    ],
)
def test_usage_errors_are_one_line_with_exit_code_2(cli, args, fragment):
    line = assert_one_error_line(cli(*args), EXIT_USAGE)
    assert fragment in line and "--help" in line


def test_usage_errors_are_one_line_from_the_console_script_too():
    # An option with no near name (click would add "(Possible options: --host)" to `--bogus`).
    result = _gputopo("scan", "--no-such-option", text=True)
    assert result.returncode == EXIT_USAGE and result.stdout == ""
    assert result.stderr.splitlines() == ["gputopo: error: No such option: --no-such-option (see 'gputopo scan --help')"]


def test_help_and_version_still_exit_0(cli):
    assert cli("scan", "--help").exit_code == 0
    assert cli("--version").exit_code == 0


def test_no_nvml_is_the_environment_exit_code(cli, monkeypatch):
    import gputopo.sources.host.nvml

    def no_driver():
        raise NvmlUnavailable("cannot read this host's GPUs through NVML: no driver")

    monkeypatch.setattr(gputopo.sources.host.nvml, "probe", no_driver)
    line = assert_one_error_line(cli("scan"), EXIT_ENVIRONMENT)
    assert "NVML" in line


def test_tensorflow_missing_is_the_environment_exit_code(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "tensorflow", None)  # `import tensorflow` now raises ImportError
    line = assert_one_error_line(cli("bench-p2p", "--cpu-devices", "2"), EXIT_ENVIRONMENT)
    assert "TensorFlow" in line


def _snapshot_with_findings(tmp_path, severities):
    from gputopo.sources.reference import load_reference

    data = load_reference("two-socket-4gpu").to_dict()
    data["diagnostics"] = [{"severity": s, "code": f"c{k}", "message": "m", "gpus": []} for k, s in enumerate(severities)]
    path = tmp_path / "box.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_fail_on_exits_1_with_the_count_after_showing_the_topology(cli, monkeypatch, tmp_path):
    import gputopo.analysis

    monkeypatch.setattr(gputopo.analysis, "with_findings", lambda topology, diagnosed=True: topology)  # the snapshot's findings only
    box = _snapshot_with_findings(tmp_path, ["info", "warning", "error", "warning"])
    result = cli("scan", "--from", box, "--fail-on", "warning", "--json")
    assert result.exit_code == EXIT_CHECK_FAILED
    assert len(json.loads(result.stdout)["diagnostics"]) == 4  # shown first
    # (codes this version does not know count as faults: a check never passes what it cannot place)
    assert result.stderr.splitlines() == ["gputopo: error: 3 faults at or above warning (c1, c2, c3; --fail-on warning)"]
    result = cli("scan", "--from", box, "--fail-on", "error")
    assert result.exit_code == EXIT_CHECK_FAILED and "one fault at or above error (c2;" in result.stderr

    calm = _snapshot_with_findings(tmp_path, ["info", "warning"])
    assert cli("scan", "--from", calm, "--fail-on", "error").exit_code == 0
    assert cli("scan", "--from", calm).exit_code == 0  # no --fail-on: findings never fail
    line = assert_one_error_line(cli("scan", "--from", calm, "--fail-on", "info"), EXIT_USAGE)
    assert "--fail-on must be warning or error" in line


def test_a_full_disk_on_stdout_is_one_line_and_the_environment_exit_code():
    for args in (["scan", "--machine", "dgx1", "--json"], ["scan", "--machine", "dgx1"]):
        with open("/dev/full", "w") as full:
            result = _gputopo(*args, stdout=full, stderr=subprocess.PIPE, text=True)
        assert result.returncode == EXIT_ENVIRONMENT, result.stderr
        assert result.stderr.splitlines() == ["gputopo: error: cannot write to standard output: No space left on device"]


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_a_pipe_closed_by_its_reader_stops_quietly_with_the_sigpipe_code(json_flag):
    """`gputopo scan | head`: the reader went away; that is not an error of ours, so nothing is said
    on stderr, and the exit code is what a shell reports for SIGPIPE (141: non-zero under pipefail)."""
    reader, writer = os.pipe()
    os.close(reader)  # nobody reads: the first write fails with EPIPE
    try:
        result = _gputopo("scan", "--machine", "dgx1", *json_flag, stdout=writer, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(writer)
    assert result.returncode == EXIT_PIPE_CLOSED, result.stderr
    assert result.stderr == ""


def test_an_ascii_only_stdout_gets_the_tables_with_characters_replaced():
    result = _gputopo("scan", "--machine", "dgx1", env={"PYTHONIOENCODING": "ascii"})
    assert result.returncode == 0, result.stderr.decode()
    assert result.stderr == b""
    assert b"DGX-1" in result.stdout
    result.stdout.decode("ascii")  # nothing but ASCII reached the stream


def test_error_lines_carry_no_control_characters_and_are_bounded(tmp_path, cli):
    """Review 2: escape sequences in a file name, an NVML process name or an unknown option reached
    the terminal raw through the error line; a 12 MB table cell was echoed whole."""
    from conftest import assert_one_error_line

    line = assert_one_error_line(cli("scan", "--from", str(tmp_path / "a\x1b]0;pwn\x07b")))
    assert "\x1b" not in line and "\x07" not in line and "a]0;pwnb" in line
    line = assert_one_error_line(cli("scan", "--bo\x1b[31mgus"))
    assert "\x1b" not in line
    result = cli("scan", "--from", str(tmp_path / ("q" * 200)) * 20)  # a 4 KB name echoed in the error
    assert result.exit_code == 2 and len(result.output) < 2100 and result.output.rstrip().endswith("...")
