"""The NVML probe: this host's GPUs and how they are wired, read through nvidia-ml-py (``pynvml``).

``probe()`` asks the NVIDIA driver's management library for every GPU's identity, PCIe link,
NUMA/CPU affinity, NVLinks and MIG mode, and for every pair of GPUs the PCIe common ancestor and
the P2P capabilities. The result is a ``Topology`` with ``source="nvml"``.

Why it is written defensively: NVML coverage differs between GPU generations, drivers, containers
and permission levels. A query a GPU or driver does not answer must never abort the scan; the field
becomes ``None`` ("not known") and one grouped ``Finding`` per kind of query says which GPUs were
affected and why. Only when NVML itself cannot start does the probe fail, with an
``NvmlUnavailable`` error that points at the sources which work without a driver.

Traps handled here (see shared/README.md):
- nvidia-ml-py 13.x defines ``NVML_P2P_CAPS_INDEX_READ = 0,`` (a tuple): we pass caps as plain ints.
- ``nvmlDeviceGetNvLinkVersion`` returns an enum, not the generation (4 means NVLink 3.0).
- Strings and ``busId`` come back as ``bytes`` or ``str`` depending on the nvidia-ml-py version.
- On NVSwitch machines every NVLink ends at a switch, so matching remote PCI bus ids finds no peer;
  such GPUs reach every other switch-connected GPU with all their links (nvidia-smi's NV12/NV18).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any, Callable

from gputopo.errors import NvmlUnavailable
from gputopo.model import (
    P2P_STATUS_WORDS,
    Finding,
    Gpu,
    Link,
    Topology,
    normalize_pci_bus_id,
)
from gputopo.notation import format_cpu_list, gpu_list

# nvmlGpuTopologyLevel_t -> nvidia-smi's path word. INTERNAL (0) is two GPUs on one board (K80,
# M60, ...); nvidia-smi has no separate word in the matrix, so it is recorded as PIX plus a finding.
TOPOLOGY_LEVEL_WORDS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
TOPOLOGY_LEVEL_INTERNAL = 0

# nvmlDeviceGetP2PStatus capability indices, as plain ints (never pynvml's constants: see above).
P2P_CAPS_INDEX_READ = 0
P2P_CAPS_INDEX_WRITE = 1
P2P_CAPS_INDEX_NVLINK = 2
P2P_CAPS_INDEX_ATOMICS = 3
P2P_CAPS_FIELDS = (
    ("p2p_read", P2P_CAPS_INDEX_READ),
    ("p2p_write", P2P_CAPS_INDEX_WRITE),
    ("p2p_nvlink", P2P_CAPS_INDEX_NVLINK),
    ("p2p_atomics", P2P_CAPS_INDEX_ATOMICS),
)

# nvmlNvlinkVersion_t enum -> NVLink generation as a version string.
NVLINK_VERSION_ENUM = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}

# nvmlNvLinkDeviceType_t
NVLINK_REMOTE_GPU = 0
NVLINK_REMOTE_IBMNPU = 1  # the CPU (POWER9 NVLink to the CPU)
NVLINK_REMOTE_SWITCH = 2

# Upper bound on NVLinks per GPU to try (B200 has 18; nvidia-ml-py 13 says 36). Real NVML answers
# InvalidArgument for a link index past the GPU's last link, which ends the loop early.
DEFAULT_MAX_NVLINKS = 36
NVML_AFFINITY_SCOPE_NODE = 0
BITS_PER_AFFINITY_WORD = 64  # nvmlDeviceGetCpuAffinity fills unsigned long words (64-bit Linux)
MIN_CPU_SET_WORDS = 16  # room for 1024 CPUs even where os.cpu_count() is smaller than the mask

FALLBACK_HINT = (
    "use a reference machine with --machine NAME (see `gputopo machines`) "
    "or a saved snapshot / `nvidia-smi topo -m` text with --from FILE"
)

# Why an NVML query failed, in words, keyed by the pynvml exception class name.
_REASON_WORDS = {
    "NVMLError_NotSupported": "not supported",
    "NVMLError_FunctionNotFound": "not in this driver",
    "NVMLError_NoPermission": "no permission",
    "NVMLError_GpuIsLost": "GPU is lost",
    "NVMLError_Unknown": "unknown error",
    "NVMLError_InvalidArgument": "invalid argument",
    "NVMLError_Uninitialized": "NVML not initialised",
    "NVMLError_Timeout": "timed out",
    "NVMLError_NotFound": "not found",
    "NVMLError_InsufficientSize": "buffer too small",
    "NVMLError_ResetRequired": "GPU needs a reset",
    "NVMLError_DriverNotLoaded": "driver not loaded",
}
# Reasons that mean "this GPU/driver simply does not have it": reported as info, not warning.
_BENIGN_REASONS = {"not supported", "not in this driver"}

_INIT_REASONS = {
    "NVMLError_LibraryNotFound": "the NVIDIA driver library libnvidia-ml.so was not found (no NVIDIA driver installed here?)",
    "NVMLError_DriverNotLoaded": "the NVIDIA kernel driver is not loaded",
    "NVMLError_NoPermission": "no permission to talk to the NVIDIA driver (check access to /dev/nvidia*)",
    "NVMLError_LibRmVersionMismatch": "the NVML library and the kernel driver versions differ (reboot after a driver update?)",
    "NVMLError_GpuIsLost": "a GPU fell off the bus while NVML started (see `dmesg` for Xid 79)",
}

# What each query kind fills in, for the findings ("NVML could not report the <what> of GPUs ...").
_QUERY_WHAT = {
    "handle": "handle (the GPU could not be opened)",
    "name": "name",
    "uuid": "UUID",
    "pci": "PCI bus id",
    "memory": "memory size",
    "numa": "NUMA node",
    "cpu-affinity": "CPU affinity",
    "pcie-gen": "PCIe link generation",
    "pcie-width": "PCIe link width",
    "nvlink": "NVLink state",
    "nvlink-version": "NVLink version",
    "nvlink-remote": "NVLink remote ends",
    "mig": "MIG mode",
    "compute-capability": "CUDA compute capability",
    "topology": "PCIe path (common ancestor)",
    "p2p": "P2P capabilities",
}
_QUERY_FIX = {
    "no permission": "run gputopo as a user with access to /dev/nvidia* (or as root) to see these fields",
    "not in this driver": "a newer NVIDIA driver / nvidia-ml-py reports this field",
}


class _GpuLost(Exception):
    """Internal: the GPU fell off the bus; skip its remaining queries."""


def _text(value: Any) -> str | None:
    """NVML strings arrive as ``bytes`` (older nvidia-ml-py) or ``str`` (13.x): always give ``str``."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    text = str(value).rstrip("\x00").strip()
    return text or None


