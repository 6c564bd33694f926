"""A paste as users bring it, made plain before any reader sees it (``doctor --from``): the same
lines whatever the ticket's dressing. Removed: CR line ends, markdown code fences (```` ``` ````) and
bold or underline marks (``**``, ``__``), and a prefix that every line of the paste carries
(``pdsh``/``clush`` put ``host: `` before each line; a shell prompt ``$ `` or ``# `` on every line),
where the text read without it recognises more (``unprefixed``; ``NVRM: `` on every line is dmesg's).
A prompt on some lines only is kept: ``# found this`` after a kernel command line is a comment that
ends it, and the readers find a command wherever it sits on its line. Lines are not cut here (the
readers of ``pasted_lspci``, ``pasted_kernel`` and ``pasted_smi`` bound their own work); the readers
of ``pasted_more`` see at most ``MAX_LINE_CHARS`` of a line."""

from __future__ import annotations

import re

MAX_LINE_CHARS = 4096  # the longest line any paste reader looks at (a kernel command line: 2048 on x86)

_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]{0,32}\s*$")
_HOST_PREFIX = re.compile(r"^(?:[$#] |[A-Za-z0-9][\w.-]{0,62}: )")
_MARKS = ("**", "__")


def plain_lines(text: str) -> list[str]:
    """The lines of ``text`` with a ticket's dressing removed (see the module docstring); one
    output line per input line (a removed fence is an empty line), so line numbers stay true."""
    lines = [line.rstrip("\r") for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    out = []
    for line in lines:
        if _FENCE.match(line):
            out.append("")
            continue
        for mark in _MARKS:
            if mark in line:
                line = line.replace(mark, "")
        out.append(line)
    return out


def unprefixed(lines: list[str]) -> list[str] | None:
    """``lines`` without the prefix every non-empty one carries (``host: ``, ``$ ``), else None.
    A prefix can also be the text's own (``NVRM: `` on every line of a grepped dmesg): the caller
    reads both and keeps the reading that recognises more."""
    prefix = _common_prefix(lines)
    if prefix is None:
        return None
    return [line[len(prefix):] if line.startswith(prefix) else line for line in lines]


def _common_prefix(lines: list[str]) -> str | None:
    """``host: `` (or ``$ ``) where every non-empty line (at least two) starts with it, else None."""
    shown = [line for line in lines if line.strip() and not _FENCE.match(line)]
    if len(shown) < 2:
        return None
    first = _HOST_PREFIX.match(shown[0])
    if first is None:
        return None
    prefix = first.group(0)
    return prefix if all(line.startswith(prefix) for line in shown) else None
