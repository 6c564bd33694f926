"""What other tools measured or observed on this host, for people: copy bandwidth per GPU pair
(against what its link should give), NVLink states, the transports NCCL chose, nccl-tests tables.
Shown by ``scan`` below the topology; each part only where the source has it. Every string from
the input is shown as plain text (``Text``), never parsed as markup."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table
from rich.text import Text

from gputopo.analysis.expect.measured import (
    FAR_BELOW_RATIO,
    OK_RATIO,
    method_of,
    percent,
)
from gputopo.model import Topology
from gputopo.model.observed import CollectiveRun
from gputopo.notation import format_size
from gputopo.views.common import terminal_safe

if TYPE_CHECKING:
    from gputopo.analysis.expect.measured import Comparison
    from gputopo.analysis.scan_result import ScanResult

MAX_PAIR_ROWS = 64  # beyond that the pairs are summarised (every figure stays in --json)
MAX_SIZE_ROWS = 12  # nccl-tests sizes shown per run: the smallest, the largest and evenly between


def render_observed(result: ScanResult, console: Console) -> None:
    """Every observed part the scan result's topology holds, each as its own table; the measured
    directions as the result judged them (``ScanResult.compared``)."""
    topology = result.topology
    for part in (_measured_table(result), _nvlink_table(topology), _nccl_table(topology),
                 *(_collective_table(run) for run in topology.collectives)):
        if part is not None:
            console.print(part)


def _plain(text: object) -> Text:
    return Text(terminal_safe(str(text)))


def _measured_table(result: ScanResult) -> Table | None:
    measured = [link for link in result.measured if link.measured.device_kind == "GPU"]
    if not measured:
        return None
    versus = {(c.src, c.dst): c for c in result.compared}
    table = Table(title="Measured copy bandwidth (GB/s, per direction)", title_justify="left")
    for column in ("GPUs", "link", "GB/s", "of expected", "verdict", "latency", "measured by"):
        table.add_column(column, justify="right" if column in ("GB/s", "of expected", "latency") else "left",
                         no_wrap=column == "verdict")  # (the word as --json writes it, whole)
    rows = 0
    for link in measured:
        m = link.measured
        assert m is not None
        for src, dst, value in ((link.a, link.b, m.a_to_b_gbps), (link.b, link.a, m.b_to_a_gbps)):
            if value is None or rows >= MAX_PAIR_ROWS:
                continue
            versus_expected = versus.get((src, dst))
            table.add_row(
                f"{src} \u2192 {dst}", link.type if link.type != "UNKNOWN" else "?", f"{value:.1f}",
                _of_expected(versus_expected), _verdict(versus_expected),
                f"{m.latency_us:.1f} us" if m.latency_us is not None else "",
                _plain(method_of(m)),
            )  # fmt: skip
            rows += 1
    total = sum((m.a_to_b_gbps is not None) + (m.b_to_a_gbps is not None) for m in (lk.measured for lk in measured) if m)
    if total > rows:
        table.caption = f"{total - rows} more in --json"
    table.caption = (table.caption + "; " if table.caption else "") + (
        "'of expected': against what the link type should give; ? where the link type, or a fact its speed "
        "depends on (PCIe or NVLink generation), is not in the source; ! above the link's line rate; verdict: ok at "
        f"{percent(OK_RATIO)} of expected or more, low at {percent(FAR_BELOW_RATIO)} or more, far-below under that "
        "(against the lowest figure the source's facts allow), above-line-rate where the bytes did not cross the link")
    table.caption_justify = "left"
    return table


def _of_expected(comparison: Comparison | None) -> Text:
    """The measured share of what the link should give: ``?`` where the expectation rests on an
    assumption (it would be a guess), ``!`` where the figure is above the link's line rate."""
    if comparison is None or comparison.assumption:
        return Text("?", style="dim")
    text = Text(f"{comparison.ratio:.0%}")
    if comparison.above_line_rate:
        text.append("!", style="bold red")
    return text


_VERDICT_STYLE = {"ok": "green", "low": "yellow", "far-below": "bold red", "above-line-rate": "bold magenta"}


def _verdict(comparison: Comparison | None) -> Text:
    """The one verdict of ``analysis.expect.measured`` on this direction (``--json``'s ``verdict``); blank
    where nothing is expected of the link (its type is not known)."""
    if comparison is None:
        return Text("")
    return Text(comparison.verdict, style=_VERDICT_STYLE.get(comparison.verdict, ""))


