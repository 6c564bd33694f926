"""A cold start imports only what the command needs (issue 14): no rich for --json, no pydantic, no
TensorFlow or NVML for a file or a reference machine, no other command's modules. Run as fresh
processes, the way `gputopo ...` / `python -m gputopo ...` starts; no timings are asserted (the
figures are benchmarks/scan_cold_start.py's)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DGX1_TEXT = str(REPO / "tests/fixtures/shared/topo/dgx1_v100_8gpu_mlx5.txt")

# A child that runs `python -m gputopo ARGS` and then writes the names of every imported module.
_CHILD = """
import json, runpy, sys
modules_path, sys.argv = sys.argv[1], ["gputopo", *sys.argv[2:]]
try:
    runpy.run_module("gputopo", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(modules_path, "w") as f:
    json.dump(sorted(sys.modules), f)
sys.exit(code)
"""

HEAVY = ("tensorflow", "keras", "pynvml", "pydantic")
OTHER_COMMANDS = ("gputopo.bench", "gputopo.train", "gputopo.cli.bench", "gputopo.cli.train", "gputopo.cli.report")


def imported_by(tmp_path: Path, *args: str) -> set[str]:
    """Every module a fresh `python -m gputopo ARGS` imported (its exit code must be 0)."""
    modules_path = tmp_path / "modules.json"
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(modules_path), *args],
        capture_output=True, text=True, cwd=tmp_path, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return set(json.loads(modules_path.read_text()))


def loaded(modules: set[str], *packages: str) -> list[str]:
    """Those of ``packages`` that were imported, themselves or any module inside them."""
    return [p for p in packages if any(m == p or m.startswith(p + ".") for m in modules)]


@pytest.mark.parametrize("source", [["--from", DGX1_TEXT], ["--machine", "dgx1"]], ids=["from-text", "machine"])
def test_scan_json_imports_neither_rich_nor_pydantic_nor_other_commands(tmp_path, source):
    modules = imported_by(tmp_path, "scan", *source, "--json")
    assert "gputopo.cli.scan" in modules
    unwanted = (*HEAVY, "rich", "gputopo.analysis.recommend", "gputopo.views.topology", "gputopo.cli.recommend",
                *OTHER_COMMANDS)  # fmt: skip
    assert loaded(modules, *unwanted) == []


def test_scan_human_output_loads_rich_but_nothing_heavy(tmp_path):
    modules = imported_by(tmp_path, "scan", "--from", DGX1_TEXT)
    assert "rich.console" in modules
    assert loaded(modules, *HEAVY, "gputopo.analysis.recommend", *OTHER_COMMANDS) == []


def test_recommend_json_imports_no_rich(tmp_path):
    modules = imported_by(tmp_path, "recommend", "--machine", "dgx1", "--gpus", "4", "--json")
    assert "gputopo.analysis.recommend" in modules
    assert loaded(modules, *HEAVY, "rich", "gputopo.views.recommend", "gputopo.cli.scan", *OTHER_COMMANDS) == []


def test_importing_the_cli_registers_no_command_yet(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-c", "import json, sys, gputopo.cli; print(json.dumps(sorted(sys.modules)))"],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stdout))
    assert loaded(modules, *HEAVY, "rich", "gputopo.cli.scan", "gputopo.cli.recommend", *OTHER_COMMANDS) == []


def test_help_still_lists_every_command_in_order(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "gputopo", "--help"], capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env={"COLUMNS": "120", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)},  # this checkout's commands
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    from gputopo.cli import COMMAND_MODULES

    listed = [line.strip("│ ").split()[0] for line in proc.stdout.splitlines() if line.startswith("│ ")]
    assert [name for name in listed if name in COMMAND_MODULES] == list(COMMAND_MODULES), proc.stdout


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["scan", "--json"], "scan"),
        (["--version"], None),
        (["--help", "scan"], None),
        (["scna"], None),
        ([], None),
        (["bench-p2p", "--help"], "bench-p2p"),
        (["recommend", "--gpus", "4", "scan"], "recommend"),
    ],
)
def test_only_the_named_command_is_registered_for_a_run(args, named):
    from gputopo.cli import _command_named

    assert _command_named(args) == named


def test_the_app_has_every_command_whatever_was_imported_first():
    import gputopo.cli.report  # noqa: F401  (registers report first if nothing else was)
    from gputopo.cli import COMMAND_MODULES, app

    assert [info.name for info in app.registered_commands] == list(COMMAND_MODULES)


def test_watch_imports_no_tensorflow_nor_other_commands(tmp_path):
    # No NVML here: the command ends with exit 3, after importing what it needs (the help imports the module).
    modules = imported_by(tmp_path, "watch", "--help")
    assert "gputopo.cli.watch" in modules
    assert loaded(modules, "tensorflow", "keras", "pydantic", "gputopo.bench", "gputopo.cli.train",
                  "gputopo.cli.bench", "gputopo.analysis.recommend") == []
