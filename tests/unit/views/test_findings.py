"""views.findings: a command a user is meant to paste survives a copy at 60, 80 and 120 columns.

Every command of doctor's and scan's findings (backticked in their text) and every paste-ready line
of recommend is taken from the rendered text, line by line, and checked by ``bash -n``: a command
broken across lines (or cut with '…') leaves a line with an odd number of backticks or a line bash
refuses."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from conftest import OWN_FIXTURES
from rich.console import Console
from rich.text import Text

from gputopo.sources.reference import machine_names
from gputopo.views.findings import hanging_lines

DOCTOR = OWN_FIXTURES / "doctor"
BOX = DOCTOR / "constructed"
WIDTHS = (60, 80, 120)
_SPAN = re.compile(r"`([^`]+)`")
# A span is a command where it starts with a program's name and has arguments (`iommu=pt`, `;`,
# `Bus: primary=..` are words or quoted output, not commands).
_COMMAND = re.compile(r"^(?:[A-Z_]+=\S+ )*(?:sudo |for |[a-z][a-z0-9_.-]*(?:\.sh)? )")


def _commands(text: str) -> list[str]:
    found = []
    for line in text.splitlines():
        assert line.count("`") % 2 == 0, f"a backticked span is broken across lines: {line!r}"
        assert "…" not in line or "`" not in line, f"a command is cut: {line!r}"
        found += [span for span in _SPAN.findall(line) if _COMMAND.match(span)]
    return found


def _bash_checks(commands: list[str]) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash")
    # Placeholders (`<bdf>`) stand for a word the user fills in.
    script = "\n".join(re.sub(r"<([a-z-]+)>", r"\1", command) for command in commands) + "\n"
    result = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True, check=False)
    assert result.returncode == 0, (result.stderr, script)


def _doctor_texts(cli):
    for path in sorted(DOCTOR.glob("*.txt")):
        yield cli("doctor", "--from", str(path)).output
    yield cli("doctor", *(f"--from={p}" for p in sorted(BOX.glob("*.txt")))).output


@pytest.mark.parametrize("columns", WIDTHS)
def test_doctor_commands_survive_a_copy(columns, monkeypatch, cli):
    monkeypatch.setenv("COLUMNS", str(columns))
    commands = [command for text in _doctor_texts(cli) for command in _commands(text)]
    assert any(command.startswith("for b in ") for command in commands)  # the setpci loop, whole
    assert any("--query-gpu=" in command for command in commands)
    _bash_checks(commands)


@pytest.mark.parametrize("columns", WIDTHS)
def test_scan_fixes_survive_a_copy(columns, monkeypatch, cli):
    monkeypatch.setenv("COLUMNS", str(columns))
    texts = [cli("scan", "--from", str(BOX / "topo_m.txt"), "--from", str(BOX / "p2pBandwidthLatencyTest.txt")).output]
    texts += [cli("scan", "--machine", name).output for name in machine_names()]
    commands = [command for text in texts for command in _commands(text)]
    assert any("--query-gpu=" in command for command in commands)  # gpu-slow-to-every-peer's fix, not cut
    _bash_checks(commands)


@pytest.mark.parametrize("columns", WIDTHS)
def test_recommend_paste_ready_lines_survive_a_copy(columns, monkeypatch, cli):
    monkeypatch.setenv("COLUMNS", str(columns))
    commands = []
    for name in machine_names():
        result = cli("recommend", "--machine", name, "--gpus", "2", "--jobs", "2")
        if result.exit_code:  # a 2-GPU machine holds one job
            result = cli("recommend", "--machine", name, "--gpus", "2")
        text = result.output
        lines = [line.strip() for line in text.split("Paste-ready (best group):", 1)[1].splitlines()]
        for line in lines:
            line = re.sub(r"^(job \d+: )?(on \S+: )?", "", line)
            if line.startswith("CUDA_DEVICE_ORDER="):
                assert line.endswith("python train.py"), line  # one line, not wrapped
                commands.append(line)
    assert commands
    _bash_checks(commands)


def test_hanging_lines_never_break_a_backticked_span():
    console = Console(width=40)
    text = Text("run `for b in 0000:40:01.1 0000:80:01.1; do sudo setpci -s \"$b\" ECAP_ACS+6.w=0000; done` "
                "then reboot")
    lines = [line.plain for line in hanging_lines(text, console.width, 4)]
    assert lines[0] == "run"
    assert lines[1].startswith("    `for b in") and lines[1].endswith("done`")  # longer than 40: a line of its own
    assert lines[2] == "    then reboot"
