"""Shared test helpers: where the shared fixtures live, and a CLI runner."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
TESTS = Path(__file__).resolve().parent
# Real captures and logs from the project's shared/ folder, copied byte for byte into the repository
# (tests/fixtures/shared/SOURCES.md says where each came from), so a bare clone passes `make test`.
SHARED_FIXTURES = TESTS / "fixtures" / "shared"
TOPO_FIXTURES = sorted((SHARED_FIXTURES / "topo").glob("*.txt"))
TF_LOG_FIXTURES = sorted((SHARED_FIXTURES / "tf_logs").glob("*.log"))
OWN_FIXTURES = TESTS / "fixtures"


def corpus_known_gaps() -> dict[str, str]:
    """Corpus files gputopo does not read right yet: tests/fixtures/corpus/KNOWN_GAPS.md, one line
    `- name: reason` each. Their checks run as one strict xfail per file, so a reader that gets a file
    right fails the run until its line is removed (the list only shrinks)."""
    gaps = {}
    for line in (OWN_FIXTURES / "corpus" / "KNOWN_GAPS.md").read_text().splitlines():
        name, sep, reason = line.removeprefix("- ").partition(": ")
        if line.startswith("- ") and sep:
            gaps[name.strip("`")] = reason
    return gaps


def process_alive(pid: int) -> bool:
    """Whether process ``pid`` runs (a zombie has ended: only its parent has not read its status)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def assert_process_ends(pid: int, within_s: float, outlived: str) -> None:
    """Wait up to ``within_s`` for ``pid`` to end; if it has not, kill it and fail with ``outlived``."""
    import os
    import signal
    import time

    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline and process_alive(pid):
        time.sleep(0.1)
    if process_alive(pid):
        os.kill(pid, signal.SIGKILL)
        pytest.fail(outlived)


def assert_one_error_line(result, exit_code: int = 2) -> str:
    """A user error: exactly one line ``gputopo: error: ...``, the exit code, no traceback. Returns the line."""
    lines = [line for line in result.output.strip().splitlines() if line.strip()]
    assert result.exit_code == exit_code, result.output
    assert len(lines) == 1, result.output
    assert lines[0].startswith("gputopo: error: "), result.output
    assert "Traceback" not in result.output
    return lines[0]


@pytest.fixture
def cli():
    """Invoke the gputopo CLI in process: ``cli("scan", "--machine", "dgx1")`` -> click Result."""
    from typer.testing import CliRunner

    from gputopo.cli import app

    runner = CliRunner()

    def invoke(*args: str, input: str | None = None):
        return runner.invoke(app, list(args), input=input)

    return invoke


@pytest.fixture(scope="session")
def tf_cpu_devices():
    """Eight logical CPU devices in this test process (TensorFlow allows one configuration per
    process, so every in-process TF test uses these eight; tests that need another count or a
    separate MirroredStrategy run TensorFlow in a subprocess)."""
    pytest.importorskip("tensorflow")
    from gputopo.tfruntime import configure_logical_cpu_devices

    return configure_logical_cpu_devices(8)


@pytest.fixture(scope="session")
def tf(tf_cpu_devices):
    """TensorFlow itself, imported through gputopo's one door, on the eight logical CPU devices."""
    from gputopo.tfruntime import import_tensorflow

    return import_tensorflow()


@pytest.fixture(scope="session")
def four(tf_cpu_devices):
    """The first four logical CPU devices as bench-p2p devices (standing for GPUs 0-3)."""
    from gputopo.bench.run import cpu_bench_devices

    return cpu_bench_devices(tf_cpu_devices[:4], None)

