"""A fake of exactly the pynvml (nvidia-ml-py) functions ``gputopo.sources.host.nvml.probe`` calls.

Passed as ``probe(nvml=FakeNvml(...))`` (or ``NvmlBinding(FakeNvml(...))``): it stands where the
real ``pynvml`` module would, behind ``gputopo.sources.host.nvml_binding``'s one query door.

It is built from a ``Topology`` (normally a reference machine) and answers the way the real binding
does, so the probe can be tested on every machine we describe without a GPU:

- the REAL exception classes of the installed ``pynvml`` (``pynvml.NVMLError_NotSupported``, ...),
  and the real module's constants (including the 13.x trap ``NVML_P2P_CAPS_INDEX_READ == (0,)``);
- real return types: ``pynvml.nvmlPciInfo_t`` / ``c_nvmlMemory_t`` structures, ctypes arrays of
  ``c_ulonglong`` words for affinity masks, ``[current, pending]`` for MIG, a tuple for the compute
  capability, enum ints for NVLink versions and topology levels;
- strings as 13.x gives them (``str``) or as older nvidia-ml-py did (``bytes``, ``strings="bytes"``);
  ``raw_text`` gives the bytes the driver answers for a string query instead ({function or
  (function, gpu): bytes}; for ``nvmlDeviceGetPciInfo``, its ``busId``), e.g. bytes that are not
  UTF-8 or hold control characters: 13.x decodes them strictly, as the real binding does
  (``pynvml.convertStrBytes``, ``nvmlPciInfo_t``'s field read: ``UnicodeDecodeError``), older
  bindings hand them over as they are;
- a caps index that is not an int (the ``(0,)`` trap) fails with ``ctypes.ArgumentError`` like the
  real ctypes call; calls before ``nvmlInit`` or after ``nvmlShutdown`` raise ``Uninitialized``;
- NVLinks as the hardware has them: per link a state, an enum version, and a remote end which is the
  peer GPU's PCI info (direct NVLink), a switch (NVSwitch machines, remote type 2) or the CPU
  (remote type 1); a link index past the GPU's last link is ``InvalidArgument``; GPUs without NVLink
  answer ``NotSupported``.

Knobs for failure modes: ``unsupported`` (a function, or a function on one GPU, raises the given
NVML error), ``missing`` (the binding lacks the function: ``AttributeError``), ``lost_after`` (a GPU
falls off the bus after N calls that touch it), ``init_error`` (``nvmlInit`` fails),
``inactive_links`` (some of a GPU's NVLinks are down), ``ancestor_overrides`` (e.g. INTERNAL = 0
for a dual-GPU board), ``gpu_numa_ids`` (``nvmlDeviceGetNumaNodeId`` answers, as on Grace).

Health (``gputopo doctor``): ``nvlink_errors`` ({(gpu, link): {counter: count}} for
``nvmlDeviceGetNvLinkErrorCounter``, counters as NVML numbers them: 0 replay, 1 recovery, 2 CRC flit,
3 CRC data) and ``fabric`` ({gpu: (state, status, healthMask)} for ``nvmlDeviceGetGpuFabricInfo`` /
``...InfoV``, which fill the caller's structure through ``ctypes.byref`` as the real binding does).
A GPU not named there answers as the real driver answers for it (``fabric_answer``): a GPU before
Hopper NotSupported; a Hopper or newer GPU SUCCESS, its state NOT_SUPPORTED off any NVSwitch (as a
real H200 answered), COMPLETED where its NVLinks end at NVSwitches; a driver before R525 (R550 for
the V call) has no such function (FunctionNotFound). Naming a GPU before Hopper is a ``ValueError``:
no driver answers a fabric state for it.

Live state, as the C fake (tests/fake_libnvml) answers it: ``memory_used`` (bytes per GPU; default
0), ``memory_reserved`` (the driver's own reserve, bytes per GPU; default 0: version 1 of the memory
query counts it as used, version 2 gives it apart), ``memory_v2=False`` (a driver before R510), ``utilization`` (percent per GPU; a GPU not given answers ``NotSupported``), ``processes`` (per
GPU a list of ``(pid, name, used bytes or None)``; a GPU not given answers ``NotSupported``; the
name ``str``, or the ``bytes`` a process set (any bytes: ``prctl``), answered by
``nvmlSystemGetProcessName`` as the binding of ``strings`` answers it; a process without a name,
or an unknown PID, answers ``NotFound``), ``performance_state`` (per GPU the number
``nvmlDeviceGetPerformanceState`` answers, 0 for P0; a GPU not given answers ``NotSupported``; 32
is NVML's "unknown" state).
"""

from __future__ import annotations

import ctypes
import itertools
import os
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

import pynvml

import fake_nvml_counters

from gputopo.model import Gpu, Topology, nvlink_count_of
from gputopo.notation import expand_number_list

