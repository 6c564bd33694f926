"""What an nccl-tests run's busbw says of the links: alone against PCIe x16 figures (an estimate with its
assumption), merged with the host's topology against the slowest hop of the best ring; nothing where
the run cannot be judged. The corpus's expectations (tests/fixtures/corpus/nccl_tests/EXPECTED.json
``busbw_finding``) were written before the finding."""

import dataclasses

import pytest
from linktable import PCIE_8, link_table, no_p2p_on, nvswitch, pcie_8

from gputopo.analysis.causes.collective_findings import (
    bandwidth_bound_row,
    collective_findings,
)
from gputopo.analysis.causes.observed_findings import observed_findings
from gputopo.sources.tools import nccl_tests
from gputopo.sources.merge import merge_views
from unit.sources.readers_corpus import cases, text_of

BLOG = "blog_8x_rtx4090_no_p2p_all_reduce_14gbps.txt"
BLOG_BUSES = [f"0000:{bus:02x}:00.0" for bus in (0x01, 0x25, 0x41, 0x61, 0x81, 0xA1, 0xC1, 0xE1)]


def _blog():
    return nccl_tests.read(text_of("nccl_tests", BLOG), "nccl-tests.txt")


def _on(topology, run_source=None):
    """``topology`` with the blog's run on its GPUs 0-7 (as merged by index)."""
    topology.collectives = (run_source or _blog()).collectives
    return topology


@pytest.mark.parametrize(("name", "want"), cases("nccl_tests"))
def test_real_outputs_get_the_busbw_finding_the_expert_expects(name, want):
    topology = nccl_tests.read(text_of("nccl_tests", name), name)
    found = [f for f in observed_findings(topology) if f.code.startswith("collective-busbw")]
    expected = want["busbw_finding"]
    if expected is None:
        assert found == []
        return
    (finding,) = found
    assert (finding.code, finding.severity) == (expected["code"], expected["severity"])
    row = bandwidth_bound_row(topology.collectives[0])
    assert (row.size_bytes, row.out_busbw_gbps) == (expected["size_bytes"], expected["busbw_gbps"])
    assert f"busbw {expected['busbw_gbps']:g} GB/s" in finding.message


def test_alone_the_busbw_is_placed_against_each_pcie_generation_with_its_assumption():
    topology = _blog()
    for gpu in topology.gpus:
        gpu.name = None  # no card named: no generation to infer
    (finding,) = collective_findings(topology)
    assert "on GPUs 0,1,2,3,4,5,6,7: busbw 14.45 GB/s at 128 MiB" in finding.message
    assert "117% of Gen3 (~12.3 GB/s), 59% of Gen4 (~24.6 GB/s), 30% of Gen5 (~48.0 GB/s)" in finding.message
    assert "the output gives neither the links between the GPUs nor their PCIe generation" in finding.message
    assert "--from topo.txt --from nccl-tests.txt" in finding.fix


def test_where_a_source_gives_the_gpus_pcie_link_that_link_is_the_yardstick():
    topology = _blog()
    for gpu in topology.gpus:
        gpu.pcie_gen_max, gpu.pcie_width_current = 4, 16
    topology.gpus[5].pcie_gen_max = 5  # the slowest link decides
    (finding,) = collective_findings(topology)
    assert "59% of their slowest PCIe link, Gen4 x16 (~24.6 GB/s)" in finding.message
    assert "the GPUs' PCIe generation and width as read" in finding.message
    for gpu in topology.gpus:
        gpu.pcie_width_current = 1
    assert collective_findings(topology) == []  # above every figure it could be compared with: nothing low to say


def test_merged_with_the_topology_the_ring_crossing_sockets_explains_the_figure():
    """The blog's run on a two-socket Gen4 box without P2P across sockets (bus ids of the run): any
    ring crosses SYS twice, staged through host memory: ~12.3 GB/s expected, 14.45 measured."""
    topology = link_table(PCIE_8, numa=[0, 0, 0, 0, 1, 1, 1, 1], p2p=no_p2p_on(PCIE_8, "SYS"),
                          gpu={"pci_bus_id": BLOG_BUSES, "pcie_gen_max": 4, "pcie_width_current": 16})
    merged = merge_views([topology, _blog()], ["topo.txt", "nccl-tests.txt"])
    (finding,) = [f for f in observed_findings(merged) if f.code.startswith("collective-busbw")]
    assert (finding.code, finding.severity, finding.fix) == ("collective-busbw-vs-ring", "info", None)
    assert "117% of the ~12.3 GB/s per direction that the best ring" in finding.message
    assert "SYS over PCIe Gen4 x16, no P2P" in finding.message and "the links, not a fault" in finding.message


def test_far_below_an_nvlink_ring_is_a_warning_with_what_to_look_at():
    (finding,) = collective_findings(_on(nvswitch(8, "NV18")))
    assert finding.severity == "warning" and "4% of the ~371 GB/s" in finding.message
    assert "18 x NVLink4" in finding.message and "P2P off or refused there" in finding.message
    assert "NCCL_DEBUG=INFO" in finding.fix and "`gputopo bench-p2p`" in finding.fix


def test_a_range_the_source_leaves_open_is_said_as_a_range_not_a_verdict():
    topology = _on(pcie_8(gpu={"pcie_gen_max": None, "pcie_gen_current": None}))
    (finding,) = collective_findings(topology)
    assert finding.severity == "info" and "60%-235% of the ~6.2-24.0 GB/s" in finding.message
    assert "PCIe generation not in the source" in finding.message and "within what the links may give" in finding.message


def test_latency_bound_sizes_say_nothing():
    """The blog's table cut at 1 MiB (0.22 ms a call): busbw there is latency, not the links."""
    run = _blog().collectives[0]
    short = dataclasses.replace(run, rows=[r for r in run.rows if r.size_bytes <= 1 << 20])
    assert bandwidth_bound_row(short) is None
    topology = _blog()
    topology.collectives = [short]
    assert collective_findings(topology) == []
    slow_start = dataclasses.replace(run, rows=[dataclasses.replace(run.rows[0], out_time_us=900.0), *run.rows[1:]])
    assert bandwidth_bound_row(slow_start) is None  # 900 us for 8 bytes: 16 ms is not 20x that latency


def test_runs_that_cannot_be_judged_say_nothing():
    for change in ({"operation": "alltoall"}, {"operation": "unknown"}, {"nranks": 16}):
        topology = _blog()
        topology.collectives = [dataclasses.replace(topology.collectives[0], **change)]
        assert collective_findings(topology) == [], change
    two_hosts = _blog()
    two_hosts.gpus[7].host = "other"
    assert collective_findings(two_hosts) == []


def test_a_named_card_puts_the_busbw_against_its_own_generation_said_as_inferred():
    """The blog's 8x RTX 4090 (nccl-tests names the cards; no link generation read): a Gen4 card."""
    (finding,) = collective_findings(_blog())
    assert "59% of a Gen4 x16 link (~24.6 GB/s)" in finding.message and "Gen5" not in finding.message
    assert ("the card's PCIe generation, inferred from its name: NVIDIA GeForce RTX 4090 is a Gen4 card, the most its "
            "link trains to, less in an older slot or riser; x16 assumed") in finding.message
    topology = _blog()
    for gpu in topology.gpus:
        gpu.name = "a card the table does not know"
    (unnamed,) = collective_findings(topology)
    assert "117% of Gen3 (~12.3 GB/s), 59% of Gen4 (~24.6 GB/s), 30% of Gen5 (~48.0 GB/s)" in unnamed.message
