"""Two samples of the live counters -> rates, % of each link's line rate, error deltas and findings.

A counter is cumulative (NVLink in KiB, PCIe in bytes); its rate is the difference over the
driver's timestamps (µs), else over the times the samples were taken. GB/s is 1e9 bytes/s. The peak
is a link's raw line rate per direction (``bandwidth.NVLINK_RAW_GBPS_PER_LINK`` by NVLink generation:
NVLink1 20, NVLink2-4 25, NVLink5 50 GB/s; PCIe the current generation x width,
``bandwidth.PCIE_RAW_GBPS_PER_LANE``); ``percent_of_peak`` is the busier direction's share.

Each GPU's traffic is one of (``state``):
- ``moving``: some counter moved;
- ``idle``: the counters are flat and the GPU is not busy (utilisation 0 or unknown);
- ``zero-while-busy``: every throughput counter it has is flat while a kernel runs (utilisation at
  least ``BUSY_PERCENT``): some systems read 0 under load (DCGM#149), so the zeros may not be true;
- ``not-supported``: the driver does not give these counters (per field: NOT_SUPPORTED);
- ``lost``: the GPU fell off the bus.

A GPU's PCIe ``reading`` is ``counters`` (the cumulative byte counters: the interval's average) or
``sampled`` (where the driver lacks them: ``nvmlDeviceGetPcieThroughput``, KiB/s over the ~20 ms the
driver samples at the end of the interval, a glimpse of it, said as such everywhere it is shown).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.analysis.expect.bandwidth import NVLINK_RAW_GBPS_PER_LINK, PCIE_RAW_GBPS_PER_LANE, nvlink_generation
from gputopo.model import Finding
from gputopo.sources.host.nvml_counters import (
    NO_LINK,
    OK,
    PEER_CPU,
    PEER_GPU,
    PEER_SWITCH,
    GpuSample,
    WatchedGpu,
    WatchedLink,
)

BYTES_PER_GB = 1e9
KIB = 1024
BUSY_PERCENT = 10  # a GPU this busy whose counters are all flat is suspect, not idle
MOVING, IDLE, ZERO_WHILE_BUSY, NOT_SUPPORTED, LOST = "moving", "idle", "zero-while-busy", "not-supported", "lost"
ERROR_COUNTERS = {"nvlink_replay": "replay", "nvlink_recovery": "recovery", "nvlink_crc": "CRC", "pcie_replay": "PCIe replay"}


@dataclass(frozen=True)
class LinkRate:
    gpu: int
    link: int
    peer: str  # "GPU 3", "NVSwitch", "CPU", "?"
    peer_gpu: int | None
    tx_gbps: float | None  # None: not read (not supported, lost, first sample)
    rx_gbps: float | None
    line_rate_gbps: float | None
    percent_of_peak: float | None


@dataclass(frozen=True)
class PcieRate:
    gpu: int
    tx_gbps: float | None
    rx_gbps: float | None
    line_rate_gbps: float | None
    percent_of_peak: float | None
    reading: str | None = "counters"  # "counters", "sampled" (~20 ms, see the module), None: no reading


@dataclass(frozen=True)
class ErrorDelta:
    gpu: int
    link: int | None  # None: the GPU's PCIe link
    counter: str  # "nvlink_replay", "nvlink_recovery", "nvlink_crc", "pcie_replay"
    delta: int


@dataclass
class Frame:
    """What one interval showed."""

    interval_s: float
    gpus: list[dict[str, object]]  # per GPU: index, name, utilization_percent, state
    links: list[LinkRate] = field(default_factory=list)
    pcie: list[PcieRate] = field(default_factory=list)
    errors: list[ErrorDelta] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)


def peer_text(link: WatchedLink) -> str:
    if link.peer_kind == PEER_GPU and link.peer_gpu is not None:
        return f"GPU {link.peer_gpu}"
    return {PEER_SWITCH: "NVSwitch", PEER_CPU: "CPU"}.get(link.peer_kind, "?")


def nvlink_line_rate_gbps(gpu: WatchedGpu) -> float | None:
    generation = nvlink_generation(gpu.nvlink_version)
    return NVLINK_RAW_GBPS_PER_LINK.get(generation) if generation else None


def pcie_line_rate_gbps(gpu: WatchedGpu) -> float | None:
    if not gpu.pcie_gen or not gpu.pcie_width or gpu.pcie_gen not in PCIE_RAW_GBPS_PER_LANE:
        return None
    return PCIE_RAW_GBPS_PER_LANE[gpu.pcie_gen] * gpu.pcie_width


def _delta(before: GpuSample, after: GpuSample, key: tuple[str, int]) -> tuple[float, float] | None:
    """(amount, seconds) of a counter between two samples; None where it was not read both times or
    went backwards (a counter that wrapped or was reset)."""
    a, b = before.counters.get(key), after.counters.get(key)
    if a is None or b is None or a.status != OK or b.status != OK or a.value is None or b.value is None:
        return None
    amount = float(b.value) - float(a.value)
    if amount < 0:
        return None
    seconds = (b.timestamp_us - a.timestamp_us) / 1e6 if b.timestamp_us > a.timestamp_us > 0 else after.taken_s - before.taken_s
    return (amount, seconds) if seconds > 0 else None


def _gbps(before: GpuSample, after: GpuSample, key: tuple[str, int], unit_bytes: int) -> float | None:
    delta = _delta(before, after, key)
    return None if delta is None else delta[0] * unit_bytes / delta[1] / BYTES_PER_GB


def _percent(tx: float | None, rx: float | None, line: float | None) -> float | None:
    known = [v for v in (tx, rx) if v is not None]
    return round(100.0 * max(known) / line, 1) if known and line else None


def _status_of(sample: GpuSample, names: tuple[str, ...]) -> set[str]:
    return {c.status for (name, _), c in sample.counters.items() if name in names}


def frame(gpus: list[WatchedGpu], before: list[GpuSample], after: list[GpuSample]) -> Frame:
    """The rates, errors and findings between two samples of the same GPUs."""
    interval_s = max((b.taken_s - a.taken_s for a, b in zip(before, after)), default=0.0)
    result = Frame(interval_s=round(interval_s, 3), gpus=[])
    for gpu, a, b in zip(gpus, before, after):
        line = nvlink_line_rate_gbps(gpu)
        moved = False
        for link in gpu.links:
            tx = _gbps(a, b, ("nvlink_tx_kib", link.link), KIB)
            rx = _gbps(a, b, ("nvlink_rx_kib", link.link), KIB)
            moved |= bool(tx) or bool(rx)
            result.links.append(LinkRate(gpu.index, link.link, peer_text(link), link.peer_gpu,
                                         _round(tx), _round(rx), line, _percent(tx, rx, line)))
        tx, rx, reading = _pcie(a, b)
        moved |= bool(tx) or bool(rx)
        pcie_line = pcie_line_rate_gbps(gpu)
        result.pcie.append(PcieRate(gpu.index, _round(tx), _round(rx), pcie_line, _percent(tx, rx, pcie_line), reading))
        for (name, scope) in b.counters:
            if name in ERROR_COUNTERS:
                delta = _delta(a, b, (name, scope))
                if delta and delta[0] > 0:
                    result.errors.append(ErrorDelta(gpu.index, None if scope == NO_LINK else scope, name, int(delta[0])))
        state = _state(b, moved)
        result.gpus.append({"index": gpu.index, "name": gpu.name, "utilization_percent": b.utilization_percent,
                            "state": state})
    result.findings = frame_findings(result)
    return result


def _sampled_gbps(sample: GpuSample, name: str) -> float | None:
    counter = sample.counters.get((name, NO_LINK))
    if counter is None or counter.status != OK or counter.value is None:
        return None
    return float(counter.value) * KIB / BYTES_PER_GB


def _pcie(before: GpuSample, after: GpuSample) -> tuple[float | None, float | None, str | None]:
    """A GPU's PCIe TX and RX (GB/s) and how they were read: the byte counters, else the driver's
    ~20 ms sample (``sampled``), else nothing (None)."""
    tx = _gbps(before, after, ("pcie_tx_bytes", NO_LINK), 1)
    rx = _gbps(before, after, ("pcie_rx_bytes", NO_LINK), 1)
    if tx is not None or rx is not None:
        return tx, rx, "counters"
    tx, rx = _sampled_gbps(after, "pcie_tx_kib_per_s"), _sampled_gbps(after, "pcie_rx_kib_per_s")
    return tx, rx, "sampled" if tx is not None or rx is not None else None


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


THROUGHPUT = ("nvlink_tx_kib", "nvlink_rx_kib", "pcie_tx_bytes", "pcie_rx_bytes", "pcie_tx_kib_per_s", "pcie_rx_kib_per_s")


def _state(sample: GpuSample, moved: bool) -> str:
    if sample.lost:
        return LOST
    if moved:
        return MOVING
    statuses = _status_of(sample, THROUGHPUT)
    if OK not in statuses:  # nothing read: not supported (or failed: the same to the user, unknown)
        return NOT_SUPPORTED
    if (sample.utilization_percent or 0) >= BUSY_PERCENT:
        return ZERO_WHILE_BUSY
    return IDLE


def _gpu_list(indices: list[int]) -> str:
    return ",".join(str(i) for i in indices)


def frame_findings(result: Frame) -> list[Finding]:
    """What the user should know of this interval: errors that rose, counters that read zero on a
    busy GPU, counters the driver does not give."""
    findings = []
    rising: dict[int, list[str]] = {}
    for error in result.errors:
        where = "PCIe" if error.link is None else f"NVLink {error.link}"
        rising.setdefault(error.gpu, []).append(f"{where} {ERROR_COUNTERS[error.counter]} +{error.delta}")
    for gpu, parts in sorted(rising.items()):
        findings.append(Finding(
            "warning", "watch-link-errors-rising",
            f"GPU {gpu}: link error counters rose while watching ({'; '.join(parts)})", [gpu],
            fix="run `gputopo doctor` and `nvidia-smi nvlink -e`; a link whose replays or CRC errors keep "
                "rising needs reseating or an RMA (check `dmesg` for Xid 74)"))
    busy = [int(g["index"]) for g in result.gpus if g["state"] == ZERO_WHILE_BUSY]  # type: ignore[call-overload]
    if busy:
        findings.append(Finding(
            "warning", "watch-counters-zero-while-busy",
            f"GPUs {_gpu_list(busy)} are busy but their NVLink and PCIe counters did not move: some systems "
            "read 0 under load, so these zeros may not be true", busy,
            fix="compare with `nvidia-smi nvlink -gt d` and `nvidia-smi dmon -s t` during the run, or measure "
                "with `gputopo bench-p2p`"))
    unsupported = [int(g["index"]) for g in result.gpus if g["state"] == NOT_SUPPORTED]  # type: ignore[call-overload]
    if unsupported:
        findings.append(Finding(
            "info", "watch-counters-unsupported",
            f"GPUs {_gpu_list(unsupported)}: this driver gives no NVLink or PCIe traffic counters "
            "(NVML field values not supported); their traffic is unknown, not zero", unsupported))
    return findings
