"""Measured against the link: above its line rate is suspect; across NUMA nodes as fast as within
one is not called slower."""

from __future__ import annotations

from gputopo.analysis import with_findings
from gputopo.model import Gpu, Measurement, Topology, make_link


def gen4(index: int, numa: int) -> Gpu:
    return Gpu(index, pcie_gen_max=4, pcie_width_max=16, numa_node=numa, cpu_affinity="0-7" if numa == 0 else "8-15")


def codes(topology: Topology) -> dict[str, str]:
    return {f.code: f.severity for f in with_findings(topology).diagnostics}


def test_a_copy_faster_than_the_link_is_flagged():
    link = make_link(0, 1, "PIX", measured=Measurement(a_to_b_gbps=90.0, b_to_a_gbps=24.0))
    found = with_findings(Topology(gpus=[gen4(0, 0), gen4(1, 0)], links=[link])).diagnostics
    (fast,) = [f for f in found if f.code == "measured-above-line-rate"]
    assert fast.severity == "warning" and "GPU 0→1: 90.0 GB/s over PIX" in fast.message and fast.gpus == [0, 1]
    assert "1→0" not in fast.message


def test_crossing_numa_nodes_measured_as_fast_as_within_is_info_not_a_warning():
    words = {(0, 1): "NODE", (2, 3): "NODE", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS"}

    def topo(cross_gbps: float) -> Topology:
        links = [make_link(a, b, w, measured=Measurement(a_to_b_gbps=cross_gbps if w == "SYS" else 26.3,
                                                          b_to_a_gbps=cross_gbps if w == "SYS" else 26.3))
                 for (a, b), w in words.items()]
        return Topology(gpus=[gen4(0, 0), gen4(1, 0), gen4(2, 1), gen4(3, 1)], links=links, source="nvidia-smi")

    assert codes(topo(26.0))["cross-socket"] == "info"
    assert "measured, they copy as fast" in next(f.message for f in with_findings(topo(26.0)).diagnostics
                                                  if f.code == "cross-socket")
    assert codes(topo(9.0))["cross-socket"] == "warning"  # slower measured: the warning stands


def _named(index: int, name: str) -> Gpu:
    return Gpu(index, name=name, numa_node=0, cpu_affinity="0-7")


def test_above_the_named_cards_generation_is_a_note_said_as_inferred_not_the_line_rate_warning():
    """Two RTX 4090s (Gen4 cards by name, no link generation read) measured at 40 GB/s over PIX: above a Gen4
    x16 link's ~32 GB/s, below the Gen6 the unread generation allows: a thing to check, not proof."""
    link = make_link(0, 1, "PIX", measured=Measurement(a_to_b_gbps=40.0, b_to_a_gbps=20.0))
    found = with_findings(Topology(gpus=[_named(0, "NVIDIA GeForce RTX 4090"), _named(1, "NVIDIA GeForce RTX 4090")],
                                   links=[link])).diagnostics
    assert "measured-above-line-rate" not in [f.code for f in found]
    (note,) = [f for f in found if f.code == "measured-above-card-line-rate"]
    assert note.severity == "info" and note.kind == "note" and note.gpus == [0, 1]
    assert "GPU 0→1: 40.0 GB/s over PIX, above the ~32 GB/s a Gen4 card's link carries" in note.message
    assert "inferred from its name (NVIDIA GeForce RTX 4090 is a Gen4 card)" in note.message and "1→0" not in note.message
    assert "pcie.link.gen.max" in note.fix
    read = Topology(gpus=[gen4(0, 0), gen4(1, 0)], links=[make_link(0, 1, "PIX", measured=Measurement(a_to_b_gbps=40.0))])
    assert "measured-above-line-rate" in [f.code for f in with_findings(read).diagnostics]  # read: impossible