def _error_class_name(exc: BaseException) -> str:
    return type(exc).__name__


def _reason(exc: BaseException) -> str:
    name = _error_class_name(exc)
    if name in _REASON_WORDS:
        return _REASON_WORDS[name]
    if isinstance(exc, AttributeError):
        return "not in this driver"
    return str(exc) or name


def _is_error(nvml: Any, name: str, exc: BaseException) -> bool:
    cls = getattr(nvml, name, None)
    return isinstance(cls, type) and isinstance(exc, cls)


def _bits(words: Any, bits_per_word: int = BITS_PER_AFFINITY_WORD) -> list[int]:
    """Positions of the set bits in an NVML affinity mask (a sequence of integer words)."""
    result = []
    for w, word in enumerate(list(words)):
        word = int(word)
        bit = 0
        while word:
            if word & 1:
                result.append(w * bits_per_word + bit)
            word >>= 1
            bit += 1
    return result


def cuda_version_text(cuda_driver_version: int | None) -> str | None:
    """``12040`` (what NVML returns) -> ``"12.4"``."""
    if cuda_driver_version is None or cuda_driver_version <= 0:
        return None
    return f"{cuda_driver_version // 1000}.{(cuda_driver_version % 1000) // 10}"


@dataclass
class _NvlinkEnds:
    """What one GPU's active NVLinks connect to."""

    active: int = 0
    to_gpu_bus_ids: list[str] = field(default_factory=list)  # one entry per link
    to_switch: int = 0
    to_cpu: int = 0
    unresolved: int = 0


