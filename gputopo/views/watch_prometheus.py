"""`gputopo watch --prometheus FILE`: the latest interval in node_exporter's textfile format.

The Prometheus text exposition format (version 0.0.4): ``# HELP`` / ``# TYPE`` once per metric, then
``name{label="value",...} number`` lines. Label values escape ``\\`` as ``\\\\``, ``"`` as ``\\"`` and a
newline as ``\\n``; HELP text escapes ``\\`` and newlines. Metric names carry their unit
(``_bytes_per_second``, ``_ratio``, ``_total``). An unknown figure is left out (never written as 0).
The CLI writes the text with ``fileio.atomic_write_text``: node_exporter never reads half a file.
"""

from __future__ import annotations

import math
from typing import Any, Iterable

from gputopo.analysis.watch.watch import Frame
from gputopo.analysis.watch.watch_summary import Summary

METRICS = {
    "gputopo_nvlink_tx_bytes_per_second": ("gauge", "NVLink data sent per second, per link"),
    "gputopo_nvlink_rx_bytes_per_second": ("gauge", "NVLink data received per second, per link"),
    "gputopo_nvlink_utilization_ratio": ("gauge", "Busier direction of an NVLink over its line rate (0-1)"),
    "gputopo_pcie_tx_bytes_per_second": ("gauge", "PCIe bytes sent per second, per GPU"),
    "gputopo_pcie_rx_bytes_per_second": ("gauge", "PCIe bytes received per second, per GPU"),
    "gputopo_pcie_utilization_ratio": ("gauge", "Busier direction of a GPU's PCIe link over its current line rate (0-1)"),
    "gputopo_gpu_utilization_ratio": ("gauge", "Share of the last sample period a kernel ran on the GPU (0-1)"),
    "gputopo_link_errors_total": ("counter", "Link error counts since the watch started (replay, recovery, CRC, PCIe replay)"),
}


def escape_label(value: Any) -> str:
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels(labels: dict[str, Any]) -> str:
    return "{" + ",".join(f'{key}="{escape_label(value)}"' for key, value in labels.items() if value is not None) + "}"


def _number(value: float) -> str:
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else str(int(value))


def prometheus_text(frame: Frame, summary: Summary, gpu_labels: dict[int, dict[str, Any]]) -> str:
    """The file's text: ``gpu_labels`` per GPU index the labels every series of it carries
    (``gpu``, ``name``, ``bus_id``)."""
    samples: dict[str, list[tuple[dict[str, Any], float]]] = {name: [] for name in METRICS}

    def add(name: str, gpu: int, value: float | None, **extra: Any) -> None:
        if value is not None:
            samples[name].append(({**gpu_labels.get(gpu, {"gpu": gpu}), **extra}, value))

    for rate in frame.links:
        extra = {"link": rate.link, "peer": rate.peer}
        add("gputopo_nvlink_tx_bytes_per_second", rate.gpu, _bytes(rate.tx_gbps), **extra)
        add("gputopo_nvlink_rx_bytes_per_second", rate.gpu, _bytes(rate.rx_gbps), **extra)
        add("gputopo_nvlink_utilization_ratio", rate.gpu, _ratio(rate.percent_of_peak), **extra)
    for pcie in frame.pcie:
        add("gputopo_pcie_tx_bytes_per_second", pcie.gpu, _bytes(pcie.tx_gbps))
        add("gputopo_pcie_rx_bytes_per_second", pcie.gpu, _bytes(pcie.rx_gbps))
        add("gputopo_pcie_utilization_ratio", pcie.gpu, _ratio(pcie.percent_of_peak))
    for gpu in frame.gpus:
        util = gpu.get("utilization_percent")
        add("gputopo_gpu_utilization_ratio", int(gpu["index"]), None if util is None else float(util) / 100)  # type: ignore[call-overload, arg-type]
    for (gpu, link, counter), count in sorted(summary.errors.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1, kv[0][2])):
        add("gputopo_link_errors_total", gpu, float(count), link=link, counter=counter)
    return "".join(_lines(samples))


def _lines(samples: dict[str, list[tuple[dict[str, Any], float]]]) -> Iterable[str]:
    for name, (kind, help_text) in METRICS.items():
        if not samples[name]:
            continue
        yield f"# HELP {name} {help_text}\n# TYPE {name} {kind}\n"
        for labels, value in samples[name]:
            yield f"{name}{_labels(labels)} {_number(value)}\n"


def _bytes(gbps: float | None) -> float | None:
    return None if gbps is None else gbps * 1e9


def _ratio(percent: float | None) -> float | None:
    return None if percent is None else percent / 100
