"""Every link's expected GB/s (and measured, where known), with the rule used: what ``scan --json``
adds beside the topology, so a script reads the same figures and verdicts the text, the report and
bench-p2p show (``analysis.expect.measured``: one expectation, one verdict).

A 576-GPU domain has 165,600 links and a handful of classes of pair (``analysis.expect.estimates``): the
expectations are written once per class, each link only its class number (``class_of_link``, in the
order of the topology's ``links``), and the measured links, usually none or few, one entry each.
"""

from __future__ import annotations

from typing import Any

from gputopo.analysis.expect.bandwidth import Estimate, line_rate_gbps
from gputopo.analysis.expect.estimates import estimate_of, pair_classes
from gputopo.analysis.expect.measured import (
    FAR_BELOW_RATIO,
    LINE_RATE_SLACK,
    OK_RATIO,
    expectation,
    measured_gbps,
    measured_links,
    verdict,
)
from gputopo.model import Gpu, Link, Topology

RULE = (f"expected: GB/s per direction that a copy between the two GPUs gets over a link of its kind (P2P where the "
        f"pair can peer, else staged through host memory; NCCL's own transport is recommend's), from its type, NVLink "
        f"count and generation, PCIe generation (inferred from the card where only its name is known) and width and path (gputopo/analysis/expect/bandwidth.py), once per class of pair; measured: the "
        f"slower measured direction of a GPU-to-GPU copy (host-memory figures never count); verdict: ok at "
        f"{OK_RATIO:.0%} of expected or more, low at {FAR_BELOW_RATIO:.0%} or more, far-below under that, "
        f"above-line-rate where the figure is over {LINE_RATE_SLACK:.0%} of what the link can carry (the bytes did "
        f"not cross it); null where the link's type is not known")


def link_figures(topology: Topology, measured_links_found: list[Link] | None = None) -> dict[str, Any]:
    """``{"rule", "classes": [{"class", "expected_gbps", ...}], "class_of_link": [k, ...],
    "measured": [{"a", "b", "measured_gbps", "verdict"}]}``; ``measured_links_found``: the
    topology's ``measured_links`` where the caller has them already."""
    classes = pair_classes(topology)
    links = topology.links
    if classes.complete and links:
        codes = classes.code_of
        table = topology.link_table()
        one_of = classes.one_of
        described = {}
        for code in dict.fromkeys(codes):  # each class once, in the order its first link comes
            pair, kind = divmod(code, len(table.kinds))
            gpus = (one_of[pair // len(one_of)], one_of[pair % len(one_of)])
            described[code] = _described(table.examples[kind], classes.estimate_of_code(code), *gpus)
    else:  # (links of GPUs the topology lacks: each on its own; small)
        gpus_by_index = {gpu.index: gpu for gpu in topology.gpus}
        codes = list(range(len(links)))
        described = {k: _described(link, estimate_of(topology, link), gpus_by_index.get(link.a), gpus_by_index.get(link.b))
                     for k, link in enumerate(links)}
    numbering = {code: k for k, code in enumerate(described)}
    measured = []
    for link in measured_links(topology) if measured_links_found is None else measured_links_found:  # (few: one pass in C)
        value, judged = _judged(topology, link)
        measured.append({"a": link.a, "b": link.b, "measured_gbps": value, "verdict": judged})
    return {"rule": RULE,
            "classes": [{"class": numbering[code], **fields} for code, fields in described.items()],
            "class_of_link": list(map(numbering.__getitem__, codes)),
            "measured": measured}


def _described(example: Link, estimate: Estimate, gpu_a: Gpu | None, gpu_b: Gpu | None) -> dict[str, Any]:
    if example.type == "UNKNOWN":
        return {"link_type": "UNKNOWN", "expected_gbps": None, "basis": None, "explanation": None,
                "assumption": None, "inference": None, "line_rate_gbps": None}
    return {"link_type": example.type, "expected_gbps": round(estimate.gbps, 2), "basis": estimate.basis,
            "explanation": estimate.explanation, "assumption": estimate.assumption, "inference": estimate.inference,
            "line_rate_gbps": line_rate_gbps(example, gpu_a, gpu_b)}


def _judged(topology: Topology, link: Link) -> tuple[float | None, str | None]:
    value = measured_gbps(link)
    expected = expectation(topology, link)
    if value is None or expected is None:
        return (None if value is None else round(value, 2)), None
    return round(value, 2), verdict(value, expected.gbps, expected.line_rate_gbps)
