"""Findings on a terminal, one way for scan, doctor and cluster: ``SEVERITY code: message`` with its
wrapped lines hanging under it, then evidence, effect and fix as labelled blocks.

A command the text names in backticks (```sudo setpci -s ... ECAP_ACS+6.w=0000```) is never broken
across lines: text is wrapped here, at spaces outside backticks, and each line is printed with
rich's ``soft_wrap`` (no newline added at the terminal width, nothing cropped). A command longer
than a line gets a line of its own, longer than the terminal: the terminal folds it on screen, and a
copy of it is still one line that pastes into a shell as it is.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Iterable

from gputopo.views.vocabulary import SEVERITY_ORDER, SEVERITY_STYLE, severity_word

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

    from gputopo.model import Finding

# A word, or a run of text holding backticked spans (```sudo setpci -s ...`,``): never broken.
_ATOM = re.compile(r"(?:[^\s`]*`[^`\n]*`)+[^\s`]*|\S+")


def hanging_lines(text: Text, width: int, indent: int, label: Text | None = None) -> list[Text]:
    """``text`` in lines of at most ``width`` columns (the second and later ``indent`` columns in,
    the indent included), broken only at spaces outside backticks: a backticked command is never
    broken, and one longer than a line has a line of its own, longer than ``width``. ``label``
    (kept as it is, its spaces too) starts the first line."""
    from rich.text import Text

    lines: list[Text] = []
    for k, paragraph in enumerate(text.split("\n")):
        line: Text | None = label.copy() if label is not None and k == 0 else None
        for match in _ATOM.finditer(paragraph.plain):
            atom = paragraph[match.start():match.end()]
            if line is not None and len(line.plain) + 1 + len(atom.plain) <= width:
                if line.plain and not line.plain.endswith(" "):
                    line.append(" ")
                line.append_text(atom)
                continue
            if line is not None:
                lines.append(line)
            line = (Text(" " * indent) if lines else Text()) + atom
        lines.append(line if line is not None else Text())
    return lines


def print_hanging(console: Console, text: Text | str, indent: int = 2, margin: int = 0, label: Text | str | None = None) -> None:
    """``text`` ``margin`` columns in, its wrapped lines ``indent`` columns further (a hanging
    indent), backticked spans whole; each line printed unwrapped and uncut (``soft_wrap``), so that
    a command longer than the terminal is still one line when copied."""
    from rich.text import Text

    text = Text(text) if isinstance(text, str) else text
    label = Text(label) if isinstance(label, str) else label
    for line in hanging_lines(text, max(20, console.width - margin), indent, label):
        console.print(Text(" " * margin) + line, soft_wrap=True)


def print_finding(console: Console, finding: Finding, indent: int = 0) -> None:
    """One finding: ``SEVERITY code: message``, then evidence, effect and fix."""
    from rich.text import Text

    from gputopo.views.common import terminal_safe

    head = Text(severity_word(finding.severity), style=SEVERITY_STYLE.get(finding.severity, ""))
    head.append(" ")
    head.append(terminal_safe(finding.code), style="bold")
    if finding.kind == "design":
        head.append(" (design)", style="cyan")  # the machine's build, no fault
    head.append(": ")
    head.append(terminal_safe(finding.message))
    print_hanging(console, head, 2, indent)
    details = indent + 2
    for line in finding.evidence:
        print_hanging(console, terminal_safe(line), 10, details, "evidence: ")
    if finding.effect:
        print_hanging(console, terminal_safe(finding.effect), 10, details, "effect:   ")
    if finding.caused_by:  # (the finding that explains this one: its fix is the complete one)
        print_hanging(console, terminal_safe(finding.caused_by), 10, details, "cause:    ")
    if finding.fix:
        print_hanging(console, terminal_safe(finding.fix), 10, details, "fix:      ")


def print_findings(console: Console, findings: Iterable[Finding], extra: Iterable[Any] = (), indent: int = 0) -> None:
    """Every finding, worst first (then in their order), a blank line between them."""
    ordered = sorted(findings, key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    for k, finding in enumerate(ordered):
        if k:
            console.print()
        print_finding(console, finding, indent)
    for part in extra:
        console.print(part)
