"""gputopo.bench.results: statistics, units, bus bandwidth and measurements laid onto a Topology
(pure functions, no TensorFlow)."""

from __future__ import annotations

import pytest
from bench_results import make_result
from linktable import two_socket_4

from gputopo.bench.results import (
    Stat,
    apply_measurements,
    busbw_factor,
    gbps_stat,
    placeholder_topology,
    us_stat,
)
from gputopo.model import Topology
from gputopo.notation import MIB


def test_stats_units():
    # 1 MiB in 1 ms is 1.048576 GB/s (10^9 bytes/s); the slowest copy gives the minimum.
    stat = gbps_stat(MIB, [0.001, 0.002, 0.0005])
    assert stat.median == pytest.approx(1.048576)
    assert stat.min == pytest.approx(0.524288)
    assert stat.max == pytest.approx(2.097152)
    assert stat.samples == 3
    assert us_stat([2e-6, 4e-6]).median == pytest.approx(3.0)
    with pytest.raises(ValueError):
        Stat.of([])


def test_busbw_factor_matches_nccl_tests():
    assert busbw_factor(2) == 1.0
    assert busbw_factor(4) == 1.5
    assert busbw_factor(8) == 1.75


def test_apply_measurements_keeps_the_worse_figures_and_round_trips():
    topo = two_socket_4()
    result = make_result("CPU", {(a, b): 1.0 + a + 0.1 * b for a in range(4) for b in range(4) if a != b})
    updated = apply_measurements(topo, result)
    assert sorted(updated) == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    back = Topology.from_dict(topo.to_dict())
    m = back.link(1, 3).measured
    assert m is not None and m.device_kind == "CPU"
    assert m.a_to_b_gbps == pytest.approx(2.3) and m.b_to_a_gbps == pytest.approx(4.1)
    assert m.latency_us == pytest.approx(13.0)  # the worse direction
    assert m.size_bytes == MIB and m.repeats == 3
    assert any(f.code == "measured-host-memory" for f in back.diagnostics)


def test_apply_measurements_skips_unmeasured_pairs():
    topo = two_socket_4()
    result = make_result("GPU", {(0, 1): 10.0}, indices=[0, 1, 2, 3])
    assert apply_measurements(topo, result) == [(0, 1)]
    assert topo.link(0, 1).measured.b_to_a_gbps is None
    assert topo.link(2, 3).measured is None
    assert not any(f.code == "measured-host-memory" for f in topo.diagnostics)


def test_placeholder_topology_says_host_memory_and_validates():
    result = make_result("CPU", {(0, 1): 2.0, (1, 0): 2.0}, indices=[0, 1, 2])
    topo = placeholder_topology(result)
    topo.validate()
    assert "host memory" in topo.label
    assert apply_measurements(topo, result) == [(0, 1)]
    assert Topology.from_dict(topo.to_dict()).link(0, 1).measured.device_kind == "CPU"


def test_apply_measurements_keeps_how_much_the_repeated_samples_varied():
    """recommend takes a bench's spread, (max - min) / median of its samples, for the noise of its figures."""
    topo = two_socket_4()
    apply_measurements(topo, make_result("GPU", {(0, 1): 10.0, (1, 0): 20.0}, indices=[0, 1, 2, 3]))
    m = Topology.from_dict(topo.to_dict()).link(0, 1).measured
    assert m is not None and m.spread == pytest.approx(0.2)  # make_result's samples: median +-10%
