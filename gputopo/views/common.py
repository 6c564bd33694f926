"""Shared output plumbing: the rich consoles, JSON printing, and what is safe to show on a terminal.

rich is imported only where a console or a table is made: ``--json`` output needs none of it.

Everything for standard output goes through one guarded stream: a failed write (disk full, closed
pipe) becomes one ``OutputError`` line instead of a traceback, characters the stream's encoding
cannot show (``PYTHONIOENCODING=ascii``) become ``?``, and control characters inside the text that
is shown (a GPU name or hostname from a snapshot, ``nvidia-smi`` text or a TF log carrying terminal
escape codes) are dropped by ``terminal_safe`` before they reach the terminal.
"""

from __future__ import annotations

import errno
import functools
import os
import re
import sys
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, Iterable, TextIO

from gputopo.errors import OutputClosed, OutputError
from gputopo.quoting import terminal_safe as terminal_safe  # re-exported: gputopo.quoting owns it
from gputopo.sources.snapshot import strict_json_text

if TYPE_CHECKING:  # rich is imported where a console or table is made, never for --json
    from rich.console import Console, Group
    from rich.text import Text

# C0 controls except newline and tab, DEL, and C1 controls (0x9b is an 8-bit CSI on some terminals).
_CONTROL_CHARS_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
# A write that fails with these is the output's fault (full disk, closed pipe), not gputopo's.
OUTPUT_ERRNOS = frozenset({errno.EPIPE, errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EBADF})


def silence_stdout() -> None:
    """Point file descriptor 1 at /dev/null after a failed write, so the interpreter's last flush
    of what is still buffered does not fail again ("Exception ignored ...") on the way out."""
    try:
        fd = sys.stdout.fileno()
        devnull = os.open(os.devnull, os.O_WRONLY)
    except (OSError, ValueError, AttributeError):
        return  # not a real file (a test's capture): nothing is flushed at exit
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


_TRAILING_SPACES_RE = re.compile(r" +\n")


class _GuardedStream:
    """A text stream for the consoles and ``print_json``: failed writes become ``OutputError``,
    unencodable characters become ``?``. Everything else is the wrapped stream's."""

    def __init__(self, stream: TextIO, label: str) -> None:
        self.stream = stream
        self.label = label
        isatty = getattr(stream, "isatty", None)
        self.strip_trailing_spaces = not (isatty() if callable(isatty) else False)

    def _failed(self, exc: OSError) -> OutputError:
        if self.stream is sys.stdout:
            silence_stdout()
        if exc.errno == errno.EPIPE and self.stream is sys.stdout:
            return OutputClosed(f"{self.label} was closed by its reader")
        return OutputError(f"cannot write to {self.label}: {exc.strerror or exc}")

    def write(self, text: str) -> int:
        if self.strip_trailing_spaces and " \n" in text:
            # Piped or redirected: the spaces rich pads each line with to its width go (they make
            # `diff` and `grep ' $'` noisy); a terminal keeps them (a background colour may need them).
            text = _TRAILING_SPACES_RE.sub("\n", text)
        try:
            try:
                return self.stream.write(text)
            except UnicodeEncodeError:
                encoding = getattr(self.stream, "encoding", None) or "ascii"
                return self.stream.write(text.encode(encoding, "replace").decode(encoding))
        except OSError as exc:
            raise self._failed(exc) from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as exc:
            raise self._failed(exc) from None

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding, ... as the stream has them
        return getattr(self.stream, name)


@functools.lru_cache(maxsize=None)
def _safe_console_class() -> type[Console]:
    """The rich console class that drops control characters from the text it is given
    (``terminal_safe``) while keeping its own styling codes, which rich adds after rendering.
    Made on first use, so that importing this module does not import rich."""
    from rich.console import Console, ConsoleOptions, RenderableType
    from rich.segment import Segment

    class _SafeConsole(Console):
        def render(self, renderable: RenderableType, options: ConsoleOptions | None = None) -> Iterable[Segment]:
            return self._safe(super().render(renderable, options))

        @staticmethod
        def _safe(segments: Iterable[Segment]) -> Iterable[Segment]:
            for segment in segments:
                if segment.control is None and _CONTROL_CHARS_RE.search(segment.text):
                    yield Segment(terminal_safe(segment.text), segment.style, segment.control)
                else:
                    yield segment

    return _SafeConsole


_stdout: Console | None = None
_stderr: Console | None = None


def _stream_of(console: Console | None) -> Any:
    return getattr(console.file, "stream", None) if console is not None else None


