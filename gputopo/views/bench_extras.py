"""The parts of the ``bench-p2p`` screen beside its matrices: each figure as a percentage of what
its link type should give, the classes ``--quick`` measured (and that the other figures are
inferred), the ``--concurrent`` rounds against the one-at-a-time figures, and the byte check."""

from __future__ import annotations

from typing import Any, Callable

from gputopo.bench.results import BenchResult


def render_extras(
    console: Any, result: BenchResult, percent_of_expected: dict[tuple[int, int], float], width: int | None,
    matrix: Callable[..., Any], head_stat: Callable[[BenchResult, int, int, str], float | None],
) -> None:
    """``matrix`` and ``head_stat``: ``views.bench``'s matrix maker and headline figure (passed in:
    that module calls this one)."""
    from rich.text import Text

    _matrix, _head_stat = matrix, head_stat
    if percent_of_expected:

        def percent(a: int, b: int) -> float | None:  # the share ``bench.judgement`` made
            return percent_of_expected.get((a, b))

        console.print(_matrix(result, "Unidirectional copy as % of what the link type should give", percent, 0,
                              width=width))
    if result.quick:
        console.print(_classes_table(result))
        console.print(Text(
            "--quick: figures marked ~ are not measured; each is its class's measured pair's figure "
            "(same link word, NUMA relation and switch). Measure every pair without --quick.", style="yellow"))
    if result.concurrent_rounds:
        console.print(_concurrent_table(result))
    _print_byte_check(console, result)


def _classes_table(result: BenchResult) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(title="--quick: classes of equivalent pairs", title_justify="left")
    table.add_column("link")
    table.add_column("pairs", justify="right")
    table.add_column("measured (from -> to)")
    for cls in result.pair_classes:
        measured = ", ".join(f"{a}->{b}" for a, b in cls["measured"]) or "-"
        table.add_row(Text(cls["link"]), str(cls["pairs"]), Text(measured))
    return table


def _concurrent_table(result: BenchResult) -> Any:
    from rich.table import Table
    from rich.text import Text

    title = "--concurrent: disjoint pairs copying at the same time, against one at a time"
    if result.measures_host_memory:
        title += " (host memory, not links)"
    table = Table(title=title, title_justify="left")
    for name in ("round", "pair", "GB/s at once", "GB/s alone", "at once / alone"):
        table.add_column(name, justify="right")
    for entry in result.concurrent_rounds:
        if entry["error"]:
            table.add_row(str(entry["round"]), "", Text("failed", style="red"), "", "")
            continue
        for item in entry["per_pair"]:
            alone = item["alone_gbps"]
            alone_text = "-" if alone is None else (f"~{alone:.1f}" if item["alone_inferred"] else f"{alone:.1f}")
            # On logical CPU devices the ratio is of host memory's bandwidth, not a link's: a figure, no call-out.
            ratio = "-" if item["contention"] is None or result.measures_host_memory else f"{item['contention']:.0%}"
            table.add_row(str(entry["round"]), f"{item['src']}->{item['dst']}", f"{item['gbps']:.1f}", alone_text, ratio)
    return table


def _print_byte_check(console: Any, result: BenchResult) -> None:
    from rich.text import Text

    checked = sum(1 for pair in result.pairs.values() if pair.bytes_checked and pair.inferred_from is None)
    findings = result.findings()
    if not findings and checked:
        console.print(Text(f"Bytes checked: the last timed copy of each of {checked} measured pairs matched its "
                           "source (checksums on both devices, outside the timed interval).", style="green"))
    for finding in findings:
        console.print(Text(f"ERROR {finding.message}", style="bold red"))
        if finding.fix:
            console.print(Text(f"fix: {finding.fix}", style="red"))
