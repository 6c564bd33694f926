"""How ``bench-p2p`` results look: rich matrices coloured against what each link should give,
call-outs for pairs far below expectation, a progress bar on stderr, and the JSON form.

Expectations come from ``gputopo.analysis.expect.bandwidth`` (the link type and the GPUs' PCIe/NVLink
facts), never from an earlier measurement. On logical CPU devices there is nothing to expect: the
figures are host memory, and the output says so before anything else.
"""

from __future__ import annotations

from typing import Any, Callable

from gputopo.analysis.expect.measured import FAR_BELOW_RATIO, OK_RATIO
from gputopo.bench.judgement import BenchJudgement
from gputopo.bench.results import BenchResult, Stat
from gputopo.model import Topology
from gputopo.notation import format_size
from gputopo.views.common import err, out
from gputopo.views.vocabulary import SELF

# Every rating, share and call-out is made once in ``gputopo.bench.judgement`` (by the one rule of
# analysis.expect.measured); this module renders it.


_STYLE = {"ok": "green", "low": "yellow", "far-below": "bold red"}


def bench_json(result: BenchResult, judged: BenchJudgement, topology: Topology | None) -> dict[str, Any]:
    """The ``--json`` document: the result plus each pair's expectation and the call-outs."""
    data = result.to_dict()
    for pair in data["pairs"]:
        key = (pair["src"], pair["dst"])
        exp = judged.expected.get(key)
        pair["expected_gbps"] = exp.gbps if exp else None
        pair["link_type"] = exp.link_type if exp else None
        pair["rating"] = judged.rating.get(key) if pair["gbps"] is not None else None
        share = judged.percent.get(key)
        pair["percent_of_expected"] = round(share) if share is not None and pair["gbps"] is not None else None
        pair["line_rate_gbps"] = exp.line_rate_gbps if exp else None
        pair["suspect"] = bool(judged.suspect.get(key)) and pair["gbps"] is not None
    data["callouts"] = list(judged.callouts)
    data["via_host_faster"] = list(judged.via_host_faster)
    data["topology"] = (topology.label or topology.source) if topology is not None else None
    return data


# --- rich ---------------------------------------------------------------------------------------


def _matrix(
    result: BenchResult,
    title: str,
    value: Callable[[int, int], float | None],
    digits: int,
    style: Callable[[int, int, float], str | None] = lambda a, b, v: None,
    width: int | None = None,
) -> Any:
    """The matrix as one table, or as a Group of tables over blocks of destination columns when it
    is wider than ``width`` (rich would otherwise cut every figure to '…')."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    rows: list[tuple[int, list[Text]]] = []
    for a in result.indices:
        cells: list[Text] = []
        for b in result.indices:
            if a == b:
                cells.append(Text(SELF, style="dim"))
                continue
            pair = result.pairs.get((a, b))
            figure = value(a, b)
            if figure is None:
                cells.append(Text("failed", style="red") if pair and pair.errors else Text("·", style="dim"))
                continue
            if pair is not None and pair.inferred_from is not None:  # --quick: its class's figure
                cells.append(Text(f"~{figure:.{digits}f}", style="dim"))
                continue
            cells.append(Text(f"{figure:.{digits}f}", style=style(a, b, figure) or ""))
        rows.append((a, cells))
    headers = [str(index) for index in result.indices]
    cell_width = max([len(h) for h in headers] + [len(c.plain) for _, cells in rows for c in cells] + [1])
    label = "from \\ to"
    blocks = [list(range(len(headers)))]
    if width is not None:
        # Each column takes its text, one space either side and a border; the label column the same.
        per_block = max(1, (width - (len(label) + 4)) // (cell_width + 3))
        if per_block < len(headers):
            count = -(-len(headers) // per_block)
            size = -(-len(headers) // count)
            blocks = [list(range(k, min(k + size, len(headers)))) for k in range(0, len(headers), size)]
    tables = []
    for block in blocks:
        part = title if len(blocks) == 1 else f"{title}, to {headers[block[0]]}..{headers[block[-1]]}"
        table = Table(title=part, title_justify="left")
        table.add_column(label, justify="right", style="bold", no_wrap=True)
        for k in block:
            table.add_column(headers[k], justify="right", no_wrap=True)
        for a, cells in rows:
            table.add_row(str(a), *(cells[k] for k in block))
        tables.append(table)
    return tables[0] if len(tables) == 1 else Group(*tables)


def _head_stat(result: BenchResult, a: int, b: int, name: str) -> float | None:
    pair = result.pairs.get((a, b))
    head = pair.headline() if pair else None
    stat: Stat | None = getattr(head, name) if head else None
    return stat.median if stat else None


def _size_sweep_table(result: BenchResult) -> Any:
    """Slowest, median and fastest pair at each size of a sweep."""
    from rich.table import Table

    sweep = Table(title="Size sweep: unidirectional GB/s over all pairs", title_justify="left")
    for name in ("size", "slowest pair", "median pair", "fastest pair"):
        sweep.add_column(name, justify="right")
    for size in result.sizes_bytes:
        figures = sorted(
            point.uni_gbps.median
            for pair in result.pairs.values()
            for point in pair.points
            if point.size_bytes == size and point.uni_gbps
        )
        if not figures:
            sweep.add_row(format_size(size), "-", "-", "-")
            continue
        sweep.add_row(
            format_size(size), f"{figures[0]:.2f}", f"{figures[len(figures) // 2]:.2f}", f"{figures[-1]:.2f}"
        )
    return sweep


def _allreduce_table(result: BenchResult) -> Any:
    """Each cross-device op's time, algbw and busbw at each size."""
    from rich.table import Table

    table = Table(
        title=f"All-reduce (MirroredStrategy) on {result.device_kind}s {','.join(map(str, result.indices))}",
        title_justify="left",
    )
    # The op's name is what the user pastes into cross_device_ops=: never cut it.
    table.add_column("cross-device ops", no_wrap=True)
    for name in ("size", "time us", "algbw GB/s", "busbw GB/s (min-max)"):
        table.add_column(name, justify="right")
    for r in result.allreduce_results:
        if r.error or r.busbw_gbps is None or r.algbw_gbps is None or r.time_us is None:
            table.add_row(r.cross_device_ops, format_size(r.size_bytes), "[red]failed[/red]", "", "")
            continue
        table.add_row(
            r.cross_device_ops,
            format_size(r.size_bytes),
            f"{r.time_us.median:.0f}",
            f"{r.algbw_gbps.median:.2f}",
            f"{r.busbw_gbps.median:.2f} ({r.busbw_gbps.min:.2f}-{r.busbw_gbps.max:.2f})",
        )
    return table


