"""analysis.expect.estimates: every link's estimate made once per class of pair is the estimate each pair
gets on its own (``bandwidth.pair_estimate``)."""

from __future__ import annotations

import random

import pytest
from linktable import nvl72

from gputopo.analysis.expect.bandwidth import pair_estimate
from gputopo.analysis.expect.estimates import estimate_column, estimate_of, pair_classes, word_spans
from gputopo.model import Gpu, Topology, make_link
from gputopo.sources.reference import MACHINES, load_reference


def _random(n: int, seed: int) -> Topology:
    rng = random.Random(seed)
    gpus = [Gpu(index=i, name=rng.choice(["NVIDIA GeForce RTX 3090", "NVIDIA A100-SXM4-40GB", None]),
                nvlink_version=rng.choice(["3.0", None]), pcie_gen_max=rng.choice([3, 4, None]),
                pcie_width_current=rng.choice([8, 16, None])) for i in range(n)]
    links = [make_link(a, b, rng.choice(["NV4", "NV12", "PIX", "SYS", "UNKNOWN"]), nvswitch=rng.choice([False, None]),
                       p2p_read=rng.choice(["ok", "TNS", None]), p2p_write=rng.choice(["ok", None]))
             for a in range(n) for b in range(a + 1, n)]
    return Topology(gpus=gpus, links=links, source="test")


@pytest.mark.parametrize("topology", [load_reference(name) for name in sorted(MACHINES)] + [nvl72(6)]
                         + [_random(12, seed) for seed in range(4)], ids=lambda t: t.label or "random")
def test_each_link_gets_the_estimate_of_its_own_pair(topology):
    column = estimate_column(topology)
    assert column == [pair_estimate(topology, link.a, link.b) for link in topology.links]
    assert all(estimate_of(topology, link) == estimate for link, estimate in zip(topology.links, column))


def test_a_rack_has_a_handful_of_classes():
    topology = nvl72()
    assert len(set(pair_classes(topology).code_of)) <= 4
    assert estimate_column(topology) is estimate_column(topology)  # made once


def test_links_to_gpus_the_list_lacks_are_estimated_without_them():
    topology = _random(6, 7)
    topology.links.append(make_link(2, 9, "NV12"))
    assert not pair_classes(topology).complete
    assert estimate_column(topology)[-1] == pair_estimate(topology, 2, 9)


@pytest.mark.parametrize("topology", [load_reference(name) for name in sorted(MACHINES)] + [nvl72(6)]
                         + [_random(12, seed) for seed in range(4)], ids=lambda t: t.label or "random")
def test_each_words_span_holds_every_figure_its_pairs_allow(topology):
    spans = word_spans(topology)
    assert set(spans) == {link.type for link in topology.links} - {"UNKNOWN"}
    for word, span in spans.items():
        estimates = [pair_estimate(topology, link.a, link.b) for link in topology.links if link.type == word]
        assert span.low_gbps == min(e.span[0] for e in estimates) and span.high_gbps == max(e.span[1] for e in estimates)
        assert span.assumptions == tuple(sorted({e.assumption for e in estimates if e.assumption}))
