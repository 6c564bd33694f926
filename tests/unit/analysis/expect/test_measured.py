"""Measured against expected in one place: the measured figure, the best figure to rank by, the
rating, the comparison sentence, and laying a bench snapshot onto a topology."""

import pytest

from gputopo.analysis.expect.bandwidth import estimate_link
from gputopo.analysis.expect.measured import (
    best_estimate,
    best_matrix,
    comparisons,
    measured_gbps,
    merge_measurements,
    rate,
)
from gputopo.errors import InputError
from gputopo.model import Gpu, Measurement, Topology, make_link
from gputopo.sources.reference import load_reference


def _gpu(index, gen=4, width=16, nvlink=None):
    return Gpu(index=index, pcie_gen_max=gen, pcie_width_current=width, nvlink_version=nvlink)


def test_a_gpu_measurement_wins_over_the_estimate_and_the_slower_direction_counts():
    link = make_link(0, 1, "NV2", measured=Measurement(a_to_b_gbps=45.0, b_to_a_gbps=38.5))
    est = best_estimate(link, _gpu(0, nvlink="2.0"), _gpu(1, nvlink="2.0"))
    assert est.basis == "measured" and est.gbps == pytest.approx(38.5)
    assert estimate_link(link, _gpu(0, nvlink="2.0"), _gpu(1, nvlink="2.0")).basis == "estimated"


def test_a_bidirectional_figure_alone_is_halved():
    link = make_link(0, 1, "PIX", measured=Measurement(bidirectional_gbps=30.0))
    assert measured_gbps(link) == pytest.approx(15.0)


def test_measurements_on_logical_cpu_devices_do_not_describe_the_link():
    link = make_link(0, 1, "SYS", measured=Measurement(a_to_b_gbps=90.0, b_to_a_gbps=90.0, device_kind="CPU"))
    est = best_estimate(link, _gpu(0), _gpu(1))
    assert measured_gbps(link) is None and est.basis == "estimated" and est.gbps < 20


def test_rating_thresholds():
    assert rate(40.0, 40.0) == rate(28.0, 40.0) == "ok"
    assert rate(24.0, 40.0) == "low"
    assert rate(11.0, 40.0) == "far-below"


def test_a_comparison_names_the_pair_the_figure_the_share_and_the_method():
    m = Measurement(a_to_b_gbps=9.9, b_to_a_gbps=24.0, method="p2pBandwidthLatencyTest", test="P2P=Enabled")
    topo = Topology(gpus=[_gpu(2), _gpu(5)], links=[make_link(2, 5, "PIX", measured=m)])
    slow, fast = comparisons(topo)
    assert (slow.src, slow.dst, fast.src, fast.dst) == (2, 5, 5, 2)
    assert slow.rating == "far-below" and fast.rating == "ok"
    assert slow.text().startswith("GPU 2\u21925: 9.9 GB/s, 40% of what PIX over PCIe Gen4 x16 gives")
    assert "p2pBandwidthLatencyTest P2P=Enabled" in slow.text()


def test_nothing_is_expected_of_a_link_whose_type_is_unknown():
    topo = Topology(gpus=[_gpu(0), _gpu(1)], links=[make_link(0, 1, "UNKNOWN", measured=Measurement(a_to_b_gbps=3.0))])
    assert comparisons(topo) == []


def test_best_matrix_takes_measured_pairs_and_estimates_the_rest():
    topo = load_reference("dgx1")
    topo.link(0, 3).measured = Measurement(a_to_b_gbps=7.0, b_to_a_gbps=8.0)
    matrix = best_matrix(topo)
    assert matrix[(0, 3)] == matrix[(3, 0)] == pytest.approx(7.0)
    assert matrix[(0, 1)] == pytest.approx(20.0)


def test_merge_measurements_copies_links_and_refuses_other_gpus():
    topo = load_reference("dgx1")
    bench = load_reference("dgx1")
    bench.link(0, 1).measured = Measurement(a_to_b_gbps=1.0)
    assert merge_measurements(topo, bench, "b.json") == 1 and topo.link(0, 1).measured.a_to_b_gbps == 1.0
    bench.gpus[0].pci_bus_id = "0000:ff:00.0"
    with pytest.raises(InputError, match="other GPUs"):
        merge_measurements(topo, bench, "b.json")
    with pytest.raises(InputError, match="no measurements"):
        merge_measurements(topo, load_reference("dgx1"), "b.json")


