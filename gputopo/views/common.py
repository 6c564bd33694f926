"""Shared output plumbing: the rich consoles and JSON printing."""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

_stdout: Console | None = None
_stderr: Console | None = None


def out() -> Console:
    """The console for human output (created on first use so tests can capture stdout)."""
    global _stdout
    if _stdout is None or _stdout.file is not sys.stdout:
        _stdout = Console(file=sys.stdout, highlight=False)
    return _stdout


def err() -> Console:
    """The console for progress and notes (standard error), keeping stdout clean for --json."""
    global _stderr
    if _stderr is None or _stderr.file is not sys.stderr:
        _stderr = Console(file=sys.stderr, highlight=False)
    return _stderr


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
    sys.stdout.flush()
