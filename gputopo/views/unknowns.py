"""One rule for what a source does not say, shared by the text and HTML views: unknown is ``?``,
a figure that rests on an assumption says what it assumes (or is a range), an inferred count says
it is inferred."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.model import Gpu

if TYPE_CHECKING:
    from gputopo.analysis.expect.estimates import Span
    from gputopo.analysis.scan_result import ScanResult


def span_figure(span: Span) -> str:
    """``~24`` or ``~12-49``: a ``ScanResult.speed_spans`` span as the screens write it."""
    low, high = span.low_gbps, span.high_gbps
    return f"~{low:.0f}" if round(low) == round(high) else f"~{low:.0f}-{high:.0f}"


def assumption_notes(result: ScanResult) -> list[str]:
    """What the estimates rest on, one sentence per assumption with the link words it touches:
    ``"Estimates of NV2, NV1 assume: NVLink generation not in the source; the lowest figure ranks."``"""
    words: dict[str, list[str]] = {}
    for word, span in result.speed_spans.items():
        for assumption in span.assumptions if span is not None else ():
            words.setdefault(assumption, []).append(word)
    return [f"Estimates of {', '.join(of)} rest on an assumption: {assumption}; the lowest figure it allows is the one "
            "ranked and shown." for assumption, of in words.items()]


def nvlink_cell(gpu: Gpu, implied: int | None) -> str:
    """The NVLink column: version and active links where the source says them, ``?`` where not,
    ``-`` only where it says there is none; ``>=N`` a count implied by the NV# words (``implied``:
    ``ScanResult.implied_nvlinks``)."""
    if gpu.nvlink_active_links == 0:  # the source says none are active
        return "-"
    count: str | None = None if gpu.nvlink_active_links is None else str(gpu.nvlink_active_links)
    if count is None:
        count = None if implied is None else f">={implied}"
    if gpu.nvlink_version is None and count is None:
        return "?"
    return f"{(gpu.nvlink_version or '?')} x{count or '?'}"
