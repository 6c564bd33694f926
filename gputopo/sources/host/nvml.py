"""The NVML probe: this host's GPUs and how they are wired, read through nvidia-ml-py (``pynvml``).

``probe()`` asks the NVIDIA driver's management library for every GPU's identity, PCIe link,
NUMA/CPU affinity, NVLinks and MIG mode, and for every pair of GPUs the PCIe common ancestor and
the P2P capabilities. The result is a ``Topology`` with ``source="nvml"``.

Why it is written defensively: NVML coverage differs between GPU generations, drivers, containers
and permission levels. A query a GPU or driver does not answer must never abort the scan; the field
becomes ``None`` ("not known") and one reading note per kind of query records which GPUs were
affected and why (``nvml_notes``; analysis words it as one grouped finding). Only when NVML itself cannot start does the probe fail, with an
``NvmlUnavailable`` error that points at the sources which work without a driver.

NVML itself is reached only through ``gputopo.sources.host.nvml_binding`` (the query door, its error
classification and every binding-version trap). Handled here: on NVSwitch machines every NVLink
ends at a switch, so matching remote PCI bus ids finds no peer; such GPUs reach every other
switch-connected GPU with all their links (nvidia-smi's NV12/NV18).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from typing import Any

from gputopo.model import P2P_STATUS_WORDS, Gpu, GpuProcess, Link, Topology
from gputopo.notation import format_cpu_list, utc_now_text
from gputopo.sources.host.fabric_nvlink import (
    REMOTE_GPU,
    REMOTE_SWITCH,
    LinkEnd,
    add_nvlink_edges,
)
from gputopo.sources.host.fabric_sysfs import add_fabric
from gputopo.sources.host.nvml_binding import (
    BITS_PER_AFFINITY_WORD,
    INVALID_ARGUMENT,
    NOT_SUPPORTED,
    NVLINK_REMOTE_IBMNPU,
    NVLINK_REMOTE_SWITCH,
    NVLINK_VERSION_ENUM,
    NVML_AFFINITY_SCOPE_NODE,
    P2P_CAPS_INDEX_ATOMICS,
    P2P_CAPS_INDEX_NVLINK,
    P2P_CAPS_INDEX_READ,
    P2P_CAPS_INDEX_WRITE,
    TOPOLOGY_LEVEL_INTERNAL,
    TOPOLOGY_LEVEL_WORDS,
    Failed,
    GpuLost,
    NvmlBinding,
    bus_id_of,
    cuda_version_text,
    mask_bits,
    performance_state,
    text,
)
from gputopo.sources.host.nvml_notes import failure_notes
from gputopo.sources.host.sysfs import add_host_locality

P2P_CAPS_FIELDS = (
    ("p2p_read", P2P_CAPS_INDEX_READ),
    ("p2p_write", P2P_CAPS_INDEX_WRITE),
    ("p2p_nvlink", P2P_CAPS_INDEX_NVLINK),
    ("p2p_atomics", P2P_CAPS_INDEX_ATOMICS),
)
MIN_CPU_SET_WORDS = 16  # room for 1024 CPUs even where os.cpu_count() is smaller than the mask


@dataclass
class _NvlinkEnds:
    """What one GPU's active NVLinks connect to."""

    active: int = 0
    to_gpu_bus_ids: list[str] = field(default_factory=list)  # one entry per link
    to_switch: int = 0
    to_cpu: int = 0
    unresolved: int = 0
    far_ends: list[LinkEnd] = field(default_factory=list)  # per active link to a GPU or switch (fabric edges)