@dataclass
class _Probe:
    """State of one probe run: the module, the failures seen so far, the lost GPUs."""

    nvml: Any
    failures: dict[str, dict[Any, str]] = field(default_factory=dict)  # kind -> {gpu or pair: reason}
    lost: dict[int, str] = field(default_factory=dict)  # gpu -> bus id (or "?")
    findings: list[Finding] = field(default_factory=list)

    def call(self, kind: str, gpus: tuple[int, ...], fn_name: str, *args: Any) -> Any:
        """Call ``nvml.fn_name(*args)``; on an NVML error record it under ``kind`` and return None.

        A ``GpuIsLost`` marks the GPU lost (single-GPU queries) and raises ``_GpuLost`` so the
        caller skips the rest of that GPU's queries.
        """
        fn: Callable[..., Any] | None = getattr(self.nvml, fn_name, None)
        key: Any = gpus[0] if len(gpus) == 1 else gpus
        if fn is None:  # an older nvidia-ml-py without this binding
            self.failures.setdefault(kind, {})[key] = "not in this driver"
            return None
        try:
            return fn(*args)
        except Exception as exc:  # NVMLError subclasses; anything else is re-raised below
            if not _is_error(self.nvml, "NVMLError", exc):
                raise
            if _is_error(self.nvml, "NVMLError_GpuIsLost", exc):
                if len(gpus) == 1:  # a pair query cannot say which of the two is gone
                    self.lost.setdefault(gpus[0], "?")
                raise _GpuLost() from None
            self.failures.setdefault(kind, {})[key] = _reason(exc)
            return None

    def forget(self, kind: str, gpu: int) -> None:
        """Drop a recorded failure that turned out to be expected (e.g. a fallback succeeded)."""
        self.failures.get(kind, {}).pop(gpu, None)


def _init(nvml: Any) -> None:
    try:
        nvml.nvmlInit()
    except Exception as exc:
        if not _is_error(nvml, "NVMLError", exc):
            raise
        reason = _INIT_REASONS.get(_error_class_name(exc), f"NVML could not start ({exc})")
        raise NvmlUnavailable(f"cannot read this host's GPUs through NVML: {reason}; {FALLBACK_HINT}") from None


def _import_pynvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py: NVIDIA's own binding
    except ImportError:
        raise NvmlUnavailable(
            f"cannot read this host's GPUs: the NVML binding (Python package nvidia-ml-py) is not installed; {FALLBACK_HINT}"
        ) from None
    return pynvml


def probe(nvml: Any = None) -> Topology:
    """Read this host's GPU topology through NVML.

    ``nvml`` is a pynvml-like module (tests pass ``tests.fake_nvml.FakeNvml``); by default the real
    ``pynvml`` from nvidia-ml-py is imported here, lazily, so commands that never probe never load
    it. Raises ``NvmlUnavailable`` when NVML cannot start; every other failure degrades a field to
    ``None`` and is reported in ``Topology.diagnostics``.
    """
    if nvml is None:
        nvml = _import_pynvml()
    _init(nvml)
    try:
        return _probe_initialised(_Probe(nvml))
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception as exc:
            if not _is_error(nvml, "NVMLError", exc):
                raise


def _probe_initialised(state: _Probe) -> Topology:
    nvml = state.nvml
    topo = Topology(source="nvml", host=socket.gethostname())
    topo.source_detail = "NVML (nvidia-ml-py)"
    topo.driver_version = _text(state.call("system", (), "nvmlSystemGetDriverVersion"))
    topo.nvml_version = _text(state.call("system", (), "nvmlSystemGetNVMLVersion"))
    cuda = state.call("system", (), "nvmlSystemGetCudaDriverVersion")
    topo.cuda_driver_version = cuda_version_text(int(cuda)) if cuda is not None else None
    state.failures.pop("system", None)  # versions are informative only; missing ones need no finding

    try:
        count = int(nvml.nvmlDeviceGetCount())
    except Exception as exc:
        if not _is_error(nvml, "NVMLError", exc):
            raise
        raise NvmlUnavailable(f"NVML started but could not count the GPUs ({_reason(exc)}); {FALLBACK_HINT}") from None

    handles: dict[int, Any] = {}
    ends: dict[int, _NvlinkEnds | None] = {}
    for index in range(count):
        gpu = Gpu(index=index)
        topo.gpus.append(gpu)
        try:
            handle = state.call("handle", (index,), "nvmlDeviceGetHandleByIndex", index)
            if handle is None:
                continue
            handles[index] = handle
            ends[index] = _probe_gpu(state, gpu, handle)
        except _GpuLost:
            state.lost[index] = gpu.pci_bus_id or "?"
            handles.pop(index, None)

    _probe_links(state, topo, handles, ends)
    _finish_findings(state, topo)
    return topo


