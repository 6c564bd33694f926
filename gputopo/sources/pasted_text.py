"""A paste as users bring it, made plain before any reader sees it (``doctor --from``): the same
lines whatever the ticket's dressing. Removed: CR line ends, markdown code fences (```` ``` ````) and
bold or underline marks (``**``, ``__``), a shell prompt at the start of a line (``$ `` or ``# ``, after
an optional ``user@host:dir``), and a prefix that every line of the paste carries (``pdsh``/``clush``
put ``host: `` before each line). Every line is cut to ``MAX_LINE_CHARS`` first, so no reader ever
looks at more than that of a line (a megabyte of one line costs one pass)."""

from __future__ import annotations

import re

MAX_LINE_CHARS = 4096  # the longest line any paste reader looks at (a kernel command line: 2048 on x86)

_FENCE = re.compile(r"^\s*(?:```|~~~)[\w+-]{0,32}\s*$")
_PROMPT = re.compile(r"^(?:\[?[\w.@-]{1,64}(?::[~\w./ -]{0,128})?\]?)?[$#] ")
_HOST_PREFIX = re.compile(r"^([A-Za-z0-9][\w.-]{0,62}): ")
_MARKS = ("**", "__")


def plain_lines(text: str) -> list[str]:
    """The lines of ``text`` with a ticket's dressing removed (see the module docstring); one
    output line per input line (a removed fence is an empty line), so line numbers stay true."""
    lines = [line.rstrip("\r")[:MAX_LINE_CHARS] for line in text.split("\n")]
    if text.endswith("\n"):
        lines.pop()
    prefix = _common_prefix(lines)
    out = []
    for line in lines:
        if prefix and line.startswith(prefix):
            line = line[len(prefix):]
        if _FENCE.match(line):
            out.append("")
            continue
        for mark in _MARKS:
            if mark in line:
                line = line.replace(mark, "")
        prompt = _PROMPT.match(line)
        if prompt and "GRUB_" not in line:
            line = line[prompt.end():]
        out.append(line)
    return out


def _common_prefix(lines: list[str]) -> str | None:
    """``host: `` where every non-empty line (at least two) starts with it, else None."""
    shown = [line for line in lines if line.strip() and not _FENCE.match(line)]
    if len(shown) < 2:
        return None
    first = _HOST_PREFIX.match(shown[0])
    if first is None:
        return None
    prefix = first.group(0)
    return prefix if all(line.startswith(prefix) for line in shown) else None
