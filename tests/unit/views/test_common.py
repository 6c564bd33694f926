"""views.common: --json output is always strict JSON."""

from __future__ import annotations

import json

from gputopo.views.common import print_json


def test_print_json_writes_null_for_nan_and_infinity(capsys):
    print_json({"gbps": float("inf"), "pairs": [{"latency_us": float("nan"), "ok": 1.5}], "name": "x"})
    text = capsys.readouterr().out
    data = json.loads(text, parse_constant=lambda name: (_ for _ in ()).throw(ValueError(name)))
    assert data == {"gbps": None, "pairs": [{"latency_us": None, "ok": 1.5}], "name": "x"}


def test_terminal_safe_drops_control_characters_but_keeps_newlines_and_tabs():
    from gputopo.views.common import terminal_safe

    assert terminal_safe("Tesla\x1b]0;x\x07 V100\x1b[2J\r\x9b1m\x7f\n\tok") == "Tesla]0;x V100[2J1m\n\tok"


def test_print_json_onto_a_full_disk_is_one_output_error(monkeypatch):
    import errno
    import io
    import sys

    import pytest

    from gputopo.errors import OutputError

    class Full(io.StringIO):
        def write(self, text):
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(sys, "stdout", Full())
    with pytest.raises(OutputError, match="cannot write to standard output: No space left on device"):
        print_json({"a": 1})


def test_the_console_replaces_what_the_stream_cannot_encode(monkeypatch):
    import io
    import sys

    from gputopo.views.common import out

    raw = io.BytesIO()
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(raw, encoding="ascii"))
    out().print("DGX-1 — reference ✓")
    sys.stdout.flush()
    assert raw.getvalue().decode("ascii") == "DGX-1 ? reference ?\n"


def test_the_spinner_is_rich_only_where_rich_could_show_it(monkeypatch):
    import contextlib
    import io
    import sys

    from gputopo.views import common

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    for name in common._TERMINAL_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(sys, "stderr", io.StringIO())  # a pipe or a file: rich would show nothing
    assert isinstance(common.status("Ranking..."), contextlib.nullcontext)
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes any stream for a terminal
    assert type(common.status("Ranking...")).__name__ == "Status"
    monkeypatch.delenv("FORCE_COLOR")
    monkeypatch.setattr(sys, "stderr", Terminal())
    assert type(common.status("Ranking...")).__name__ == "Status"


def test_json_output_does_not_need_rich():
    import subprocess
    import sys

    code = "import sys; from gputopo.views.common import print_json; print_json({'a': 1}); print('rich' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "False"
