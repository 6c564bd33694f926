"""Which transport NCCL takes between two GPUs (its P2P level, NVIDIA/nccl src/graph/paths.cc
``ncclTopoCheckP2p``) and the figure that transport gets."""

import pytest
from linktable import GEN4_X16, link_table

from gputopo.analysis.expect.bandwidth import estimate_link
from gputopo.analysis.expect.nccl_transport import level_of_settings, nccl_estimate, nccl_level, uses_p2p
from gputopo.model import Gpu, NcclView, make_link

WORDS = ("PIX", "PXB", "PHB", "NODE", "SYS")


def _box(settings=None):
    table = [["X", "PIX", "NODE", "SYS"], ["PIX", "X", "NODE", "SYS"], ["NODE", "NODE", "X", "SYS"],
             ["SYS", "SYS", "SYS", "X"]]
    topo = link_table(table, numa=[0, 0, 0, 1], gpu=GEN4_X16)
    if settings is not None:
        topo.nccl = NcclView(settings=settings)
    return topo


@pytest.mark.parametrize("settings, level", [
    ({}, None), ({"NCCL_P2P_LEVEL": "SYS"}, "SYS"), ({"NCCL_P2P_LEVEL": "nvl"}, None),  # NCCL strcmp()s the names: a lowercase one is not read
    ({"NCCL_P2P_DISABLE": "1"}, "LOC"), ({"NCCL_P2P_LEVEL": "3"}, "PHB"), ({"NCCL_P2P_LEVEL": "9"}, "SYS"),
    ({"NCCL_P2P_LEVEL": "bogus"}, None),
    # '²' passes str.isdigit() but not int() (a traceback from `recommend --from` an NCCL log): NCCL's
    # atoi reads no number there, as for "bogus"
    ({"NCCL_P2P_DISABLE": "\u00b2"}, None), ({"NCCL_P2P_LEVEL": "\u00b2"}, None), ({"NCCL_P2P_LEVEL": "\u2460"}, None),
    ({"NCCL_P2P_DISABLE": "9" * 5000}, None), ({"NCCL_P2P_LEVEL": "9" * 5000}, "SYS"),  # int() refuses 4,301 digits
    ({"NCCL_P2P_DISABLE": "0001"}, "LOC"), ({"NCCL_P2P_LEVEL": "0003"}, "PHB"), ({"NCCL_P2P_LEVEL": "0"}, "LOC"),
])
def test_the_level_is_read_as_nccl_reads_its_variables(settings, level):
    assert level_of_settings(settings) == level


def test_by_default_nccl_stops_p2p_at_pcie_switches_and_says_it_is_an_assumption():
    level = nccl_level(_box())
    assert level.level == "PXB" and level.source == "default" and "AMD" in level.assumption
    assert [uses_p2p(make_link(0, 1, w), level) for w in WORDS] == [True, True, False, False, False]
    assert uses_p2p(make_link(0, 1, "NV4"), level)


def test_a_level_an_nccl_log_shows_is_followed_and_not_called_an_assumption():
    level = nccl_level(_box({"NCCL_P2P_LEVEL": "SYS"}))
    assert level.level == "SYS" and level.source == "nccl-log" and level.assumption is None
    assert all(uses_p2p(make_link(0, 1, w), level) for w in WORDS)
    off = nccl_level(_box({"NCCL_P2P_DISABLE": "1"}))
    assert not uses_p2p(make_link(0, 1, "NV4"), off) and not uses_p2p(make_link(0, 1, "PIX"), off)


def test_a_pair_beyond_the_level_gets_the_host_memory_figure_with_the_transport_in_words():
    gpu = Gpu(index=0, **GEN4_X16)
    node = make_link(0, 2, "NODE", p2p_read="ok", p2p_write="ok")
    p2p = estimate_link(node, gpu, gpu)
    shm = nccl_estimate(node, gpu, gpu, 0, nccl_level(_box()))
    assert shm.gbps < p2p.gbps and "SHM" in shm.explanation and "PXB" in shm.explanation
    allowed = nccl_estimate(node, gpu, gpu, 0, nccl_level(_box({"NCCL_P2P_LEVEL": "SYS"})))
    assert allowed.gbps == p2p.gbps and "P2P" in allowed.explanation
    pix = make_link(0, 1, "PIX", p2p_read="ok", p2p_write="ok")
    assert nccl_estimate(pix, gpu, gpu, 0, nccl_level(_box())).gbps == estimate_link(pix, gpu, gpu).gbps
