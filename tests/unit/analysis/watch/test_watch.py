"""Two samples -> rates, % of line rate, error deltas, and the three kinds of 'no traffic'."""

from __future__ import annotations

import pytest

from gputopo.analysis.watch.watch import IDLE, LOST, MOVING, NOT_SUPPORTED, ZERO_WHILE_BUSY, frame
from gputopo.sources.host.nvml_counters import NO_LINK, OK, UNSUPPORTED, Counter, GpuSample, WatchedGpu, WatchedLink

H100 = WatchedGpu(0, "H100", "0000:18:00.0", "4.0", 5, 16, (WatchedLink(0, 3, "nvswitch"),))
V100 = WatchedGpu(0, "V100", "0000:06:00.0", "2.0", 3, 16, (WatchedLink(0, 0, "gpu", 1, "0000:07:00.0"),))


def sample(t_s: float, util: int | None = None, **values: float) -> GpuSample:
    counters = {}
    for key, value in values.items():
        name, _, scope = key.rpartition("_at_")
        counters[(name, int(scope) if scope != "gpu" else NO_LINK)] = Counter(OK, value, int(t_s * 1e6))
    return GpuSample(0, t_s, util, counters)


def test_rate_from_cumulative_kib_over_driver_timestamps():
    before = sample(10.0, nvlink_tx_kib_at_3=0, nvlink_rx_kib_at_3=0, pcie_tx_bytes_at_gpu=0, pcie_rx_bytes_at_gpu=0)
    after = sample(12.0, nvlink_tx_kib_at_3=50e9 / 1024, nvlink_rx_kib_at_3=0,
                   pcie_tx_bytes_at_gpu=16e9, pcie_rx_bytes_at_gpu=0)
    result = frame([H100], [before], [after])
    link = result.links[0]
    assert link.tx_gbps == pytest.approx(25.0) and link.rx_gbps == 0
    assert link.line_rate_gbps == 25.0 and link.percent_of_peak == pytest.approx(100.0)
    assert link.peer == "NVSwitch"
    pcie = result.pcie[0]
    assert pcie.tx_gbps == pytest.approx(8.0)
    assert pcie.line_rate_gbps == pytest.approx(3.938 * 16)
    assert result.gpus[0]["state"] == MOVING and result.findings == []


def test_nvlink2_peer_and_line_rate():
    before = sample(0.0, nvlink_tx_kib_at_0=0, nvlink_rx_kib_at_0=0)
    after = sample(1.0, nvlink_tx_kib_at_0=5e9 / 1024, nvlink_rx_kib_at_0=10e9 / 1024)
    link = frame([V100], [before], [after]).links[0]
    assert link.peer == "GPU 1" and link.peer_gpu == 1
    assert link.percent_of_peak == pytest.approx(40.0)  # the busier direction over 25 GB/s


def test_flat_counters_idle_or_zero_while_busy():
    flat = dict(nvlink_tx_kib_at_3=7, nvlink_rx_kib_at_3=7, pcie_tx_bytes_at_gpu=9, pcie_rx_bytes_at_gpu=9)
    idle = frame([H100], [sample(0, 0, **flat)], [sample(1, 0, **flat)])
    assert idle.gpus[0]["state"] == IDLE and idle.findings == []
    busy = frame([H100], [sample(0, 90, **flat)], [sample(1, 90, **flat)])
    assert busy.gpus[0]["state"] == ZERO_WHILE_BUSY
    assert [f.code for f in busy.findings] == ["watch-counters-zero-while-busy"]


def test_unsupported_counters_are_unknown_not_zero():
    gone = GpuSample(0, 0.0, 90, {("nvlink_tx_kib", 3): Counter(UNSUPPORTED), ("pcie_tx_bytes", NO_LINK): Counter(UNSUPPORTED)})
    result = frame([H100], [gone], [GpuSample(0, 1.0, 90, dict(gone.counters))])
    assert result.links[0].tx_gbps is None and result.links[0].percent_of_peak is None
    assert result.gpus[0]["state"] == NOT_SUPPORTED
    assert [f.code for f in result.findings] == ["watch-counters-unsupported"]


def test_rising_error_counter_is_a_finding():
    result = frame([H100], [sample(0, nvlink_replay_at_3=4, pcie_replay_at_gpu=0)],
                   [sample(1, nvlink_replay_at_3=9, pcie_replay_at_gpu=0)])
    assert [(e.link, e.counter, e.delta) for e in result.errors] == [(3, "nvlink_replay", 5)]
    finding = result.findings[0]
    assert finding.code == "watch-link-errors-rising" and finding.severity == "warning" and finding.gpus == [0]
    assert "NVLink 3 replay +5" in finding.message


def test_counter_going_backwards_is_no_rate():
    result = frame([H100], [sample(0, nvlink_tx_kib_at_3=100)], [sample(1, nvlink_tx_kib_at_3=5)])
    assert result.links[0].tx_gbps is None


def test_lost_gpu():
    result = frame([H100], [GpuSample(0, 0.0)], [GpuSample(0, 1.0, lost=True)])
    assert result.gpus[0]["state"] == LOST


def test_pcie_sampled_where_the_byte_counters_are_missing():
    gone = {("pcie_tx_bytes", NO_LINK): Counter(UNSUPPORTED), ("pcie_rx_bytes", NO_LINK): Counter(UNSUPPORTED)}
    after = {**gone, ("pcie_tx_kib_per_s", NO_LINK): Counter(OK, 2e9 / 1024),
             ("pcie_rx_kib_per_s", NO_LINK): Counter(OK, 0)}
    result = frame([H100], [GpuSample(0, 0.0, 50, gone)], [GpuSample(0, 1.0, 50, after)])
    pcie = result.pcie[0]
    assert pcie.reading == "sampled" and pcie.tx_gbps == pytest.approx(2.0) and pcie.rx_gbps == 0
    assert result.gpus[0]["state"] == MOVING
    counted = frame([H100], [sample(0.0, pcie_tx_bytes_at_gpu=0)], [sample(1.0, pcie_tx_bytes_at_gpu=1e9)])
    assert counted.pcie[0].reading == "counters"
    none = frame([H100], [GpuSample(0, 0.0, 0, gone)], [GpuSample(0, 1.0, 0, dict(gone))])
    assert none.pcie[0].reading is None and none.pcie[0].tx_gbps is None