# The model's words -> the real library's enums (from the installed pynvml, not from the probe).
_P2P_WORD_TO_STATUS = {
    "ok": pynvml.NVML_P2P_STATUS_OK,
    "CNS": pynvml.NVML_P2P_STATUS_CHIPSET_NOT_SUPPORTED,
    "GNS": pynvml.NVML_P2P_STATUS_GPU_NOT_SUPPORTED,
    "TNS": pynvml.NVML_P2P_STATUS_IOH_TOPOLOGY_NOT_SUPPORTED,
    "DR": pynvml.NVML_P2P_STATUS_DISABLED_BY_REGKEY,
    "NS": pynvml.NVML_P2P_STATUS_NOT_SUPPORTED,
    "U": pynvml.NVML_P2P_STATUS_UNKNOWN,
}
_PATH_TO_LEVEL = {
    "PIX": pynvml.NVML_TOPOLOGY_SINGLE,
    "PXB": pynvml.NVML_TOPOLOGY_MULTIPLE,
    "PHB": pynvml.NVML_TOPOLOGY_HOSTBRIDGE,
    "NODE": pynvml.NVML_TOPOLOGY_NODE,
    "SYS": pynvml.NVML_TOPOLOGY_SYSTEM,
}
_NVLINK_VERSION_TO_ENUM = {
    "1.0": pynvml.NVML_NVLINK_VERSION_1_0,
    "2.0": pynvml.NVML_NVLINK_VERSION_2_0,
    "2.2": pynvml.NVML_NVLINK_VERSION_2_2,
    "3.0": pynvml.NVML_NVLINK_VERSION_3_0,
    "3.1": pynvml.NVML_NVLINK_VERSION_3_1,
    "4.0": pynvml.NVML_NVLINK_VERSION_4_0,
    "5.0": pynvml.NVML_NVLINK_VERSION_5_0,
}
# nvmlDeviceGetGpuFabricInfo / ...InfoV, as the real driver answers them (the C fake,
# tests/fake_libnvml/fake_nvml.c fabric_support(), answers the same):
# - nvml.h (NVML 13, NVIDIA/go-nvml gen/nvml/nvml.h): both are "For Hopper or newer fully supported
#   devices" and return NVML_ERROR_NOT_SUPPORTED "If device doesn't support gpu fabric": a GPU before
#   Hopper (compute capability below 9.0) answers NotSupported (go-nvlib's IsFabricAttached reads
#   that answer as "not attached", NVIDIA/go-nvlib#44).
# - A Hopper GPU that is on no NVSwitch fabric answers SUCCESS with state NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
#   (0), status SUCCESS, health mask 0: a real H200 alone in a VM (driver 580.159.04,
#   tests/fixtures/hardware/2026-11-26-h200-firecracker-run3/nvml-recording.json, the
#   nvmlDeviceGetGpuFabricInfoV call; nvml-raw.json: the plain call too); an H100 PCIe
#   (leptonai/gpud#1147: "state=Not Supported").
# - On Hopper + NVSwitch "GPU is registered with the NVIDIA Fabric Manager" (nvml.h): a GPU whose
#   NVLinks end at NVSwitches answers COMPLETED with status SUCCESS, as once Fabric Manager has
#   registered it (no capture of a registered GPU here: its health mask is left 0, "not supported").
# - The plain call came with NVML 12.0 (go-nvml 399f8e0, "Update nvml.h to NVML 12.0": driver R525),
#   the V call with NVML 12.4 (go-nvml f7ceebd; leptonai/gpud#1183: "introduced in driver 550"): an
#   older driver has no such symbol, and the binding raises FunctionNotFound.
FABRIC_FROM_DRIVER = {"nvmlDeviceGetGpuFabricInfo": 525, "nvmlDeviceGetGpuFabricInfoV": 550}
FABRIC_FROM_COMPUTE_CAPABILITY = 9  # Hopper


def hopper_or_newer(compute_capability: str | None) -> bool | None:
    """``"9.0"`` -> True, ``"8.0"`` -> False, unknown -> None."""
    try:
        return int((compute_capability or "").split(".")[0]) >= FABRIC_FROM_COMPUTE_CAPABILITY
    except ValueError:
        return None