def _probe_gpu(state: _Probe, gpu: Gpu, handle: Any) -> _NvlinkEnds | None:
    """Fill one GPU's fields; returns what its NVLinks connect to (None where unknown)."""
    i = (gpu.index,)
    call = state.call
    pci_info = call("pci", i, "nvmlDeviceGetPciInfo", handle)
    gpu.pci_bus_id = _bus_id_of(pci_info)
    if pci_info is not None and gpu.pci_bus_id is None:
        state.failures.setdefault("pci", {})[gpu.index] = "unreadable answer"
    gpu.name = _text(call("name", i, "nvmlDeviceGetName", handle))
    gpu.uuid = _text(call("uuid", i, "nvmlDeviceGetUUID", handle))
    memory = call("memory", i, "nvmlDeviceGetMemoryInfo", handle)
    gpu.memory_total_bytes = int(memory.total) if memory is not None else None
    gpu.numa_node = _numa_node(state, gpu.index, handle)
    cpu_words = call("cpu-affinity", i, "nvmlDeviceGetCpuAffinity", handle, _cpu_set_words())
    if cpu_words is not None:
        cpus = _bits(cpu_words)
        gpu.cpu_affinity = format_cpu_list(cpus) if cpus else None
    gpu.pcie_gen_current = _int_or_none(call("pcie-gen", i, "nvmlDeviceGetCurrPcieLinkGeneration", handle))
    gpu.pcie_gen_max = _int_or_none(call("pcie-gen", i, "nvmlDeviceGetMaxPcieLinkGeneration", handle))
    gpu.pcie_width_current = _int_or_none(call("pcie-width", i, "nvmlDeviceGetCurrPcieLinkWidth", handle))
    gpu.pcie_width_max = _int_or_none(call("pcie-width", i, "nvmlDeviceGetMaxPcieLinkWidth", handle))
    gpu.mig_mode = _mig_mode(state, gpu.index, handle)
    capability = call("compute-capability", i, "nvmlDeviceGetCudaComputeCapability", handle)
    if capability is not None:
        major, minor = capability
        gpu.compute_capability = f"{int(major)}.{int(minor)}"
    return _probe_nvlinks(state, gpu, handle)


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


