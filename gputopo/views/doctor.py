"""`gputopo doctor` on a terminal: findings worst first (cause, evidence, effect, fix), then the
checks made, and those not made with the reason. Every string from the evidence is shown as text
(control characters dropped, rich markup escaped)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.views.common import out, terminal_safe

if TYPE_CHECKING:
    from gputopo.analysis.doctor import DoctorReport

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _safe(text: str | None) -> str:
    from rich.markup import escape

    return escape(terminal_safe(text or ""))


def render_doctor(report: DoctorReport) -> None:
    console = out()
    console.print(f"[bold]gputopo doctor[/bold] — {_safe(report.source)}")
    if report.gpus:
        console.print(f"GPUs: {_safe(', '.join(report.label(b) for b in sorted(report.gpus)))}")
    if not report.findings:
        console.print("[green]Nothing wrong found[/green] in the checks that could be made.")
    for finding in report.findings:
        console.print()
        console.print(f"[{_STYLE[finding.severity]}]{finding.severity.upper()}[/] [bold]{_safe(finding.code)}[/bold]{' (design)' if finding.kind == 'design' else ''}: "
                      f"{_safe(finding.message)}")
        for line in finding.evidence:
            console.print(f"  evidence: {_safe(line)}")
        if finding.effect:
            console.print(f"  effect:   {_safe(finding.effect)}")
        if finding.fix:
            console.print(f"  fix:      {_safe(finding.fix)}")
    if report.checks:
        console.print()
        console.print("[bold]Checks[/bold]")
        for check in report.checks:
            word = {"ok": "ok", "problem": "problem"}.get(check.status, "not made")
            style = {"ok": "green", "problem": "red"}.get(check.status, "dim")
            detail = f" — {_safe(check.detail)}" if check.detail else ""
            console.print(f"  [{style}]{word:<8}[/] {_safe(check.name)}{detail}")
