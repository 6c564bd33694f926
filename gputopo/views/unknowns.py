"""One rule for what a source does not say, shared by the text and HTML views: unknown is ``?``,
a figure that rests on an assumption says what it assumes (or is a range), an inferred count says
it is inferred."""

from __future__ import annotations

from gputopo.analysis.expect.bandwidth import implied_nvlinks
from gputopo.analysis.expect.estimates import distinct_estimates
from gputopo.model import Gpu, Topology


def speed_span(topo: Topology, word: str) -> tuple[str, float, list[str]] | None:
    """("~a-b", lowest GB/s, what was assumed) over the pairs of link ``word``: the span of every
    figure their facts allow (a range by generation where the source gives none); None where the
    speed is not known at all (a virtual machine's words are the hypervisor's, not the host's)."""
    from gputopo.analysis.place.locality import vm_evidence

    if word == "UNKNOWN" or (not word.startswith("NV") and vm_evidence(topo) is not None):
        return None
    table = topo.link_table()  # once per class of pair, for every word
    of_word = table.kinds_where(k for k, kind in enumerate(table.kinds) if kind[0] == word)
    estimates = distinct_estimates(topo, of_word)
    if not estimates:
        return None
    low = min(e.span[0] for e in estimates)
    high = max(e.span[1] for e in estimates)
    assumed = sorted({e.assumption for e in estimates if e.assumption})
    return (f"~{low:.0f}" if round(low) == round(high) else f"~{low:.0f}-{high:.0f}"), low, assumed


def assumption_notes(topo: Topology) -> list[str]:
    """What the estimates rest on, one sentence per assumption with the link words it touches:
    ``"Estimates of NV2, NV1 assume: NVLink generation not in the source; the lowest figure ranks."``"""
    table = topo.link_table()
    words: dict[str, list[str]] = {}
    for word in dict.fromkeys(kind[0] for kind in table.kinds):
        span = speed_span(topo, word)
        for assumption in span[2] if span is not None else ():
            words.setdefault(assumption, []).append(word)
    return [f"Estimates of {', '.join(of)} rest on an assumption: {assumption}; the lowest figure it allows is the one "
            "ranked and shown." for assumption, of in words.items()]


def nvlink_cell(topo: Topology, gpu: Gpu) -> str:
    """The NVLink column: version and active links where the source says them, ``?`` where not,
    ``-`` only where it says there is none; ``>=N`` a count implied by the NV# words."""
    if gpu.nvlink_active_links == 0:  # the source says none are active
        return "-"
    count: str | None = None if gpu.nvlink_active_links is None else str(gpu.nvlink_active_links)
    if count is None:
        implied = implied_nvlinks(topo, gpu.index)
        count = None if implied is None else f">={implied}"
    if gpu.nvlink_version is None and count is None:
        return "?"
    return f"{(gpu.nvlink_version or '?')} x{count or '?'}"
