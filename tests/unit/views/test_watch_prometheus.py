"""The Prometheus textfile parses, whatever the GPU names and bus ids hold (text format 0.0.4)."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st

from gputopo.analysis.watch.watch import ErrorDelta, Frame, LinkRate, PcieRate
from gputopo.analysis.watch.watch_summary import Summary
from gputopo.views.watch_prometheus import escape_label, prometheus_text

NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = rf'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\\\|\\"|\\n)*)"'
SAMPLE = re.compile(rf"({NAME})\{{((?:{LABEL})(?:,{LABEL})*)?\}} (\S+)")


def unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "\\": "\\", '"': '"'}[m.group(1)], text)


def parse(text: str) -> list[tuple[str, dict[str, str], float]]:
    """A strict reader of the exposition format: every line a comment or a whole sample."""
    samples = []
    for line in text.split("\n")[:-1]:
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = SAMPLE.fullmatch(line)
        assert match, f"not a sample line: {line!r}"
        labels = {m.group(1): unescape(m.group(2)) for m in re.finditer(LABEL, match.group(2) or "")}
        samples.append((match.group(1), labels, float(match.group(match.lastindex))))
    assert text.endswith("\n")
    return samples


def one_frame() -> tuple[Frame, Summary]:
    frame = Frame(1.0, [{"index": 0, "utilization_percent": 50}],
                  links=[LinkRate(0, 3, "NVSwitch", None, 25.0, 1.0, 25.0, 100.0)],
                  pcie=[PcieRate(0, 2.0, None, 63.0, 3.2)], errors=[ErrorDelta(0, 3, "nvlink_crc", 2)])
    summary = Summary()
    summary.add(frame)
    return frame, summary


@settings(max_examples=200, deadline=None)
@given(name=st.text(), bus_id=st.text())
def test_any_name_and_bus_id_parse_back(name, bus_id):
    frame, summary = one_frame()
    samples = parse(prometheus_text(frame, summary, {0: {"gpu": 0, "name": name, "bus_id": bus_id}}))
    assert samples and all(labels["name"] == name and labels["bus_id"] == bus_id for _, labels, _ in samples)


def test_metrics_units_and_values():
    frame, summary = one_frame()
    samples = parse(prometheus_text(frame, summary, {0: {"gpu": 0, "name": "H100", "bus_id": "0000:18:00.0"}}))
    by_name = {(n, labels.get("link")): v for n, labels, v in samples}
    assert by_name[("gputopo_nvlink_tx_bytes_per_second", "3")] == 25e9
    assert by_name[("gputopo_nvlink_utilization_ratio", "3")] == 1.0
    assert by_name[("gputopo_pcie_tx_bytes_per_second", None)] == 2e9
    assert ("gputopo_pcie_rx_bytes_per_second", None) not in by_name  # unknown is left out, never 0
    assert by_name[("gputopo_link_errors_total", "3")] == 2
    assert by_name[("gputopo_gpu_utilization_ratio", None)] == 0.5


def test_escape_label():
    assert escape_label('a\\b"c\nd') == 'a\\\\b\\"c\\nd'