def test_the_one_verdict_rates_figures_and_suspects_those_above_the_line_rate():
    from gputopo.analysis.expect.measured import LINE_RATE_SLACK, OK_RATIO, verdict

    assert verdict(OK_RATIO * 40, 40.0, 50.0) == "ok"
    assert verdict(0.6 * 40, 40.0) == "low" and verdict(0.1 * 40, 40.0) == "far-below"
    assert verdict(50.0 * LINE_RATE_SLACK * 0.999, 40.0, 50.0) == "ok"
    assert verdict(50.0 * LINE_RATE_SLACK * 1.01, 40.0, 50.0) == "above-line-rate"


def test_merge_measurements_joins_by_bus_id_else_uuid_and_refuses_an_index_join_unless_asked():
    topo = load_reference("dgx1")
    bench = load_reference("dgx1")
    bench.link(0, 1).measured = Measurement(a_to_b_gbps=1.0, b_to_a_gbps=2.0)
    bench.gpus[0].pci_bus_id, bench.gpus[1].pci_bus_id = bench.gpus[1].pci_bus_id, bench.gpus[0].pci_bus_id
    assert merge_measurements(topo, bench, "b.json") == 1  # by bus id: the bench's 0 is this topology's 1
    assert (topo.link(0, 1).measured.a_to_b_gbps, topo.link(0, 1).measured.b_to_a_gbps) == (2.0, 1.0)
    for gpu in bench.gpus:
        gpu.pci_bus_id = None
        gpu.uuid = None
    with pytest.raises(InputError, match="by PCI bus id or UUID.*--join-by-index"):
        merge_measurements(load_reference("dgx1"), bench, "b.json")
    joined = load_reference("dgx1")
    assert merge_measurements(joined, bench, "b.json", join_by_index=True) == 1
    assert joined.link(0, 1).measured.a_to_b_gbps == 1.0


def test_host_memory_figures_never_land_on_gpu_links():
    """issue 32: a DGX-1 snapshot and a bench of 4 logical CPU devices (no bus ids)."""
    from gputopo.sources.registry import read_file
    from conftest import OWN_FIXTURES

    bench = read_file(str(OWN_FIXTURES / "snapshots" / "bench_cpu4.json"))
    for join_by_index in (False, True):
        topo = load_reference("dgx1")
        with pytest.raises(InputError, match="host memory on logical CPU devices"):
            merge_measurements(topo, bench, "bench.json", join_by_index)
        assert not any(link.measured for link in topo.links)


def test_the_noise_of_each_tool_is_its_widest_spread_else_the_default():
    from gputopo.analysis.expect.measured import DEFAULT_NOISE, noise_by_method, noise_text

    topology = load_reference("two-socket-4gpu")
    topology.link(0, 1).measured = Measurement(10.0, 10.0, method="bench-p2p", spread=0.02)
    topology.link(0, 2).measured = Measurement(10.0, 10.0, method="bench-p2p", spread=0.031)
    topology.link(1, 3).measured = Measurement(10.0, 10.0, method="p2pBandwidthLatencyTest", test="P2P=Enabled")
    topology.link(2, 3).measured = Measurement(10.0, 10.0, device_kind="CPU", method="bench-p2p", spread=0.5)  # host memory
    noise = noise_by_method(topology)
    assert noise == {"bench-p2p": 0.031, "p2pBandwidthLatencyTest P2P=Enabled": DEFAULT_NOISE}
    assert noise_text(noise) == ("~5% (bench-p2p: the widest spread of its repeated samples, 3.1%; "
                                 "p2pBandwidthLatencyTest P2P=Enabled: no repeated samples recorded, the default)")
    topology.link(0, 2).measured = Measurement(10.0, 10.0, method="bench-p2p")  # one figure without samples
    assert noise_by_method(topology)["bench-p2p"] == DEFAULT_NOISE