@dataclass
class _Probe:
    """State of one probe run: the NVML door, the failures seen so far, the lost GPUs."""

    nvml: NvmlBinding
    failures: dict[str, dict[Any, str]] = field(default_factory=dict)  # kind -> {gpu or pair: reason}
    lost: dict[int, str] = field(default_factory=dict)  # gpu -> bus id (or "?")

    def ask(self, gpus: tuple[int, ...], fn_name: str, *args: Any) -> Any:
        """``nvml.query(fn_name, *args)``: the answer or a ``Failed``.

        A lost GPU is marked lost (single-GPU queries; a pair query cannot say which of the two
        is gone) and ``GpuLost`` goes on up, so the caller skips the rest of that GPU's queries.
        """
        try:
            return self.nvml.query(fn_name, *args)
        except GpuLost:
            if len(gpus) == 1:
                self.lost.setdefault(gpus[0], "?")
            raise

    def record(self, kind: str, key: Any, reason: str) -> None:
        self.failures.setdefault(kind, {})[key] = reason

    def call(self, kind: str, gpus: tuple[int, ...], fn_name: str, *args: Any) -> Any:
        """``ask``, with a failure recorded under ``kind`` (for the grouped findings) and None returned."""
        answer = self.ask(gpus, fn_name, *args)
        if isinstance(answer, Failed):
            self.record(kind, gpus[0] if len(gpus) == 1 else gpus, answer.reason)
            return None
        return answer

    def forget(self, kind: str, gpu: int) -> None:
        """Drop a recorded failure that turned out to be expected (e.g. a fallback succeeded)."""
        self.failures.get(kind, {}).pop(gpu, None)


def probe(nvml: Any = None, sysfs_root: str | os.PathLike[str] | None = None) -> Topology:
    """Read this host's GPU topology through NVML.

    ``nvml`` is a pynvml-like module (tests pass ``tests.fake_nvml.FakeNvml``); by default the real
    ``pynvml`` from nvidia-ml-py is imported by ``nvml_binding``, lazily, so commands that never
    probe never load it. Raises ``NvmlUnavailable`` when NVML cannot start; every other failure
    degrades a field to ``None`` and is noted in ``Topology.reading_notes``.

    Sockets, NUMA distances and RDMA NICs come from sysfs under ``sysfs_root`` (default ``/``; a
    fake NVML may carry its fake host's tree as ``sysfs_root``): see ``gputopo.sources.host.sysfs``.
    """
    binding = NvmlBinding(nvml)
    binding.init()
    try:
        topology, ends = _probe_initialised(_Probe(binding))
    finally:
        binding.shutdown()
    host_root = sysfs_root or getattr(nvml, "sysfs_root", None) or "/"
    add_host_locality(topology, host_root)
    add_fabric(topology, host_root)
    add_nvlink_edges(topology, {index: found.far_ends for index, found in ends.items() if found is not None})
    return topology


def _probe_initialised(state: _Probe) -> tuple[Topology, dict[int, _NvlinkEnds | None]]:
    topo = Topology(source="nvml", host=socket.gethostname(), captured_at=utc_now_text())
    topo.source_detail = "NVML (nvidia-ml-py)"
    topo.driver_version = text(state.call("system", (), "nvmlSystemGetDriverVersion"))
    topo.nvml_version = text(state.call("system", (), "nvmlSystemGetNVMLVersion"))
    cuda = state.call("system", (), "nvmlSystemGetCudaDriverVersion")
    topo.cuda_driver_version = cuda_version_text(int(cuda)) if cuda is not None else None
    state.failures.pop("system", None)  # versions are informative only; missing ones need no finding

    count = state.nvml.gpu_count()

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
        except GpuLost:
            state.lost[index] = gpu.pci_bus_id or "?"
            handles.pop(index, None)

    _probe_links(state, topo, handles, ends)
    topo.reading_notes.extend(failure_notes(state.failures, state.lost))
    return topo, ends


