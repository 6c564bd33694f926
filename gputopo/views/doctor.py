"""`gputopo doctor` on a terminal: findings worst first (cause, evidence, effect, fix), then the
checks made, and those not made with the reason. Every string from the evidence is shown as text
(control characters dropped, rich markup escaped)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.views.common import out, terminal_safe
from gputopo.views.findings import print_findings, print_hanging

if TYPE_CHECKING:
    from gputopo.analysis.causes.doctor import DoctorReport

def _safe(text: str | None) -> str:
    from rich.markup import escape

    return escape(terminal_safe(text or ""))


def render_doctor(report: DoctorReport) -> None:
    from rich.text import Text

    console = out()
    console.print(f"[bold]gputopo doctor[/bold] — {_safe(report.source)}")
    if report.gpus:
        console.print(f"GPUs: {_safe(', '.join(report.label(b) for b in sorted(report.gpus)))}")
    if not report.findings:
        console.print("[green]Nothing wrong found[/green] in the checks that could be made.")
    if report.findings:
        console.print()
        print_findings(console, report.findings)
    if report.checks:
        console.print()
        console.print("[bold]Checks[/bold]")
        for check in report.checks:
            word = {"ok": "ok", "problem": "problem"}.get(check.status, "not made")
            style = {"ok": "green", "problem": "red"}.get(check.status, "dim")
            detail = f"{terminal_safe(check.name)}" + (f" — {terminal_safe(check.detail)}" if check.detail else "")
            print_hanging(console, detail, 11, 2, Text(f"{word:<8} ", style=style))
