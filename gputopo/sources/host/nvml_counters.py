"""Live traffic and error counters of every GPU's links, read through the NVML door (``gputopo watch``).

Once, when opened: each GPU's name, bus id, PCIe generation and width, and its active NVLinks with
where each ends (``nvmlDeviceGetNvLinkRemoteDeviceType``: a GPU, found by its remote PCI bus id, an
NVSwitch or the CPU). Then, per sample, one ``nvmlDeviceGetFieldValues`` call per GPU for every
counter it has, and its utilisation:

- NVLink data TX/RX per link (``NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX`` 138 / ``_RX`` 139, scope the
  link): cumulative KiB;
- PCIe TX/RX (``NVML_FI_DEV_PCIE_COUNT_TX_BYTES`` 197 / ``_RX_BYTES`` 198): cumulative bytes;
- errors: NVLink DL replay / recovery / CRC per link (161, 162, 163), PCIe replays (94).

Where a GPU's driver does not give the PCIe byte counters (197/198 NOT_SUPPORTED or failing), its
PCIe reading is ``nvmlDeviceGetPcieThroughput`` instead (TX and RX, KiB/s the driver samples over
about 20 ms each: a glimpse, not the interval's average), kept as ``pcie_tx_kib_per_s`` /
``pcie_rx_kib_per_s`` so analysis can say which it is. NVLinks whose state reads 0 (down) are kept in
``WatchedGpu.down_links``.

Each value comes with the driver's timestamp (µs) and its own return code: NOT_SUPPORTED for one
field is kept apart from a value, so analysis can tell "not supported" from "reads zero". NVML
field values take no lock (DCGM's profiling fields 1009-1075 take a system-wide perfmon lock that
Nsight also needs: never asked here). Rates are analysis's work (``gputopo.analysis.watch.watch``): this
module only reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from gputopo.sources.host.nvml_binding import (
    INVALID_ARGUMENT,
    NOT_SUPPORTED,
    NVLINK_REMOTE_GPU,
    NVLINK_REMOTE_IBMNPU,
    NVLINK_REMOTE_SWITCH,
    NVLINK_VERSION_ENUM,
    NVML_NOT_SUPPORTED_CODE,
    NVML_SUCCESS_CODE,
    FUNCTION_NOT_FOUND,
    Failed,
    GpuLost,
    NvmlBinding,
    bus_id_of,
    field_values,
)

# NVML field ids (nvml.h / pynvml NVML_FI_DEV_*).
FI_NVLINK_TX_KIB = 138
FI_NVLINK_RX_KIB = 139
FI_NVLINK_REPLAY = 161
FI_NVLINK_RECOVERY = 162
FI_NVLINK_CRC = 163
FI_PCIE_REPLAY = 94
FI_PCIE_TX_BYTES = 197
FI_PCIE_RX_BYTES = 198

# Counter names (what analysis and the fakes call them) -> field id, per link or per GPU.
LINK_COUNTERS = {"nvlink_tx_kib": FI_NVLINK_TX_KIB, "nvlink_rx_kib": FI_NVLINK_RX_KIB,
                 "nvlink_replay": FI_NVLINK_REPLAY, "nvlink_recovery": FI_NVLINK_RECOVERY,
                 "nvlink_crc": FI_NVLINK_CRC}
GPU_COUNTERS = {"pcie_tx_bytes": FI_PCIE_TX_BYTES, "pcie_rx_bytes": FI_PCIE_RX_BYTES, "pcie_replay": FI_PCIE_REPLAY}
NO_LINK = -1  # the scope of a per-GPU counter
# The PCIe fallback (``nvmlDeviceGetPcieThroughput``'s counter argument, nvmlPcieUtilCounter_t) ->
# the name its reading is kept under (KiB/s over the driver's ~20 ms sample).
PCIE_SAMPLED = {"pcie_tx_kib_per_s": 0, "pcie_rx_kib_per_s": 1}

PEER_GPU, PEER_SWITCH, PEER_CPU, PEER_UNKNOWN = "gpu", "nvswitch", "cpu", "unknown"
OK, UNSUPPORTED, FAILED = "ok", "not-supported", "failed"


@dataclass(frozen=True)
class WatchedLink:
    """One active NVLink and where it ends: ``peer_gpu`` the NVML index of the GPU at its far end
    (``peer_kind`` ``gpu``), else None (an NVSwitch, the CPU, or an end NVML did not say)."""

    gpu: int
    link: int
    peer_kind: str
    peer_gpu: int | None = None
    peer_bus_id: str | None = None


@dataclass(frozen=True)
class WatchedGpu:
    index: int
    name: str | None
    bus_id: str | None
    nvlink_version: str | None  # "4.0"; None without NVLink or where NVML does not say
    pcie_gen: int | None  # current (what the link runs at now)
    pcie_width: int | None
    links: tuple[WatchedLink, ...] = ()
    down_links: tuple[int, ...] = ()  # NVLinks that exist but whose state reads 0 (down)


@dataclass(frozen=True)
class Counter:
    """A counter as read: its value (None unless ``status`` is ``ok``), the driver's timestamp (µs)."""

    status: str
    value: float | int | None = None
    timestamp_us: int = 0
    reason: str | None = None