def _probe_gpu(state: _Probe, gpu: Gpu, handle: Any) -> _NvlinkEnds | None:
    """Fill one GPU's fields; returns what its NVLinks connect to (None where unknown)."""
    i = (gpu.index,)
    call = state.call
    pci_info = call("pci", i, "nvmlDeviceGetPciInfo", handle)
    gpu.pci_bus_id = bus_id_of(pci_info)
    if pci_info is not None and gpu.pci_bus_id is None:
        state.record("pci", gpu.index, "unreadable answer")
    gpu.name = text(call("name", i, "nvmlDeviceGetName", handle))
    gpu.uuid = text(call("uuid", i, "nvmlDeviceGetUUID", handle))
    minor = state.ask(i, "nvmlDeviceGetMinorNumber", handle)  # /dev/nvidiaN (gres.conf File=); none on Windows
    gpu.minor_number = None if isinstance(minor, Failed) else _int_or_none(minor)
    memory = _memory(state, gpu.index, handle)
    gpu.memory_total_bytes = int(memory.total) if memory is not None else None
    gpu.memory_used_bytes = int(memory.used) if memory is not None else None
    _probe_live_state(state, gpu, handle)
    gpu.numa_node = _numa_node(state, gpu.index, handle)
    cpu_words = call("cpu-affinity", i, "nvmlDeviceGetCpuAffinity", handle, _cpu_set_words())
    if cpu_words is not None:
        cpus = mask_bits(cpu_words)
        gpu.cpu_affinity = format_cpu_list(cpus) if cpus else None
    gpu.pcie_gen_current = _int_or_none(call("pcie-gen", i, "nvmlDeviceGetCurrPcieLinkGeneration", handle))
    gpu.pcie_gen_max = _int_or_none(call("pcie-gen", i, "nvmlDeviceGetMaxPcieLinkGeneration", handle))
    gpu.pcie_width_current = _int_or_none(call("pcie-width", i, "nvmlDeviceGetCurrPcieLinkWidth", handle))
    gpu.pcie_width_max = _int_or_none(call("pcie-width", i, "nvmlDeviceGetMaxPcieLinkWidth", handle))
    gpu.performance_state = performance_state(state.ask(i, "nvmlDeviceGetPerformanceState", handle))
    gpu.mig_mode = _mig_mode(state, gpu.index, handle)
    capability = call("compute-capability", i, "nvmlDeviceGetCudaComputeCapability", handle)
    if capability is not None:
        major, minor = capability
        gpu.compute_capability = f"{int(major)}.{int(minor)}"
    return _probe_nvlinks(state, gpu, handle)


def _memory(state: _Probe, index: int, handle: Any) -> Any:
    """``nvmlDeviceGetMemoryInfo``, version 2 where the binding and driver have it.

    Version 1's ``used`` counts the memory the driver reserves for itself as in use: an idle H200
    answered 616 MiB used where ``nvidia-smi`` said 0 MiB used and 616 MiB reserved (a real device
    run, tests/hardware/README.md). Version 2 gives the reserve apart and ``used`` as nvidia-smi
    shows it. A binding without ``nvmlMemory_v2`` (nvidia-ml-py before 11.510) cannot ask for it,
    and a driver without ``nvmlDeviceGetMemoryInfo_v2`` (before R510) answers FunctionNotFound:
    then version 1, where ``used`` includes the reserve (docs/nvml.md)."""
    version = getattr(state.nvml.module, "nvmlMemory_v2", None)
    if version is not None:
        answer = state.ask((index,), "nvmlDeviceGetMemoryInfo", handle, version)
        if not isinstance(answer, Failed):
            return answer
    return state.call("memory", (index,), "nvmlDeviceGetMemoryInfo", handle)


def _probe_live_state(state: _Probe, gpu: Gpu, handle: Any) -> None:
    """Utilisation and compute processes (PID, name, memory) right now, as nvidia-smi shows them.

    A process's name is asked for once per PID; where NVML will not say (another user's process
    without permission, a process that has just exited) the name stays None, with no finding."""
    rates = _live(state, "utilization", gpu.index, "nvmlDeviceGetUtilizationRates", handle)
    gpu.utilization_percent = _int_or_none(getattr(rates, "gpu", None)) if rates is not None else None
    running = _live(state, "processes", gpu.index, "nvmlDeviceGetComputeRunningProcesses", handle)
    if running is None:
        return
    gpu.processes = []
    for proc in running:
        pid = _int_or_none(getattr(proc, "pid", None))
        if pid is None:
            continue
        name = state.ask((), "nvmlSystemGetProcessName", pid)
        used = getattr(proc, "usedGpuMemory", None)
        # A process name is whatever the process set (prctl, argv[0]): the door gives it as one
        # printable line (nvml_binding.text), kept to 256 characters.
        name = None if isinstance(name, Failed) else text(name)
        gpu.processes.append(GpuProcess(pid=pid, name=name[:256] if name else None,
                                        used_memory_bytes=_int_or_none(used)))


