"""What a whole watch showed: bytes each link carried, its peak and mean % of line rate, the error
counts, and (given the GPUs a plan chose) whether their NVLinks carried the traffic or sat idle while
PCIe carried it.

Frames are folded in as they come (``Summary.add``): memory grows with the links, not the time.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.analysis.watch.watch import BYTES_PER_GB, ERROR_COUNTERS, Frame
from gputopo.model import Finding

# A planned group whose NVLinks carried less than this share of its GPUs' traffic while PCIe moved
# at least PCIE_FLOOR_BYTES: the plan's NVLinks sat idle.
NVLINK_SHARE_FLOOR = 0.1
PCIE_FLOOR_BYTES = 1e9


@dataclass
class Totals:
    """One link's (or one GPU's PCIe) share of the whole watch."""

    gpu: int
    link: int | None  # None: PCIe
    peer: str
    tx_bytes: float = 0.0
    rx_bytes: float = 0.0
    peak_percent: float | None = None
    percent_sum: float = 0.0
    frames: int = 0
    reading: str | None = None  # PCIe: "counters", or "sampled" where any interval was (analysis.watch.watch)

    def add(self, tx_gbps: float | None, rx_gbps: float | None, percent: float | None, seconds: float) -> None:
        self.tx_bytes += (tx_gbps or 0.0) * BYTES_PER_GB * seconds
        self.rx_bytes += (rx_gbps or 0.0) * BYTES_PER_GB * seconds
        if percent is not None:
            self.peak_percent = percent if self.peak_percent is None else max(self.peak_percent, percent)
            self.percent_sum += percent
            self.frames += 1

    @property
    def mean_percent(self) -> float | None:
        return round(self.percent_sum / self.frames, 1) if self.frames else None


@dataclass
class Summary:
    frames: int = 0
    seconds: float = 0.0
    links: dict[tuple[int, int], Totals] = field(default_factory=dict)
    pcie: dict[int, Totals] = field(default_factory=dict)
    errors: dict[tuple[int, int | None, str], int] = field(default_factory=dict)
    findings: dict[tuple[str, tuple[int, ...]], Finding] = field(default_factory=dict)  # each once

    def add(self, frame: Frame) -> None:
        self.frames += 1
        self.seconds += frame.interval_s
        for rate in frame.links:
            totals = self.links.setdefault((rate.gpu, rate.link), Totals(rate.gpu, rate.link, rate.peer))
            totals.add(rate.tx_gbps, rate.rx_gbps, rate.percent_of_peak, frame.interval_s)
        for pcie in frame.pcie:
            totals = self.pcie.setdefault(pcie.gpu, Totals(pcie.gpu, None, "CPU"))
            totals.add(pcie.tx_gbps, pcie.rx_gbps, pcie.percent_of_peak, frame.interval_s)
            if pcie.reading is not None and totals.reading != "sampled":
                totals.reading = pcie.reading
        for error in frame.errors:
            key = (error.gpu, error.link, error.counter)
            self.errors[key] = self.errors.get(key, 0) + error.delta
        for finding in frame.findings:
            self.findings.setdefault((finding.code, tuple(finding.gpus)), finding)

    def nvlink_bytes(self, gpus: set[int]) -> float:
        return sum(t.tx_bytes + t.rx_bytes for t in self.links.values() if t.gpu in gpus)

    def pcie_bytes(self, gpus: set[int]) -> float:
        return sum(t.tx_bytes + t.rx_bytes for t in self.pcie.values() if t.gpu in gpus)


def plan_verdict(summary: Summary, planned: list[int]) -> tuple[str, Finding | None]:
    """Did the planned GPUs' NVLinks carry their traffic? ``("nvlink", None)`` they did,
    ``("idle", None)`` nothing moved, ``("pcie", finding)`` PCIe carried it while the NVLinks idled,
    ``("unknown", None)`` no NVLink counters were read."""
    group = set(planned)
    has_links = any(t.gpu in group and t.frames for t in summary.links.values())
    nvlink, pcie = summary.nvlink_bytes(group), summary.pcie_bytes(group)
    if not has_links:
        return "unknown", None
    if nvlink + pcie == 0:
        return "idle", None
    if pcie >= PCIE_FLOOR_BYTES and nvlink < NVLINK_SHARE_FLOOR * (nvlink + pcie):
        gpus = sorted(group)
        return "pcie", Finding(
            "warning", "watch-plan-nvlink-idle",
            f"the planned GPUs {','.join(map(str, gpus))} moved {pcie / 1e9:.1f} GB over PCIe but only "
            f"{nvlink / 1e9:.1f} GB over their NVLinks: the job did not use the links it was placed for", gpus,
            fix="check CUDA_VISIBLE_DEVICES matches the plan and that NCCL uses P2P/NVLink "
                "(NCCL_DEBUG=INFO: 'via P2P/IPC' or 'NVLS'; NCCL_P2P_DISABLE unset)")
    return "nvlink", None


def error_lines(summary: Summary) -> list[str]:
    """The error counts in words, one per link and counter."""
    return [f"GPU {gpu} {'PCIe' if link is None else f'NVLink {link}'} {ERROR_COUNTERS[counter]} +{count}"
            for (gpu, link, counter), count in sorted(summary.errors.items(), key=lambda kv: (kv[0][0], kv[0][1] or -1, kv[0][2]))]