def _print_header(console: Any, result: BenchResult, coloured: bool) -> None:
    """What was measured, at which size and how; what the colours mean (when there are estimates)."""
    from rich.text import Text

    if result.measures_host_memory:
        console.print(Text(f"Measured {result.what_was_measured()}.", style="bold yellow"))
    else:
        console.print(Text(f"Measured {result.what_was_measured()}.", style="bold"))
    heads = {p.headline().size_bytes for p in result.pairs.values() if p.headline()}
    size_text = format_size(max(heads)) if heads else "-"
    console.print(
        f"Message size {size_text}, median of {result.repeat} samples after {result.warmup} warm-up runs; "
        "GB/s = 10^9 bytes/s."
    )
    if coloured:
        console.print(
            f"Colours: [green]as expected[/green] (>= {OK_RATIO:.0%} of the link type's estimate), "
            f"[yellow]low[/yellow], [bold red]far below[/bold red] (< {FAR_BELOW_RATIO:.0%})."
        )


def render_bench(result: BenchResult, judged: BenchJudgement) -> None:
    """Print the matrices, call-outs, all-reduce table and failures for people."""
    from rich.columns import Columns

    console = out()
    _print_header(console, result, bool(judged.expected))

    def uni_style(a: int, b: int, v: float) -> str | None:
        rating = judged.rating.get((a, b))
        return _STYLE[rating] if rating else None

    def bidir_style(a: int, b: int, v: float) -> str | None:
        rating = judged.bidir_rating.get((a, b))
        return _STYLE[rating] if rating else None

    width = console.width
    uni = _matrix(
        result, "Unidirectional copy GB/s", lambda a, b: _head_stat(result, a, b, "uni_gbps"), 1, uni_style, width
    )
    if result.via_host:
        via = _matrix(
            result, "Through host memory GB/s", lambda a, b: _head_stat(result, a, b, "via_host_gbps"), 1,
            width=width,
        )
        console.print(Columns([uni, via]))
    else:
        console.print(uni)
    console.print(
        _matrix(
            result,
            "Bidirectional GB/s (both directions together)",
            lambda a, b: _head_stat(result, a, b, "bidir_gbps"),
            1,
            bidir_style,
            width,
        )
    )

    def latency(a: int, b: int) -> float | None:
        pair = result.pairs.get((a, b))
        return pair.latency_us.median if pair and pair.latency_us else None

    console.print(_matrix(result, f"Latency us ({result.latency_size_bytes}-byte copy)", latency, 1, width=width))

    from gputopo.views.bench_extras import render_extras

    render_extras(console, result, judged.percent, width, _matrix, _head_stat)
    if len(result.sizes_bytes) > 1:
        console.print(_size_sweep_table(result))
    if result.allreduce_results:
        console.print(_allreduce_table(result))
        console.print("busbw = algbw * 2(n-1)/n (as nccl-tests): comparable with a link's bandwidth for any n.")

    _print_callouts(console, result, judged)


def _print_callouts(console: Any, result: BenchResult, judged: BenchJudgement) -> None:
    """Call-outs, via-host notes, failures and notes, each once. Text, not markup: TensorFlow's error
    messages ("[Op:DeepCopy]", "[[{{node ...}}]]") and notes naming files must print as they are."""
    from rich.text import Text

    for line in judged.callouts:
        console.print(Text(line, style="bold red"))
    for line in judged.via_host_faster:
        console.print(Text(line, style="yellow"))
    failures = [e for key in result.ordered_pairs() if key in result.pairs for e in result.pairs[key].errors]
    failures += [r.error for r in result.allreduce_results if r.error]
    for line in dict.fromkeys(failures):  # a bidirectional failure is recorded on both pairs
        console.print(Text(f"failed: {line}", style="red"))
    for note in result.notes:
        console.print(Text(note, style="yellow"))


class BenchProgressBar:
    """A rich progress bar on standard error (stdout stays clean for ``--json``)."""

    def __init__(self) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        self._progress = Progress(
            TextColumn("[progress.description]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err(),
            transient=True,
        )
        self._task: Any = None

    def __enter__(self) -> BenchProgressBar:
        self._progress.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._progress.stop()

    def start(self, total_steps: int) -> None:
        self._task = self._progress.add_task("bench-p2p", total=total_steps)

    def step(self, description: str) -> None:
        if self._task is not None:
            self._progress.update(self._task, description=description)

    def advance(self) -> None:
        if self._task is not None:
            self._progress.advance(self._task)