def fabric_answer(gpu: Gpu, on_switch: bool, configured: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
    """(state, status, healthMask) a driver fills in for this GPU, or None for NotSupported."""
    if configured is not None:
        return configured
    if not hopper_or_newer(gpu.compute_capability):
        return None
    state = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED if on_switch else pynvml.NVML_GPU_FABRIC_STATE_NOT_SUPPORTED
    return (state, pynvml.NVML_SUCCESS, 0)


def driver_major(version: str | None) -> int | None:
    """``"535.129.03"`` -> 535."""
    try:
        return int((version or "").split(".")[0])
    except ValueError:
        return None


# GPU families with MIG (others answer NotSupported to nvmlDeviceGetMigMode).
_MIG_CAPABLE = ("A100", "A30", "H100", "H200", "H800", "B200", "GB200")
_CAPS_FIELD = {0: "p2p_read", 1: "p2p_write", 2: "p2p_nvlink", 3: "p2p_atomics", 4: "p2p_read"}


class _LegacyPciInfo(ctypes.Structure):
    """``nvmlPciInfo_t`` as older nvidia-ml-py had it: a plain ctypes Structure, so ``busId`` is bytes."""

    _fields_ = list(pynvml.nvmlPciInfo_t._fields_)


@dataclass
class FakeHandle:
    """Stands in for ``c_nvmlDevice_t``: which fake and which GPU it opens."""

    owner_id: int
    index: int


@dataclass
class _FakeLink:
    active: bool
    remote_type: int  # pynvml.NVML_NVLINK_DEVICE_TYPE_*
    remote_bus_id: str  # NVML form, 8-digit domain, upper-case hex


@dataclass
class _FakeGpu:
    gpu: Gpu
    nvlinks: list[_FakeLink] | None  # None: this GPU has no NVLink (NotSupported)
    calls: int = 0

    @property
    def on_switch(self) -> bool:
        """Its NVLinks end at NVSwitches (an NVSwitch fabric, which Fabric Manager registers it on)."""
        return any(link.remote_type == pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH for link in self.nvlinks or [])
    lost: bool = False


def write_fake_sysfs(gpus: list[Gpu], distances: dict[str, dict[str, int]] | None, root: str) -> None:
    """The sysfs files ``gputopo.sources.host.sysfs`` reads: each CPU near a GPU in the GPU's socket, and
    ``node*/distance`` where the topology has NUMA distances."""
    base = Path(root) / "sys" / "devices" / "system"
    socket_of_cpu = {cpu: gpu.socket for gpu in gpus if gpu.socket is not None and gpu.cpu_affinity
                     for cpu in expand_number_list(gpu.cpu_affinity)}
    for cpu, socket in socket_of_cpu.items():
        topology_dir = base / "cpu" / f"cpu{cpu}" / "topology"
        topology_dir.mkdir(parents=True)
        (topology_dir / "physical_package_id").write_text(f"{socket}\n")
    for node, row in (distances or {}).items():
        (base / "node" / f"node{node}").mkdir(parents=True, exist_ok=True)
        (base / "node" / f"node{node}" / "distance").write_text(" ".join(str(row[n]) for n in sorted(row, key=int)) + "\n")
    if distances:
        (base / "node" / "online").write_text(",".join(sorted(distances, key=int)) + "\n")


def _cuda_version_number(text: str | None) -> int | None:
    """``"12.4"`` (a snapshot's CUDA version) -> ``12040`` (what nvmlSystemGetCudaDriverVersion gives)."""
    try:
        major, minor = (int(part) for part in (text or "").split("."))
    except ValueError:
        return None
    return major * 1000 + minor * 10


SWITCHES_PER_BOARD = 6  # NVSwitch chips on an HGX A100 baseboard


def _switch_bus_ids(gpu_bus_ids: set[str | None]) -> list[str]:
    """The NVSwitch chips' bus ids: c0..ff where no GPU is, in domain 0000, then 0001, ... (64 GPUs
    can fill c0..ff of a domain; the C fake's ``place_switches`` places them the same way)."""
    candidates = (f"{n // 64:04x}:{0xc0 + n % 64:02x}:00.0" for n in itertools.count())
    return list(itertools.islice((b for b in candidates if b not in gpu_bus_ids), SWITCHES_PER_BOARD))


def nvml_bus_id(bus_id: str) -> str:
    """``0000:07:00.0`` -> ``00000000:07:00.0`` (NVML's 8-digit domain, upper-case hex)."""
    domain, rest = bus_id.split(":", 1)
    return f"{int(domain, 16):08X}:{rest.upper()}"


class FakeNvml:
    """A pynvml-like module over one host of a ``Topology``. See the module docstring."""

    def __init__(
        self,
        topology: Topology,
        *,
        host: str | None = None,
        strings: str = "str",
        unsupported: dict[Any, type[Exception]] | None = None,
        missing: Iterable[str] = (),
        lost_after: dict[int, int] | None = None,
        init_error: type[Exception] | None = None,
        inactive_links: dict[int, int] | None = None,
        ancestor_overrides: dict[tuple[int, int], int] | None = None,
        gpu_numa_ids: dict[int, int] | None = None,
        nvlink_errors: dict[tuple[int, int], dict[int, int]] | None = None,
        fabric: dict[int, tuple[int, int, int]] | None = None,

        memory_used: dict[int, int] | None = None,
        memory_reserved: dict[int, int] | None = None,
        memory_v2: bool = True,
        utilization: dict[int, int] | None = None,
        processes: dict[int, list[tuple[int, str | bytes | None, int | None]]] | None = None,
        performance_state: dict[int, int] | None = None,
        driver_version: str = "550.54.15",
        cuda_driver_version: int = 12040,
        raw_text: dict[Any, bytes] | None = None,
        counters: dict[str, Any] | None = None,
        clock: Any = None,
    ) -> None:
        if strings not in ("str", "bytes"):
            raise ValueError("strings must be 'str' (nvidia-ml-py 13.x) or 'bytes' (older)")
        object.__setattr__(self, "_missing", frozenset(missing))
        self.strings = strings
        self.raw_text = dict(raw_text or {})
        self.unsupported = dict(unsupported or {})
        self.lost_after = dict(lost_after or {})
        self.init_error = init_error
        self.ancestor_overrides = dict(ancestor_overrides or {})
        self.gpu_numa_ids = dict(gpu_numa_ids or {})
        self.nvlink_errors = dict(nvlink_errors or {})
        self.fabric = dict(fabric or {})

        self.memory_used = dict(memory_used or {})
        self.memory_reserved = dict(memory_reserved or {})
        self.memory_v2 = memory_v2
        self.utilization = dict(utilization or {})
        self.processes = {gpu: list(procs) for gpu, procs in (processes or {}).items()}
        self.performance_state = dict(performance_state or {})
        # gputopo watch: scripted rates (tests/fake_nvml_counters.py), counted from nvmlInit on ``clock``
        # (seconds of the wall clock by default; a test passes its own to step time).
        self.counters = dict((counters or {}).get("gpus", {}))
        self.clock = clock or time.time
        self.init_time_s: float | None = None
        # A saved scan carries the versions NVML gave ("12.4" is 12040); a reference machine does not.
        self.driver_version = topology.driver_version or driver_version
        self.cuda_driver_version = _cuda_version_number(topology.cuda_driver_version) or cuda_driver_version
        self.nvml_version = topology.nvml_version
        self.initialized = 0
        self.init_calls = 0
        self.shutdown_calls = 0
        self.calls: list[str] = []

        # One host's GPUs, numbered 0.. as NVML on that host would number them.
        chosen = [g for g in topology.gpus if host is None or g.host == host]
        if not chosen:
            raise ValueError(f"no GPUs on host {host!r}")
        self.original_index = {local: g.index for local, g in enumerate(chosen)}
        local_of = {g.index: local for local, g in enumerate(chosen)}
        self.topology = topology
        self._links = {}
        for link in topology.links:
            if link.a in local_of and link.b in local_of:
                a, b = local_of[link.a], local_of[link.b]
                self._links[(a, b)] = link
                self._links[(b, a)] = link
        self._gpus = [_FakeGpu(g, self._nvlinks_of(local, g, (inactive_links or {}).get(local, 0)))
                      for local, g in enumerate(chosen)]
        for local in self.fabric:
            gpu = self._gpus[local].gpu
            if hopper_or_newer(gpu.compute_capability) is False:
                raise ValueError(f"fabric for GPU {local} ({gpu.name}, compute capability {gpu.compute_capability}): "
                                 "NVML answers NotSupported to the fabric queries before Hopper")
        # The fake host's /sys (CPU sockets, NUMA distances), read by the probe through sysfs_root.
        in_memory = "/dev/shm" if os.path.isdir("/dev/shm") else None  # hundreds of tiny files: fast there
        self.sysfs_root = tempfile.mkdtemp(prefix="fake-sysfs-", dir=in_memory)
        weakref.finalize(self, shutil.rmtree, self.sysfs_root, True)
        write_fake_sysfs(chosen, topology.numa_distances, self.sysfs_root)

    # --- building ------------------------------------------------------------------------------

    def _nvlinks_of(self, local: int, gpu: Gpu, inactive: int) -> list[_FakeLink] | None:
        if gpu.nvlink_version is None:
            return None
        links: list[_FakeLink] = []
        gpu_bus_ids = {g.pci_bus_id for g in self.topology.gpus}
        on_switch = False
        for (a, b), link in self._links.items():
            if a != local or link.nvlink_count == 0:
                continue
            if link.nvswitch:
                on_switch = True
                continue
            peer_bus = self.topology.gpu(self.original_index[b]).pci_bus_id
            links.extend(_FakeLink(True, pynvml.NVML_NVLINK_DEVICE_TYPE_GPU, nvml_bus_id(peer_bus)) for _ in range(link.nvlink_count))
        total = gpu.nvlink_active_links or len(links)
        switch_bus_ids = _switch_bus_ids(gpu_bus_ids)  # links spread over them
        k = 0
        while len(links) < total:
            if on_switch:
                bus = switch_bus_ids[k % len(switch_bus_ids)]
                links.append(_FakeLink(True, pynvml.NVML_NVLINK_DEVICE_TYPE_SWITCH, nvml_bus_id(bus)))
            else:  # links to the CPU (POWER9's NVLink to the CPU)
                links.append(_FakeLink(True, pynvml.NVML_NVLINK_DEVICE_TYPE_IBMNPU, "00000000:00:00.0"))
            k += 1
        for link in links[len(links) - inactive:] if inactive else []:
            link.active = False
        return links

    # --- module-like behaviour -----------------------------------------------------------------

    def __getattribute__(self, name: str) -> Any:
        if name in object.__getattribute__(self, "_missing"):
            raise AttributeError(f"module 'pynvml' has no attribute {name!r}")
        return object.__getattribute__(self, name)

    def __getattr__(self, name: str) -> Any:
        # Exception classes and constants come from the real module (unless ``missing`` names them:
        # Python falls back here when __getattribute__ refuses).
        if name in object.__getattribute__(self, "_missing"):
            raise AttributeError(f"module 'pynvml' has no attribute {name!r}")
        if name.startswith(("NVML", "c_nvmlGpuFabricInfo", "nvmlGpuFabricInfo_v", "nvmlMemory_v")):
            return getattr(pynvml, name)
        raise AttributeError(f"module 'pynvml' has no attribute {name!r}")

    def _enter(self, fn_name: str, *handles: Any) -> list[_FakeGpu]:
        """Book-keeping common to every NVML call: init state, knobs, handle checks, GPU loss."""
        self.calls.append(fn_name)
        if not self.initialized:
            raise pynvml.NVMLError_Uninitialized()
        gpus = []
        for handle in handles:
            if not isinstance(handle, FakeHandle) or handle.owner_id != id(self) or not 0 <= handle.index < len(self._gpus):
                raise pynvml.NVMLError_InvalidArgument()
            gpus.append(self._gpus[handle.index])
        for handle, fake in zip(handles, gpus):
            fake.calls += 1
            limit = self.lost_after.get(handle.index)
            if limit is not None and fake.calls > limit:
                fake.lost = True
            if fake.lost:
                raise pynvml.NVMLError_GpuIsLost()
        error = self.unsupported.get(fn_name)
        for handle in handles:
            error = error or self.unsupported.get((fn_name, handle.index))
        if error is not None:
            raise error()
        return gpus

    def _raw(self, fn_name: str, index: int | None) -> bytes | None:
        """The ``raw_text`` bytes for this query on this GPU (or on every GPU), if any."""
        raw = self.raw_text.get((fn_name, index)) if index is not None else None
        return raw if raw is not None else self.raw_text.get(fn_name)

    def _text(self, fn_name: str, index: int | None, text: str | bytes | None) -> str | bytes:
        """A string answer as the binding gives it: the driver's bytes (``raw_text``, else the
        text's), decoded strictly by 13.x's ``convertStrBytes``, as they are by older bindings."""
        raw = self._raw(fn_name, index)
        if raw is None:
            text = self._known(text)
            raw = text if isinstance(text, bytes) else text.encode()
        return raw if self.strings == "bytes" else pynvml.convertStrBytes(lambda: raw)()

    def _pci_info(self, bus_id: str, raw_bus_id: bytes | None = None) -> Any:
        info = _LegacyPciInfo() if self.strings == "bytes" else pynvml.nvmlPciInfo_t()
        long_id = nvml_bus_id(bus_id) if bus_id.count(":") == 2 and len(bus_id.split(":")[0]) <= 4 else bus_id
        domain, bus, rest = long_id.split(":")
        device = rest.split(".")[0]
        # ctypes stores bytes as they are; the 13.x structure decodes them strictly when read
        info.busId = raw_bus_id if raw_bus_id is not None else long_id.encode()
        info.busIdLegacy = f"{int(domain, 16):04X}:{bus}:{rest}".encode()
        info.domain, info.bus, info.device = int(domain, 16), int(bus, 16), int(device, 16)
        return info

    # --- init / system -------------------------------------------------------------------------

    def nvmlInit(self) -> None:
        self.init_calls += 1
        self.calls.append("nvmlInit")
        if self.init_error is not None:
            raise self.init_error()
        if not self.initialized:
            self.init_time_s = self.clock()
        self.initialized += 1

    def nvmlShutdown(self) -> None:
        self.calls.append("nvmlShutdown")
        if not self.initialized:
            raise pynvml.NVMLError_Uninitialized()
        self.initialized -= 1
        self.shutdown_calls += 1

    def nvmlSystemGetDriverVersion(self) -> str | bytes:
        self._enter("nvmlSystemGetDriverVersion")
        return self._text("nvmlSystemGetDriverVersion", None, self.driver_version)

    def nvmlSystemGetNVMLVersion(self) -> str | bytes:
        self._enter("nvmlSystemGetNVMLVersion")
        return self._text("nvmlSystemGetNVMLVersion", None,
                          self.nvml_version or f"{self.cuda_driver_version // 1000}.{self.driver_version}")

    def nvmlSystemGetCudaDriverVersion(self) -> int:
        self._enter("nvmlSystemGetCudaDriverVersion")
        return self.cuda_driver_version

    def nvmlDeviceGetCount(self) -> int:
        self._enter("nvmlDeviceGetCount")
        return len(self._gpus)

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeHandle:
        self._enter("nvmlDeviceGetHandleByIndex")
        if not isinstance(index, int) or not 0 <= index < len(self._gpus):
            raise pynvml.NVMLError_InvalidArgument()
        error = self.unsupported.get(("nvmlDeviceGetHandleByIndex", index))
        if error is not None:
            raise error()
        return FakeHandle(id(self), index)

    # --- per GPU -------------------------------------------------------------------------------

    def _gpu(self, fn_name: str, handle: Any) -> Gpu:
        return self._enter(fn_name, handle)[0].gpu

    @staticmethod
    def _known(value: Any) -> Any:
        if value is None:
            raise pynvml.NVMLError_NotSupported()
        return value

    def nvmlDeviceGetName(self, handle: Any) -> str | bytes:
        return self._text("nvmlDeviceGetName", handle.index, self._gpu("nvmlDeviceGetName", handle).name)

    def nvmlDeviceGetUUID(self, handle: Any) -> str | bytes:
        return self._text("nvmlDeviceGetUUID", handle.index, self._gpu("nvmlDeviceGetUUID", handle).uuid)

    def nvmlDeviceGetMinorNumber(self, handle: Any) -> int:
        """The topology's ``minor_number``; NotSupported where it has none (as on Windows)."""
        return int(self._known(self._gpu("nvmlDeviceGetMinorNumber", handle).minor_number))

    def nvmlDeviceGetPciInfo(self, handle: Any) -> Any:
        bus_id = self._known(self._gpu("nvmlDeviceGetPciInfo", handle).pci_bus_id)
        return self._pci_info(bus_id, self._raw("nvmlDeviceGetPciInfo", handle.index))

    def nvmlDeviceGetMemoryInfo(self, handle: Any, version: Any = None) -> Any:
        """As the real binding: no version asks ``nvmlDeviceGetMemoryInfo``, whose ``used`` counts the
        driver's reserve as in use; a version asks ``..._v2`` (reserve apart), FunctionNotFound on a
        driver without it (``memory_v2=False``)."""
        total = self._known(self._gpu("nvmlDeviceGetMemoryInfo", handle).memory_total_bytes)
        used = self.memory_used.get(handle.index, 0)
        reserved = self.memory_reserved.get(handle.index, 0)
        if not version:
            memory = pynvml.c_nvmlMemory_t()
            memory.total, memory.free, memory.used = total, total - used - reserved, used + reserved
            return memory
        if not self.memory_v2:
            raise pynvml.NVMLError_FunctionNotFound()
        memory = pynvml.c_nvmlMemory_v2_t()
        memory.version = version
        memory.total, memory.reserved, memory.free, memory.used = total, reserved, total - used - reserved, used
        return memory

    def nvmlDeviceGetUtilizationRates(self, handle: Any) -> Any:
        self._enter("nvmlDeviceGetUtilizationRates", handle)
        if handle.index not in self.utilization:
            raise pynvml.NVMLError_NotSupported()
        rates = pynvml.c_nvmlUtilization_t()
        rates.gpu = self.utilization[handle.index]
        rates.memory = 0
        return rates

    def nvmlDeviceGetPerformanceState(self, handle: Any) -> int:
        """As the real binding: the ``nvmlPstates_t`` number (``c_pstate.value``)."""
        self._enter("nvmlDeviceGetPerformanceState", handle)
        if handle.index not in self.performance_state:
            raise pynvml.NVMLError_NotSupported()
        return self.performance_state[handle.index]

    def nvmlDeviceGetComputeRunningProcesses(self, handle: Any) -> list[Any]:
        self._enter("nvmlDeviceGetComputeRunningProcesses", handle)
        if handle.index not in self.processes:
            raise pynvml.NVMLError_NotSupported()
        procs = []
        for pid, _name, used in self.processes.get(handle.index, []):
            # The real binding turns each struct into a friendly object; WDDM's "not available" is None.
            obj = pynvml.nvmlStructToFriendlyObject(pynvml.c_nvmlProcessInfo_v2_t(pid=pid, usedGpuMemory=used or 0))
            obj.usedGpuMemory = used
            procs.append(obj)
        return procs

    def nvmlSystemGetProcessName(self, pid: int) -> str | bytes:
        self._enter("nvmlSystemGetProcessName")
        for procs in self.processes.values():
            for known, name, _used in procs:
                if known == pid and name is not None:
                    return self._text("nvmlSystemGetProcessName", None, name)
        raise pynvml.NVMLError_NotFound()

    def nvmlDeviceGetNumaNodeId(self, handle: Any) -> int:
        self._enter("nvmlDeviceGetNumaNodeId", handle)
        if handle.index not in self.gpu_numa_ids:
            raise pynvml.NVMLError_NotSupported()  # only where the GPU itself is a NUMA node
        return self.gpu_numa_ids[handle.index]

    @staticmethod
    def _mask(positions: Iterable[int], words: int) -> Any:
        if not isinstance(words, int) or words <= 0:
            raise pynvml.NVMLError_InvalidArgument()
        array = (ctypes.c_ulonglong * words)()
        for pos in positions:
            if pos < 64 * words:  # bits past the caller's buffer are dropped, as NVML does
                array[pos // 64] |= 1 << (pos % 64)
        return array

    def nvmlDeviceGetCpuAffinity(self, handle: Any, cpuSetSize: int) -> Any:
        from gputopo.notation import parse_cpu_list

        cpus = parse_cpu_list(self._known(self._gpu("nvmlDeviceGetCpuAffinity", handle).cpu_affinity))
        return self._mask(cpus or [], cpuSetSize)

    def nvmlDeviceGetMemoryAffinity(self, handle: Any, nodeSetSize: int, scope: int) -> Any:
        gpu = self._gpu("nvmlDeviceGetMemoryAffinity", handle)
        if scope not in (pynvml.NVML_AFFINITY_SCOPE_NODE, pynvml.NVML_AFFINITY_SCOPE_SOCKET):
            raise pynvml.NVMLError_InvalidArgument()
        return self._mask([self._known(gpu.numa_node)], nodeSetSize)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: Any) -> int:
        return self._known(self._gpu("nvmlDeviceGetCurrPcieLinkGeneration", handle).pcie_gen_current)

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: Any) -> int:
        return self._known(self._gpu("nvmlDeviceGetMaxPcieLinkGeneration", handle).pcie_gen_max)

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: Any) -> int:
        return self._known(self._gpu("nvmlDeviceGetCurrPcieLinkWidth", handle).pcie_width_current)

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: Any) -> int:
        return self._known(self._gpu("nvmlDeviceGetMaxPcieLinkWidth", handle).pcie_width_max)

    def nvmlDeviceGetMigMode(self, device: Any) -> list[int]:
        gpu = self._gpu("nvmlDeviceGetMigMode", device)
        if not any(family in (gpu.name or "") for family in _MIG_CAPABLE) or gpu.mig_mode is None:
            raise pynvml.NVMLError_NotSupported()
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if gpu.mig_mode else pynvml.NVML_DEVICE_MIG_DISABLE
        return [mode, mode]

    def nvmlDeviceGetCudaComputeCapability(self, handle: Any) -> tuple[int, int]:
        text = self._known(self._gpu("nvmlDeviceGetCudaComputeCapability", handle).compute_capability)
        major, minor = text.split(".")
        return (int(major), int(minor))

    # --- NVLink --------------------------------------------------------------------------------

    def _nvlink(self, fn_name: str, device: Any, link: int) -> _FakeLink:
        fake = self._enter(fn_name, device)[0]
        if fake.nvlinks is None:
            raise pynvml.NVMLError_NotSupported()
        if not isinstance(link, int) or not 0 <= link < len(fake.nvlinks):
            raise pynvml.NVMLError_InvalidArgument()
        return fake.nvlinks[link]

    def nvmlDeviceGetNvLinkState(self, device: Any, link: int) -> int:
        nvlink = self._nvlink("nvmlDeviceGetNvLinkState", device, link)
        return pynvml.NVML_FEATURE_ENABLED if nvlink.active else pynvml.NVML_FEATURE_DISABLED

    def nvmlDeviceGetNvLinkVersion(self, device: Any, link: int) -> int:
        self._nvlink("nvmlDeviceGetNvLinkVersion", device, link)
        return _NVLINK_VERSION_TO_ENUM[self._gpus[device.index].gpu.nvlink_version]

    def nvmlDeviceGetNvLinkRemotePciInfo(self, device: Any, link: int) -> Any:
        nvlink = self._nvlink("nvmlDeviceGetNvLinkRemotePciInfo", device, link)
        if not nvlink.active:
            raise pynvml.NVMLError_NotSupported()
        return self._pci_info(nvlink.remote_bus_id)

    def nvmlDeviceGetNvLinkRemoteDeviceType(self, handle: Any, link: int) -> int:
        nvlink = self._nvlink("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        return nvlink.remote_type if nvlink.active else pynvml.NVML_NVLINK_DEVICE_TYPE_UNKNOWN

    # --- pairs ---------------------------------------------------------------------------------

    def nvmlDeviceGetTopologyCommonAncestor(self, device1: Any, device2: Any) -> int:
        self._enter("nvmlDeviceGetTopologyCommonAncestor", device1, device2)
        if device1.index == device2.index:
            raise pynvml.NVMLError_InvalidArgument()
        key = (min(device1.index, device2.index), max(device1.index, device2.index))
        if key in self.ancestor_overrides:
            return self.ancestor_overrides[key]
        link = self._links[(device1.index, device2.index)]
        path = link.pcie_path or (link.type if nvlink_count_of(link.type) == 0 else None)
        if path not in _PATH_TO_LEVEL:
            raise pynvml.NVMLError_NotSupported()
        return _PATH_TO_LEVEL[path]

    def nvmlDeviceGetP2PStatus(self, device1: Any, device2: Any, p2pIndex: Any) -> int:
        # The real binding hands p2pIndex to ctypes unconverted: a tuple such as 13.x's
        # NVML_P2P_CAPS_INDEX_READ == (0,) fails right there, before NVML is reached.
        if not isinstance(p2pIndex, int) or isinstance(p2pIndex, bool):
            self.calls.append("nvmlDeviceGetP2PStatus")
            raise ctypes.ArgumentError("argument 3: TypeError: Don't know how to convert parameter 3")
        self._enter("nvmlDeviceGetP2PStatus", device1, device2)
        if device1.index == device2.index or p2pIndex not in _CAPS_FIELD:
            raise pynvml.NVMLError_InvalidArgument()
        word = getattr(self._links[(device1.index, device2.index)], _CAPS_FIELD[p2pIndex])
        if word is None:
            raise pynvml.NVMLError_NotSupported()
        return _P2P_WORD_TO_STATUS[word]

    # --- health (doctor) -----------------------------------------------------------------------

    def nvmlDeviceGetNvLinkErrorCounter(self, device: Any, link: int, counter: int) -> int:
        nvlink = self._nvlink("nvmlDeviceGetNvLinkErrorCounter", device, link)
        if not isinstance(counter, int) or not 0 <= counter < pynvml.NVML_NVLINK_ERROR_COUNT:
            raise pynvml.NVMLError_InvalidArgument()
        if not nvlink.active:
            raise pynvml.NVMLError_NotSupported()
        return self.nvlink_errors.get((device.index, link), {}).get(counter, 0)

    def _fill_fabric(self, fn_name: str, device: Any, info_ref: Any, versioned: bool) -> int:
        """As the real library: FunctionNotFound from a driver without the function, else ``fabric_answer``
        written into the caller's structure (version 2 or 3 for the V call, by its ``version``)."""
        driver = driver_major(self.driver_version)
        if self.initialized and driver is not None and driver < FABRIC_FROM_DRIVER[fn_name]:
            self.calls.append(fn_name)
            raise pynvml.NVMLError_FunctionNotFound()  # the binding finds no such symbol: NVML never asked
        fake = self._enter(fn_name, device)[0]
        answer = fabric_answer(fake.gpu, fake.on_switch, self.fabric.get(device.index))
        if answer is None:
            raise pynvml.NVMLError_NotSupported()
        info = getattr(info_ref, "_obj", None)  # what ctypes.byref wraps
        layouts = {pynvml.nvmlGpuFabricInfo_v2: pynvml.c_nvmlGpuFabricInfo_v2_t}
        if hasattr(pynvml, "nvmlGpuFabricInfo_v3"):
            layouts[pynvml.nvmlGpuFabricInfo_v3] = pynvml.c_nvmlGpuFabricInfo_v3_t
        if not isinstance(info, tuple(layouts.values()) if versioned else pynvml.c_nvmlGpuFabricInfo_t):
            raise pynvml.NVMLError_InvalidArgument()
        if versioned and info.version not in layouts:
            raise pynvml.NVMLError_ArgumentVersionMismatch()
        if versioned and not isinstance(info, layouts[info.version]):
            raise pynvml.NVMLError_InvalidArgument()  # a version the structure is too small for
        state, status, health = answer
        info.state, info.status = state, status
        if versioned:
            info.healthMask = health
        return pynvml.NVML_SUCCESS

    def nvmlDeviceGetGpuFabricInfo(self, device: Any, gpuFabricInfo: Any) -> int:
        return self._fill_fabric("nvmlDeviceGetGpuFabricInfo", device, gpuFabricInfo, versioned=False)

    def nvmlDeviceGetGpuFabricInfoV(self, device: Any, gpuFabricInfo: Any) -> int:
        return self._fill_fabric("nvmlDeviceGetGpuFabricInfoV", device, gpuFabricInfo, versioned=True)

    # --- live counters (watch) -----------------------------------------------------------------

    def nvmlDeviceGetFieldValues(self, handle: Any, fieldIds: list[Any]) -> Any:
        """As the real binding: an array of ``c_nvmlFieldValue_t`` (tests/fake_nvml_counters.py)."""
        fake = self._enter("nvmlDeviceGetFieldValues", handle)[0]
        now_s = self.clock()
        links = None if fake.nvlinks is None else [link.active for link in fake.nvlinks]
        return fake_nvml_counters.field_values(self.counters.get(str(handle.index)), list(fieldIds), links,
                                               now_s - (self.init_time_s or now_s), int(now_s * 1e6))

    def nvmlDeviceGetPcieThroughput(self, handle: Any, counter: int) -> int:
        """KiB/s over the driver's ~20 ms (tests/fake_nvml_counters.py ``pcie_throughput``)."""
        self._enter("nvmlDeviceGetPcieThroughput", handle)
        code, value = fake_nvml_counters.pcie_throughput(self.counters.get(str(handle.index)), int(counter))
        if code != fake_nvml_counters.SUCCESS:
            raise pynvml.NVMLError_NotSupported()
        return value
