"""Intervals folded into a summary, and the verdict on a planned group."""

from __future__ import annotations

import pytest

from gputopo.analysis.watch.watch import ErrorDelta, Frame, LinkRate, PcieRate
from gputopo.analysis.watch.watch_summary import Summary, error_lines, plan_verdict


def interval(nvlink_gbps: float, pcie_gbps: float, replays: int = 0) -> Frame:
    return Frame(2.0, [{"index": 0}, {"index": 1}],
                 links=[LinkRate(0, 0, "GPU 1", 1, nvlink_gbps, 0.0, 25.0, 100 * nvlink_gbps / 25)],
                 pcie=[PcieRate(0, pcie_gbps, 0.0, 63.0, 100 * pcie_gbps / 63)],
                 errors=[ErrorDelta(0, 0, "nvlink_crc", replays)] if replays else [])


def test_bytes_peak_and_mean():
    summary = Summary()
    summary.add(interval(25.0, 0.0))
    summary.add(interval(5.0, 0.0, replays=2))
    totals = summary.links[(0, 0)]
    assert totals.tx_bytes == pytest.approx(60e9)
    assert totals.peak_percent == 100 and totals.mean_percent == 60
    assert summary.seconds == 4.0 and summary.errors == {(0, 0, "nvlink_crc"): 2}
    assert error_lines(summary) == ["GPU 0 NVLink 0 CRC +2"]


def test_verdicts():
    on_nvlink = Summary()
    on_nvlink.add(interval(20.0, 1.0))
    assert plan_verdict(on_nvlink, [0, 1]) == ("nvlink", None)
    on_pcie = Summary()
    on_pcie.add(interval(0.0, 10.0))
    verdict, finding = plan_verdict(on_pcie, [0, 1])
    assert verdict == "pcie" and finding is not None and finding.code == "watch-plan-nvlink-idle"
    quiet = Summary()
    quiet.add(interval(0.0, 0.0))
    assert plan_verdict(quiet, [0, 1]) == ("idle", None)
    assert plan_verdict(Summary(), [0]) == ("unknown", None)
