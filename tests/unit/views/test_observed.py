"""The scan screen shows what other tools measured or observed (it was only in --json)."""

from __future__ import annotations

import io

from conftest import OWN_FIXTURES
from rich.console import Console

from gputopo.analysis.scan_result import scan_result
from gputopo.model import Gpu, Measurement, Topology, make_link
from gputopo.model.observed import CollectiveRow, CollectiveRun, NcclTransport, NcclView, NvLinkState
from gputopo.sources.registry import read_file
from gputopo.views.observed import MAX_SIZE_ROWS, render_observed

CORPUS = OWN_FIXTURES / "corpus"


def shown(topology: Topology) -> str:
    console = Console(file=io.StringIO(), width=150, color_system=None)
    render_observed(scan_result(topology), console)
    return console.file.getvalue()  # type: ignore[attr-defined]


def test_nothing_observed_shows_nothing():
    assert shown(Topology(gpus=[Gpu(0), Gpu(1)], links=[make_link(0, 1, "NV2")])) == ""


def test_measured_pairs_against_their_link():
    link = make_link(0, 1, "PIX", measured=Measurement(a_to_b_gbps=9.9, b_to_a_gbps=24.0, latency_us=1.5))
    gpus = [Gpu(0, pcie_gen_max=4, pcie_width_max=16), Gpu(1, pcie_gen_max=4, pcie_width_max=16)]
    text = shown(Topology(gpus=gpus, links=[link]))
    assert "0 → 1" in text and "9.9" in text and "1 → 0" in text and "24.0" in text and "1.5 us" in text
    row = next(line for line in text.splitlines() if "0 → 1" in line)
    assert "%" in row  # against what PIX over Gen4 x16 should give


def test_logical_cpu_measurements_are_not_shown_as_links():
    link = make_link(0, 1, "UNKNOWN", measured=Measurement(a_to_b_gbps=30.0, device_kind="CPU"))
    assert "Measured" not in shown(Topology(gpus=[Gpu(0), Gpu(1)], links=[link]))


def test_real_p2p_bandwidth_capture_is_shown():
    text = shown(read_file(str(CORPUS / "p2pbw" / "asus_esc8000a_bandwidthtest_then_p2pbw_session.txt")))
    assert "Measured copy bandwidth" in text and "26.3" in text and "p2pBandwidthLatencyTest" in text


def test_nvlink_states_count_inactive_links():
    states = [NvLinkState(gpu=0, link=k, active=k != 3, gbps=25.0) for k in range(6)]
    text = shown(Topology(gpus=[Gpu(0)], nvlinks=states))
    row = next(line for line in text.splitlines() if line.strip("│ ").startswith("0 "))
    assert row.split("│")[1:6] == [" 0   ", " 5      ", " 1        ", " 0       ", " 25            "]


def test_nccl_transports_and_settings_are_plain_text():
    nccl = NcclView(version="2.18.1", nranks=2, transports=[NcclTransport(0, 1, "SHM", "SHM/direct/direct")],
                    settings={"NCCL_P2P_DISABLE": "1 [red]x[/red]"})
    text = shown(Topology(nccl=nccl))
    assert "NCCL 2.18.1" in text and "SHM 1" in text and "NCCL_P2P_DISABLE" in text and "[red]x[/red]" in text


def test_long_nccl_tests_tables_are_sampled_and_say_so():
    rows = [CollectiveRow(size_bytes=8 << k, out_busbw_gbps=float(k), in_busbw_gbps=float(k), out_wrong=0, in_wrong=1)
            for k in range(30)]
    text = shown(Topology(collectives=[CollectiveRun(operation="all_reduce_perf", rows=rows, avg_busbw_gbps=14.5)]))
    assert f"{MAX_SIZE_ROWS} of 30 sizes shown" in text and "average bus bandwidth 14.5 GB/s" in text
    assert "8 B" in text and "4 GiB" in text  # the smallest and the largest are kept


def test_scan_shows_the_observed_part(cli):
    result = cli("scan", "--from", str(CORPUS / "p2pbw" / "asus_esc8000a_bandwidthtest_then_p2pbw_session.txt"))
    assert result.exit_code == 0 and "Measured copy bandwidth" in result.stdout


def test_of_expected_is_unknown_where_the_expectation_is_a_guess_and_marked_above_line_rate():
    """Review finding: 267% 'of expected' for a Gen4 card on a NODE pair whose generation the text
    lacks (Gen3 assumed), and 900% over PCIe passed silently."""
    unknown_gen = make_link(0, 1, "NODE", measured=Measurement(a_to_b_gbps=26.3))
    text = shown(Topology(gpus=[Gpu(0), Gpu(1)], links=[unknown_gen]))
    row = next(line for line in text.splitlines() if "0 → 1" in line)
    assert "%" not in row and "?" in row
    gen4 = [Gpu(0, pcie_gen_max=4, pcie_width_max=16), Gpu(1, pcie_gen_max=4, pcie_width_max=16)]
    too_fast = make_link(0, 1, "NODE", measured=Measurement(a_to_b_gbps=90.0))
    row = next(line for line in shown(Topology(gpus=gen4, links=[too_fast])).splitlines() if "0 → 1" in line)
    assert "%!" in row
