"""`train --watch`'s lines from the watch summary JSON: recorded or not, hostile names made safe."""

from __future__ import annotations

from gputopo.views.watch_result import result_lines


def test_not_recorded_is_one_line():
    assert result_lines({"recorded": False, "reason": "link traffic not recorded: no NVML"}) == [
        "link traffic: not recorded (link traffic not recorded: no NVML)"]


def test_links_pcie_and_verdict():
    data = {"recorded": True, "seconds": 2.0, "frames": 2,
            "links": [{"gpu": 0, "link": 3, "peer": "GPU 1\x1b[31m", "tx_bytes": 5e9, "rx_bytes": 0, "peak_percent": 40.0}],
            "pcie": [{"gpu": 0, "tx_bytes": 1e9, "rx_bytes": 0, "peak_percent": 2.0, "reading": "sampled"}],
            "plan": {"verdict": "nvlink", "link_errors": 2}, "findings": []}
    lines = result_lines(data)
    assert lines[0].startswith("link traffic over 2.0 s") and "\x1b" not in "".join(lines)
    assert "GPU 0 NVLink 3" in lines[1] and "5.00 GB" in lines[1]
    assert "(~20 ms samples)" in lines[2] and "link errors +2" in lines[3]