@dataclass
class GpuSample:
    gpu: int
    taken_s: float  # time.monotonic() when read
    utilization_percent: int | None = None
    counters: dict[tuple[str, int], Counter] = field(default_factory=dict)  # (name, link or NO_LINK)
    lost: bool = False


def _int_or_none(value: Any) -> int | None:
    return None if isinstance(value, Failed) or value is None else int(value)


def _peer_of(nvml: NvmlBinding, handle: Any, index: int, link: int, gpu_of_bus: dict[str, int]) -> WatchedLink:
    remote_type = nvml.query("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
    if not isinstance(remote_type, Failed) and int(remote_type) == NVLINK_REMOTE_SWITCH:
        return WatchedLink(index, link, PEER_SWITCH)
    if not isinstance(remote_type, Failed) and int(remote_type) == NVLINK_REMOTE_IBMNPU:
        return WatchedLink(index, link, PEER_CPU)
    bus = bus_id_of(nvml.query("nvmlDeviceGetNvLinkRemotePciInfo", handle, link))
    if bus is not None and bus in gpu_of_bus and (isinstance(remote_type, Failed) or int(remote_type) == NVLINK_REMOTE_GPU):
        return WatchedLink(index, link, PEER_GPU, gpu_of_bus[bus], bus)
    return WatchedLink(index, link, PEER_UNKNOWN, None, bus)


def _active_links(nvml: NvmlBinding, handle: Any) -> tuple[list[int], str | None, list[int]]:
    """The GPU's active NVLink indices, their version (links until InvalidArgument) and the links
    that are down (state 0)."""
    active: list[int] = []
    down: list[int] = []
    version = None
    for link in range(nvml.max_nvlinks()):
        state = nvml.query("nvmlDeviceGetNvLinkState", handle, link)
        if isinstance(state, Failed):
            if state.error in (INVALID_ARGUMENT, NOT_SUPPORTED):
                break
            continue
        if int(state) != 1:
            down.append(link)
            continue
        active.append(link)
        if version is None:
            enum = nvml.query("nvmlDeviceGetNvLinkVersion", handle, link)
            version = None if isinstance(enum, Failed) else NVLINK_VERSION_ENUM.get(int(enum))
    return active, version, down


class CounterReader:
    """NVML held open for the whole watch: ``open()`` the GPUs and their links, ``sample()`` as often
    as wanted, ``close()`` (or use it as a context manager)."""

    def __init__(self, nvml: Any = None) -> None:
        self.nvml = nvml if isinstance(nvml, NvmlBinding) else NvmlBinding(nvml)
        self.gpus: list[WatchedGpu] = []
        self._handles: list[Any] = []
        self._fields: list[list[tuple[int, int]]] = []  # per GPU, (field id, scope) in order
        self._names: list[list[tuple[str, int]]] = []
        self._lost: set[int] = set()
        self._no_sampled_pcie: set[int] = set()  # GPUs whose driver lacks nvmlDeviceGetPcieThroughput too
        self._open = False

    def __enter__(self) -> "CounterReader":
        self.open()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def open(self) -> list[WatchedGpu]:
        self.nvml.init()
        self._open = True
        count = self.nvml.gpu_count()
        handles, buses = [], {}
        for index in range(count):
            handle = self.nvml.query("nvmlDeviceGetHandleByIndex", index)
            handles.append(None if isinstance(handle, Failed) else handle)
            bus = bus_id_of(self.nvml.query("nvmlDeviceGetPciInfo", handle)) if handles[-1] is not None else None
            if bus is not None:
                buses[bus] = index
        for index, handle in enumerate(handles):
            try:
                self.gpus.append(self._describe(index, handle, buses))
            except GpuLost:
                self._lost.add(index)
                self.gpus.append(WatchedGpu(index, None, None, None, None, None))
        self._handles = handles
        for gpu in self.gpus:
            names = [(name, link.link) for link in gpu.links for name in LINK_COUNTERS]
            names += [(name, NO_LINK) for name in GPU_COUNTERS]
            self._names.append(names)
            self._fields.append([(LINK_COUNTERS.get(name) or GPU_COUNTERS[name], max(scope, 0)) for name, scope in names])
        return self.gpus

    def _describe(self, index: int, handle: Any, buses: dict[str, int]) -> WatchedGpu:
        if handle is None:
            return WatchedGpu(index, None, None, None, None, None)
        name = self.nvml.query("nvmlDeviceGetName", handle)
        bus = next((b for b, i in buses.items() if i == index), None)
        active, version, down = _active_links(self.nvml, handle)
        links = tuple(_peer_of(self.nvml, handle, index, link, buses) for link in active)
        return WatchedGpu(index, None if isinstance(name, Failed) else name, bus, version,
                          _int_or_none(self.nvml.query("nvmlDeviceGetCurrPcieLinkGeneration", handle)),
                          _int_or_none(self.nvml.query("nvmlDeviceGetCurrPcieLinkWidth", handle)), links,
                          tuple(down))

    def close(self) -> None:
        if self._open:
            self._open = False
            self.nvml.shutdown()

    def sample(self) -> list[GpuSample]:
        """One reading of every GPU's counters and utilisation."""
        return [self._sample_gpu(gpu.index) for gpu in self.gpus]

    def _sample_gpu(self, index: int) -> GpuSample:
        taken_s = time.monotonic()
        handle = self._handles[index] if index < len(self._handles) else None
        if index in self._lost or handle is None:
            return GpuSample(index, taken_s, lost=True)
        try:
            utilization = self.nvml.query("nvmlDeviceGetUtilizationRates", handle)
            answer = self.nvml.query("nvmlDeviceGetFieldValues", handle, self._fields[index])
            busy = None if isinstance(utilization, Failed) else int(utilization.gpu)
            sample = GpuSample(index, taken_s, busy)
            self._fill(sample, answer)
            if index not in self._no_sampled_pcie and any(
                    sample.counters.get((name, NO_LINK), Counter(FAILED)).status != OK
                    for name in ("pcie_tx_bytes", "pcie_rx_bytes")):
                self._sampled_pcie(index, handle, sample)
        except GpuLost:
            self._lost.add(index)
            return GpuSample(index, taken_s, lost=True)
        return sample

    def _fill(self, sample: GpuSample, answer: Any) -> None:
        names = self._names[sample.gpu]
        if isinstance(answer, Failed):
            status = UNSUPPORTED if answer.error in (NOT_SUPPORTED, FUNCTION_NOT_FOUND) else FAILED
            sample.counters = {key: Counter(status, reason=answer.reason) for key in names}
            return
        for key, value in zip(names, field_values(answer)):
            if value.code == NVML_SUCCESS_CODE and value.value is not None:
                sample.counters[key] = Counter(OK, value.value, value.timestamp_us)
            elif value.code == NVML_NOT_SUPPORTED_CODE:
                sample.counters[key] = Counter(UNSUPPORTED, reason="not supported")
            else:
                sample.counters[key] = Counter(FAILED, reason=f"NVML error {value.code}")

    def _sampled_pcie(self, index: int, handle: Any, sample: GpuSample) -> None:
        """The PCIe fallback: ``nvmlDeviceGetPcieThroughput`` TX and RX (KiB/s over ~20 ms each);
        a driver without it is not asked again."""
        for name, counter in PCIE_SAMPLED.items():
            value = self.nvml.query("nvmlDeviceGetPcieThroughput", handle, counter)
            if isinstance(value, Failed):
                unsupported = value.error in (NOT_SUPPORTED, FUNCTION_NOT_FOUND)
                if unsupported:
                    self._no_sampled_pcie.add(index)
                sample.counters[(name, NO_LINK)] = Counter(UNSUPPORTED if unsupported else FAILED, reason=value.reason)
            else:
                sample.counters[(name, NO_LINK)] = Counter(OK, int(value), 0)


def reader() -> CounterReader:
    """This host's counters through the real binding (tests put a fake here)."""
    return CounterReader()