def _nvlink_table(topology: Topology) -> Table | None:
    if not topology.nvlinks:
        return None
    by_gpu: dict[int, list] = {}
    for state in topology.nvlinks:
        by_gpu.setdefault(state.gpu, []).append(state)
    table = Table(title="NVLinks (nvidia-smi nvlink)", title_justify="left")
    for column in ("GPU", "active", "inactive", "unknown", "GB/s per link", "inactive links"):
        table.add_column(column)
    cut_lists = {g for note in topology.reading_notes if note.code == "nvlink-list-cut" for g in note.gpus}
    for gpu, states in sorted(by_gpu.items()):
        speeds = sorted({s.gbps for s in states if s.gbps is not None})
        inactive = [str(s.link) for s in states if s.active is False]
        active = sum(s.active is True for s in states)
        cut = gpu in cut_lists  # a list the paste cut: what it shows, and more unknown
        table.add_row(
            str(gpu), f"{active}+" if cut else str(active), str(len(inactive)),
            "?" if cut else str(sum(s.active is None for s in states)), ", ".join(f"{v:g}" for v in speeds) or "?",
            ", ".join(inactive) or "",
        )  # fmt: skip
    return table


def _nccl_table(topology: Topology) -> Table | None:
    nccl = topology.nccl
    if nccl is None:
        return None
    title = "NCCL's view" + (f" (NCCL {terminal_safe(nccl.version)})" if nccl.version else "")
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("")
    if nccl.nranks is not None:
        table.add_row("ranks", str(nccl.nranks))
    pairs: dict[tuple[int, int], set[str]] = {}
    for t in nccl.transports:
        pairs.setdefault((t.src_rank, t.dst_rank), set()).add(t.transport)
    by_transport: dict[str, int] = {}
    for words in pairs.values():
        for word in words:
            by_transport[word] = by_transport.get(word, 0) + 1
    if by_transport:
        table.add_row("rank pairs by transport", _plain(", ".join(f"{word} {n}" for word, n in sorted(by_transport.items()))))
    if nccl.p2p_disabled_pairs:
        table.add_row("P2P disabled between", _plain(", ".join(f"{a}-{b}" for a, b in nccl.p2p_disabled_pairs[:16])))
    for key, value in list(nccl.settings.items())[:16]:
        table.add_row(_plain(key), _plain(value))
    for word, flag in (("GPUDirect RDMA", nccl.gdr), ("NVLink SHARP (NVLS)", nccl.nvls), ("CollNet", nccl.collnet)):
        if flag is not None:
            table.add_row(word, "yes" if flag else "no")
    return table


def _collective_table(run: CollectiveRun) -> Table:
    gpus = f" on GPUs {','.join(map(str, run.gpus))}" if run.gpus else ""
    ranks = f", {run.nranks} ranks" if run.nranks else ""
    table = Table(title=Text(f"nccl-tests {terminal_safe(run.operation)}{gpus}{ranks} (bus bandwidth, GB/s)"),
                  title_justify="left")
    for column in ("size", "busbw out-of-place", "busbw in-place", "#wrong"):
        table.add_column(column, justify="right")
    rows = run.rows
    if len(rows) > MAX_SIZE_ROWS:
        step = (len(rows) - 1) / (MAX_SIZE_ROWS - 1)
        rows = [rows[round(k * step)] for k in range(MAX_SIZE_ROWS)]
    for row in rows:
        wrong = [w for w in (row.out_wrong, row.in_wrong) if w is not None]
        table.add_row(
            format_size(row.size_bytes), _gbps(row.out_busbw_gbps), _gbps(row.in_busbw_gbps),
            str(sum(wrong)) if wrong else "N/A",
        )  # fmt: skip
    notes = []
    if len(rows) < len(run.rows):
        notes.append(f"{len(rows)} of {len(run.rows)} sizes shown")
    if run.avg_busbw_gbps is not None:
        notes.append(f"average bus bandwidth {run.avg_busbw_gbps:g} GB/s")
    if notes:
        table.caption = "; ".join(notes)
        table.caption_justify = "left"
    return table


def _gbps(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"