def out() -> Console:
    """The console for human output (created on first use so tests can capture stdout)."""
    global _stdout
    if _stdout is None or _stream_of(_stdout) is not sys.stdout:
        _stdout = _safe_console_class()(file=_GuardedStream(sys.stdout, "standard output"), highlight=False, emoji=False)  # type: ignore[arg-type]
    return _stdout


def err() -> Console:
    """The console for progress and notes (standard error), keeping stdout clean for --json."""
    global _stderr
    if _stderr is None or _stream_of(_stderr) is not sys.stderr:
        _stderr = _safe_console_class()(file=_GuardedStream(sys.stderr, "standard error"), highlight=False, emoji=False)  # type: ignore[arg-type]
    return _stderr


# With one of these set, rich may take standard error for a terminal even when it is not a TTY.
_TERMINAL_ENV_VARS = ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES")


def status(message: str, spinner: str = "dots") -> AbstractContextManager[Any]:
    """A spinner with ``message`` on standard error while a step runs. rich shows it only on a
    terminal; where standard error is no terminal (a pipe, a file, a script), and no variable tells
    rich to treat it as one, nothing would be shown, so rich is not even loaded."""
    try:
        maybe_terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):
        maybe_terminal = False
    if not maybe_terminal and not any(name in os.environ for name in _TERMINAL_ENV_VARS):
        return nullcontext()
    return err().status(message, spinner=spinner)


def print_json(data: Any) -> None:
    """``--json`` output: always valid JSON (json.dumps would write NaN / Infinity, which strict
    parsers such as jq and JSON.parse reject), so a non-finite figure becomes null. Control
    characters in strings are JSON escapes (``\\u001b``), never raw. A failed write is one
    ``OutputError``."""
    print_json_text(strict_json_text(data))


def print_json_text(text: str | Iterable[str]) -> None:
    """``print_json`` of JSON text made already, or of its parts (``Topology.json_parts``: written
    as they are made, a large domain's text never held whole)."""
    stream = _GuardedStream(sys.stdout, "standard output")
    for part in (text,) if isinstance(text, str) else text:
        stream.write(part)
    stream.flush()


def matrix_tables(
    title: str, headers: list[str], rows: list[tuple[str, list[Text]]], width: int | None, min_cell: int = 4
) -> list[Group]:
    """A matrix as one table, or as one table per block of columns when it is wider than ``width``:
    every row label and every column stays readable (rich would otherwise cut both to '…')."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    cell_widths = [
        max(min_cell, len(header), *(len(cells[k].plain) for _, cells in rows)) for k, header in enumerate(headers)
    ]
    label_width = max((len(label) for label, _ in rows), default=0)
    blocks: list[list[int]] = [list(range(len(headers)))]
    if width is not None:
        # Each cell takes its width plus one space either side (see the tables' padding below).
        per_block = max(1, (width - label_width - 2) // (max(cell_widths, default=min_cell) + 2))
        if per_block < len(headers):
            count = -(-len(headers) // per_block)
            size = -(-len(headers) // count)  # even blocks: 16 columns in 8 + 8, not 12 + 4
            blocks = [list(range(k, min(k + size, len(headers)))) for k in range(0, len(headers), size)]
    tables = []
    for block in blocks:
        part = title if len(blocks) == 1 else f"{title}, columns {headers[block[0]]}..{headers[block[-1]]}"
        table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, collapse_padding=True)
        table.add_column("", no_wrap=True, min_width=label_width)
        for k in block:
            table.add_column(Text(headers[k]), justify="center", no_wrap=True, min_width=cell_widths[k])
        for label, cells in rows:
            table.add_row(Text(label), *(cells[k] for k in block))
        # The title on its own line: as a table title rich would wrap it to the table's width
        # ("Links between GPUs / (nvidia-smi words, / coloured by / ..." over a 2-GPU matrix).
        tables.append(Group(Text(part, style="table.title"), table))
    return tables


def indented(text: Any, indent: int = 2) -> Any:
    """``text`` (a rich Text) printed ``indent`` columns in, its wrapped lines under its own first
    column, never back at column 0; rich wraps at spaces, so a word or a number stays whole."""
    from rich.padding import Padding

    return Padding(text, (0, 0, 0, indent))


def labelled(label: Any, text: Any, indent: int = 0) -> Any:
    """``label text`` with the text's wrapped lines under the text, not under the label."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 1))
    grid.add_column(no_wrap=True)
    grid.add_column()
    grid.add_row(label, text)
    return indented(grid, indent) if indent else grid
