"""NVML's side of P2P health, through the one door (``nvml_binding.NvmlBinding.query``):

- per GPU: its PCIe link (current/max generation and width) and, read right after it, its
  performance state (``nvmlDeviceGetPerformanceState``: what the link's speed means), each NVLink's state
  (``nvmlDeviceGetNvLinkState``) and error counters (``nvmlDeviceGetNvLinkErrorCounter``: replay,
  recovery, CRC flit, CRC data), the NVSwitch fabric's state and health
  (``nvmlDeviceGetGpuFabricInfoV``, else ``nvmlDeviceGetGpuFabricInfo`` on older drivers);
- per pair: the P2P read status (``nvmlDeviceGetP2PStatus``, caps index READ = 0).

Queries a GPU or driver does not answer are ``None``; only NVML not starting is an error
(``NvmlUnavailable``), which doctor reports as a check it could not make.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from gputopo.model import P2P_STATUS_WORDS
from gputopo.sources.host.nvml_binding import (
    INVALID_ARGUMENT,
    NOT_SUPPORTED,
    NVLINK_REMOTE_GPU,
    NVLINK_REMOTE_SWITCH,
    P2P_CAPS_INDEX_READ,
    Failed,
    GpuLost,
    NvmlBinding,
    bus_id_of,
    performance_state,
    text,
)

# nvmlNvLinkErrorCounter_t
NVLINK_ERROR_COUNTERS = {"replay": 0, "recovery": 1, "crc_flit": 2, "crc_data": 3}
# nvmlGpuFabricState_t
FABRIC_STATES = {0: "not-supported", 1: "not-started", 2: "in-progress", 3: "completed"}
FABRIC_INFO_V2 = (2 << 24) | 36  # nvmlGpuFabricInfo_v2: sizeof(nvmlGpuFabricInfo_v2_t) | version << 24
FABRIC_DEGRADED_BW_TRUE = 1  # healthMask bits 0-1 (NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE)


@dataclass
class NvLinkHealth:
    link: int
    active: bool | None
    errors: dict[str, int] = field(default_factory=dict)  # counter name -> count, those NVML answered
    remote: str | None = None  # an active link's far end: "switch", a GPU's bus id, or None (CPU / unknown)


@dataclass
class GpuNvmlHealth:
    index: int
    pci_bus_id: str | None = None
    name: str | None = None
    lost: bool = False
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    nvlinks: list[NvLinkHealth] | None = None  # None: no NVLink (or NVML could not say)
    fabric_state: str | None = None  # FABRIC_STATES word; None: not asked / no answer
    fabric_status: int | None = None  # nvmlReturn_t of the fabric registration (0 = success)
    fabric_degraded_bandwidth: bool | None = None
    performance_state: int | None = None  # 0 (P0) .. 15, read right after the link; None: not known


@dataclass
class NvmlHealth:
    driver_version: str | None = None
    gpus: list[GpuNvmlHealth] = field(default_factory=list)
    p2p_read: dict[tuple[int, int], str] = field(default_factory=dict)  # (a, b) a<b -> "ok" or status word

    def nvlink_pairs(self) -> set[tuple[str, str]]:
        """Bus-id pairs (sorted) joined by an active NVLink: directly, or both on the NVSwitch fabric."""
        pairs: set[tuple[str, str]] = set()
        on_switch = []
        for gpu in self.gpus:
            ends = {link.remote for link in gpu.nvlinks or [] if link.active and link.remote}
            if gpu.pci_bus_id and "switch" in ends:
                on_switch.append(gpu.pci_bus_id)
            for end in ends - {"switch"}:
                if gpu.pci_bus_id and end != gpu.pci_bus_id:
                    pairs.add((min(gpu.pci_bus_id, end), max(gpu.pci_bus_id, end)))
        pairs.update((a, b) for a in on_switch for b in on_switch if a < b)
        return pairs


def read_nvml_health(nvml: Any = None) -> NvmlHealth:
    """Ask NVML (``nvml`` a pynvml-like module; the real one by default) for the health above."""
    binding = NvmlBinding(nvml)
    binding.init()
    try:
        return _read(binding)
    finally:
        binding.shutdown()


def _answer(binding: NvmlBinding, fn_name: str, *args: Any) -> Any:
    """The answer, or None for a ``Failed``."""
    answer = binding.query(fn_name, *args)
    return None if isinstance(answer, Failed) else answer


def _read(binding: NvmlBinding) -> NvmlHealth:
    health = NvmlHealth(driver_version=text(_answer(binding, "nvmlSystemGetDriverVersion")))
    handles: dict[int, Any] = {}
    for index in range(binding.gpu_count()):
        gpu = GpuNvmlHealth(index=index)
        health.gpus.append(gpu)
        try:
            handle = _answer(binding, "nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                continue
            _read_gpu(binding, gpu, handle)
            handles[index] = handle
        except GpuLost:
            gpu.lost = True
    for a in handles:
        for b in handles:
            if a < b:
                try:
                    status = _answer(binding, "nvmlDeviceGetP2PStatus", handles[a], handles[b], P2P_CAPS_INDEX_READ)
                except GpuLost:
                    continue
                if status is not None:
                    health.p2p_read[(a, b)] = P2P_STATUS_WORDS.get(int(status), f"status {int(status)}")
    return health


def _int(value: Any) -> int | None:
    return None if value is None else int(value)


def _read_gpu(binding: NvmlBinding, gpu: GpuNvmlHealth, handle: Any) -> None:
    gpu.pci_bus_id = bus_id_of(_answer(binding, "nvmlDeviceGetPciInfo", handle))
    gpu.name = text(_answer(binding, "nvmlDeviceGetName", handle))
    gpu.pcie_gen_current = _int(_answer(binding, "nvmlDeviceGetCurrPcieLinkGeneration", handle))
    gpu.pcie_gen_max = _int(_answer(binding, "nvmlDeviceGetMaxPcieLinkGeneration", handle))
    gpu.pcie_width_current = _int(_answer(binding, "nvmlDeviceGetCurrPcieLinkWidth", handle))
    gpu.pcie_width_max = _int(_answer(binding, "nvmlDeviceGetMaxPcieLinkWidth", handle))
    gpu.performance_state = performance_state(binding.query("nvmlDeviceGetPerformanceState", handle))
    gpu.nvlinks = _nvlinks(binding, handle)
    _fabric(binding, gpu, handle)


def _remote_end(binding: NvmlBinding, handle: Any, link: int) -> str | None:
    """Where an active link ends: ``"switch"``, a peer GPU's bus id, or None (the CPU, or unknown)."""
    kind = _answer(binding, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
    if kind is not None and int(kind) == NVLINK_REMOTE_SWITCH:
        return "switch"
    if kind is not None and int(kind) != NVLINK_REMOTE_GPU:
        return None
    return bus_id_of(_answer(binding, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link))


def _nvlinks(binding: NvmlBinding, handle: Any) -> list[NvLinkHealth] | None:
    links: list[NvLinkHealth] = []
    for link in range(binding.max_nvlinks()):
        state = binding.query("nvmlDeviceGetNvLinkState", handle, link)
        if isinstance(state, Failed):
            if state.error in (INVALID_ARGUMENT, NOT_SUPPORTED):
                break  # past the last link (or no NVLink at all)
            links.append(NvLinkHealth(link, None))
            continue
        entry = NvLinkHealth(link, int(state) == 1)
        if entry.active:
            entry.remote = _remote_end(binding, handle, link)
            for name, counter in NVLINK_ERROR_COUNTERS.items():
                count = _answer(binding, "nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)
                if count is not None:
                    entry.errors[name] = int(count)
        links.append(entry)
    return links or None


def _fabric(binding: NvmlBinding, gpu: GpuNvmlHealth, handle: Any) -> None:
    """Fabric Manager's registration of this GPU (NVSwitch systems); nothing where not supported."""
    module = binding.module
    info_v = getattr(module, "c_nvmlGpuFabricInfoV_t", None)
    info = None
    if info_v is not None:
        candidate = info_v()
        candidate.version = getattr(module, "nvmlGpuFabricInfo_v2", FABRIC_INFO_V2)
        if _answer(binding, "nvmlDeviceGetGpuFabricInfoV", handle, ctypes.byref(candidate)) is not None:
            info = candidate
            mask = int(candidate.healthMask)
            gpu.fabric_degraded_bandwidth = (mask & 0b11) == FABRIC_DEGRADED_BW_TRUE if mask & 0b11 else None
    plain = binding.fabric_info_v1() if info is None else None
    if plain is not None and _answer(binding, "nvmlDeviceGetGpuFabricInfo", handle, ctypes.byref(plain)) is not None:
        info = plain
    if info is not None:
        gpu.fabric_state = FABRIC_STATES.get(int(info.state), f"state {int(info.state)}")
        gpu.fabric_status = int(info.status)