def _live(state: _Probe, kind: str, index: int, fn_name: str, handle: Any) -> Any:
    """A live-state query: its answer, or None. "Not supported" (vGPU, some boards, drivers) is an
    answer, not a gap: the field stays unknown without a finding; other failures (no permission)
    get one, as every other query."""
    answer = state.ask((index,), fn_name, handle)
    if isinstance(answer, Failed):
        if answer.error != NOT_SUPPORTED:
            state.record(kind, index, answer.reason)
        return None
    return answer


def _int_or_none(value: Any) -> int | None:
    return int(value) if value is not None else None


def _cpu_set_words() -> int:
    cpus = os.cpu_count() or 1
    return max(MIN_CPU_SET_WORDS, -(-cpus // BITS_PER_AFFINITY_WORD))


def _numa_node(state: _Probe, index: int, handle: Any) -> int | None:
    """The NUMA node nearest the GPU (nvidia-smi's "NUMA Affinity").

    ``nvmlDeviceGetMemoryAffinity`` (scope NODE) answers on ordinary x86/Arm hosts;
    ``nvmlDeviceGetNumaNodeId`` only applies where the GPU itself is a NUMA node, so it is the
    fallback, used where present.
    """
    nodes = state.call("numa", (index,), "nvmlDeviceGetMemoryAffinity", handle, 1, NVML_AFFINITY_SCOPE_NODE)
    if nodes is not None:
        bits = mask_bits(nodes)
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
    answer = state.ask((index,), "nvmlDeviceGetMigMode", handle)
    if isinstance(answer, Failed):
        if answer.error == NOT_SUPPORTED:
            return False
        state.record("mig", index, answer.reason)
        return None
    current, _pending = answer
    return int(current) == 1


def _probe_nvlinks(state: _Probe, gpu: Gpu, handle: Any) -> _NvlinkEnds | None:
    """Walk the GPU's NVLinks: active count, version, and where each active link ends."""
    ends = _NvlinkEnds()
    version: str | None = None
    i = (gpu.index,)
    for link in range(state.nvml.max_nvlinks()):
        is_active = state.ask(i, "nvmlDeviceGetNvLinkState", handle, link)
        if isinstance(is_active, Failed):
            # Past this GPU's last link; NotSupported on link 0 is a GPU without NVLink (zero links
            # is the answer, not a gap).
            if is_active.error in (INVALID_ARGUMENT, NOT_SUPPORTED):
                break
            state.record("nvlink", gpu.index, is_active.reason)
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
                    state.record("nvlink-version", gpu.index, f"unknown version enum {int(enum)}")
        remote_type = state.call("nvlink-remote", i, "nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
        if remote_type is not None and int(remote_type) == NVLINK_REMOTE_SWITCH:
            ends.to_switch += 1  # which switch: its bus id where NVML gives one (none: the fabric node)
            switch = state.ask(i, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            ends.far_ends.append(LinkEnd(REMOTE_SWITCH, None if isinstance(switch, Failed) else bus_id_of(switch)))
            continue
        if remote_type is not None and int(remote_type) == NVLINK_REMOTE_IBMNPU:
            ends.to_cpu += 1
            continue
        remote_bus = bus_id_of(state.call("nvlink-remote", i, "nvmlDeviceGetNvLinkRemotePciInfo", handle, link))
        if remote_bus is None:
            ends.unresolved += 1
        else:
            ends.to_gpu_bus_ids.append(remote_bus)
            ends.far_ends.append(LinkEnd(REMOTE_GPU, remote_bus))
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
        except GpuLost:
            # Pair queries cannot tell which of the two fell off; NVML says so on the next call.
            for gpu in (a, b):
                if _still_there(state, handles[gpu]) is False:
                    state.lost.setdefault(gpu, topo.gpu(gpu).pci_bus_id or "?")


def _still_there(state: _Probe, handle: Any) -> bool | None:
    try:
        answer = state.nvml.query("nvmlDeviceGetPciInfo", handle)
    except GpuLost:
        return False
    return None if isinstance(answer, Failed) else True


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
        state.record("topology", pair, f"unknown level {int(level)}")
    if level is not None and int(level) == TOPOLOGY_LEVEL_INTERNAL:
        state.record("_board", pair, "internal")
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
            state.record("p2p", pair, f"unknown status {int(status)}")
        setattr(link, attr, word)