def _cpu_set_words() -> int:
    cpus = os.cpu_count() or 1
    return max(MIN_CPU_SET_WORDS, -(-cpus // BITS_PER_AFFINITY_WORD))


def _bus_id_of(pci_info: Any) -> str | None:
    """The normalised bus id of an ``nvmlPciInfo_t`` (``busId`` is bytes or str by version)."""
    if pci_info is None:
        return None
    for attr in ("busId", "busIdLegacy"):
        bus_id = normalize_pci_bus_id(_text(getattr(pci_info, attr, None)))
        if bus_id is not None:
            return bus_id
    return None


def _numa_node(state: _Probe, index: int, handle: Any) -> int | None:
    """The NUMA node nearest the GPU (nvidia-smi's "NUMA Affinity").

    ``nvmlDeviceGetMemoryAffinity`` (scope NODE) answers on ordinary x86/Arm hosts;
    ``nvmlDeviceGetNumaNodeId`` only applies where the GPU itself is a NUMA node, so it is the
    fallback, used where present.
    """
    nodes = state.call("numa", (index,), "nvmlDeviceGetMemoryAffinity", handle, 1, NVML_AFFINITY_SCOPE_NODE)
    if nodes is not None:
        bits = _bits(nodes)
        if len(bits) == 1:
            return bits[0]
    node = state.call("numa-id", (index,), "nvmlDeviceGetNumaNodeId", handle)
    state.failures.pop("numa-id", None)
    if node is not None and int(node) >= 0:
        state.forget("numa", index)
        return int(node)
    return None


def _mig_mode(state: _Probe, index: int, handle: Any) -> bool | None:
    """MIG on? A GPU without MIG support (pre-Ampere, GeForce) answers NotSupported: MIG is off."""
    fn = getattr(state.nvml, "nvmlDeviceGetMigMode", None)
    if fn is None:
        state.failures.setdefault("mig", {})[index] = "not in this driver"
        return None
    try:
        current, _pending = fn(handle)
    except Exception as exc:
        if not _is_error(state.nvml, "NVMLError", exc):
            raise
        if _is_error(state.nvml, "NVMLError_GpuIsLost", exc):
            raise _GpuLost() from None
        if _is_error(state.nvml, "NVMLError_NotSupported", exc):
            return False
        state.failures.setdefault("mig", {})[index] = _reason(exc)
        return None
    return int(current) == 1


def _probe_nvlinks(state: _Probe, gpu: Gpu, handle: Any) -> _NvlinkEnds | None:
    """Walk the GPU's NVLinks: active count, version, and where each active link ends."""
    nvml = state.nvml
    state_fn = getattr(nvml, "nvmlDeviceGetNvLinkState", None)
    if state_fn is None:
        state.failures.setdefault("nvlink", {})[gpu.index] = "not in this driver"
        return None
    ends = _NvlinkEnds()
    version: str | None = None
    max_links = int(getattr(nvml, "NVML_NVLINK_MAX_LINKS", DEFAULT_MAX_NVLINKS) or DEFAULT_MAX_NVLINKS)
    i = (gpu.index,)
    for link in range(max_links):
        try:
            is_active = state_fn(handle, link)
        except Exception as exc:
            if not _is_error(nvml, "NVMLError", exc):
                raise
            if _is_error(nvml, "NVMLError_GpuIsLost", exc):
                raise _GpuLost() from None
            if _is_error(nvml, "NVMLError_InvalidArgument", exc) or (
                link > 0 and _is_error(nvml, "NVMLError_NotSupported", exc)
            ):
                break  # past this GPU's last link
            if link == 0 and _is_error(nvml, "NVMLError_NotSupported", exc):
                break  # a GPU without NVLink: zero links is the answer, not a gap
            state.failures.setdefault("nvlink", {})[gpu.index] = _reason(exc)
            gpu.nvlink_active_links = None
            return None
        if int(is_active) != 1:
            continue
        ends.active += 1
        if version is None:
            enum = state.call("nvlink-version", i, "nvmlDeviceGetNvLinkVersion", handle, link)
            if enum is not None:
                version = NVLINK_VERSION_ENUM.get(int(enum))
                if version is None:
                    state.failures.setdefault("nvlink-version", {})[gpu.index] = f"unknown version enum {int(enum)}"
        remote_type = state.call("nvlink-remote", i, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        if remote_type is not None and int(remote_type) == NVLINK_REMOTE_SWITCH:
            ends.to_switch += 1
            continue
        if remote_type is not None and int(remote_type) == NVLINK_REMOTE_IBMNPU:
            ends.to_cpu += 1
            continue
        remote_bus = _bus_id_of(state.call("nvlink-remote", i, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link))
        if remote_bus is None:
            ends.unresolved += 1
        else:
            ends.to_gpu_bus_ids.append(remote_bus)
    gpu.nvlink_active_links = ends.active
    gpu.nvlink_version = version
    return ends


def _probe_links(
    state: _Probe, topo: Topology, handles: dict[int, Any], ends: dict[int, _NvlinkEnds | None]
) -> None:
    """One ``Link`` per pair: PCIe path word, NVLink count (direct or through NVSwitch), P2P caps."""
    bus_to_gpu = {g.pci_bus_id: g.index for g in topo.gpus if g.pci_bus_id}
    # (a, b) -> {gpu: how many of its links end at the other}; the two views normally agree.
    direct: dict[tuple[int, int], dict[int, int]] = {}
    for index, gpu_ends in ends.items():
        if gpu_ends is None:
            continue
        for remote_bus in gpu_ends.to_gpu_bus_ids:
            peer = bus_to_gpu.get(remote_bus)
            if peer is None or peer == index:
                gpu_ends.unresolved += 1  # a GPU not visible to this process, or not a GPU at all
                continue
            key = (min(index, peer), max(index, peer))
            seen_from = direct.setdefault(key, {})
            seen_from[index] = seen_from.get(index, 0) + 1
        if gpu_ends.unresolved:
            state.failures.setdefault("nvlink-remote", {}).setdefault(
                index, f"{gpu_ends.unresolved} active link(s) end at no GPU or switch NVML lists"
            )

    for a, b in topo.pairs():
        link = Link(a=a, b=b, type="UNKNOWN")
        topo.links.append(link)
        if a in state.lost or b in state.lost or a not in handles or b not in handles:
            continue
        try:
            _probe_pair(state, topo, link, handles, ends, direct)
        except _GpuLost:
            # Pair queries cannot tell which of the two fell off; NVML says so on the next call.
            for gpu in (a, b):
                if _still_there(state, handles[gpu]) is False:
                    state.lost.setdefault(gpu, topo.gpu(gpu).pci_bus_id or "?")


def _still_there(state: _Probe, handle: Any) -> bool | None:
    try:
        state.nvml.nvmlDeviceGetPciInfo(handle)
    except Exception as exc:
        if _is_error(state.nvml, "NVMLError_GpuIsLost", exc):
            return False
        return None
    return True


def _probe_pair(
    state: _Probe,
    topo: Topology,
    link: Link,
    handles: dict[int, Any],
    ends: dict[int, _NvlinkEnds | None],
    direct: dict[tuple[int, int], dict[int, int]],
) -> None:
    a, b = link.a, link.b
    ha, hb = handles[a], handles[b]
    pair = (a, b)
    level = state.call("topology", pair, "nvmlDeviceGetTopologyCommonAncestor", ha, hb)
    path = TOPOLOGY_LEVEL_WORDS.get(int(level)) if level is not None else None
    if level is not None and path is None:
        state.failures.setdefault("topology", {})[pair] = f"unknown level {int(level)}"
    if level is not None and int(level) == TOPOLOGY_LEVEL_INTERNAL:
        state.failures.setdefault("_board", {})[pair] = "internal"
    link.pcie_path = path

    counts = direct.get(pair, {})
    nvlinks = max(counts.values()) if counts else 0
    ends_a, ends_b = ends.get(a), ends.get(b)
    if nvlinks == 0 and ends_a is not None and ends_b is not None and ends_a.to_switch and ends_b.to_switch:
        nvlinks = min(ends_a.to_switch, ends_b.to_switch)
        link.nvswitch = True
    link.nvlink_count = nvlinks
    link.type = f"NV{nvlinks}" if nvlinks > 0 else (path or "UNKNOWN")

    for attr, caps_index in P2P_CAPS_FIELDS:
        status = state.call("p2p", pair, "nvmlDeviceGetP2PStatus", ha, hb, caps_index)
        if status is None:
            continue
        word = P2P_STATUS_WORDS.get(int(status))
        if word is None:
            state.failures.setdefault("p2p", {})[pair] = f"unknown status {int(status)}"
        setattr(link, attr, word)


def _finish_findings(state: _Probe, topo: Topology) -> None:
    """Turn the recorded failures into one finding per query kind (and one per lost GPU)."""
    for gpu, bus_id in sorted(state.lost.items()):
        where = f" ({bus_id})" if bus_id and bus_id != "?" else ""
        topo.diagnostics.append(
            Finding(
                severity="warning",
                code="gpu-lost",
                message=(
                    f"GPU {gpu}{where} fell off the bus (NVML: GPU is lost); its remaining fields and "
                    "links are unknown"
                ),
                gpus=[gpu],
                fix=f"check `dmesg` for Xid 79, then reset the GPU (nvidia-smi -r -i {gpu}) or reboot; reseat it if it recurs",
            )
        )
    boards = state.failures.pop("_board", {})
    if boards:
        gpus = sorted({g for pair in boards for g in pair})
        pairs = ", ".join(f"{a}-{b}" for a, b in sorted(boards))
        topo.diagnostics.append(
            Finding(
                severity="info",
                code="multi-gpu-board",
                message=f"GPU pairs {pairs} sit on one multi-GPU board (NVML: INTERNAL); shown as PIX",
                gpus=gpus,
            )
        )
    for kind, by_key in state.failures.items():
        # GPUs that fell off the bus are explained by their own finding.
        by_key = {k: r for k, r in by_key.items() if not _touches(k, state.lost)}
        if not by_key:
            continue
        reasons = sorted(set(by_key.values()))
        gpus = sorted({g for k in by_key for g in (k if isinstance(k, tuple) else (k,))})
        what = _QUERY_WHAT.get(kind, kind)
        if any(isinstance(k, tuple) for k in by_key):
            subject = "pairs " + ", ".join(f"{a}-{b}" for a, b in sorted(k for k in by_key if isinstance(k, tuple)))
        else:
            subject = ("GPU " if len(gpus) == 1 else "GPUs ") + gpu_list(gpus)
        severity = "info" if set(reasons) <= _BENIGN_REASONS else "warning"
        fix = next((_QUERY_FIX[r] for r in reasons if r in _QUERY_FIX), None)
        topo.diagnostics.append(
            Finding(
                severity=severity,
                code=f"nvml-{kind}-unavailable",
                message=f"NVML could not report the {what} of {subject} ({'; '.join(reasons)}); shown as unknown",
                gpus=gpus,
                fix=fix,
            )
        )


def _touches(key: Any, lost: dict[int, str]) -> bool:
    gpus = key if isinstance(key, tuple) else (key,)
    return any(g in lost for g in gpus)
