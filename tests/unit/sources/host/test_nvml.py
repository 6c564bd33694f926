"""The NVML probe against the fake pynvml built from every reference machine, and its failure modes."""

from __future__ import annotations

import ctypes
import dataclasses
import socket
import subprocess
import sys

import pynvml
import pytest
from conftest import REPO
from fake_nvml import FakeNvml

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import EXIT_ENVIRONMENT, NvmlUnavailable
from gputopo.model import Gpu, Topology
from gputopo.sources.host.nvml import probe
from gputopo.sources.reference import MACHINES, load_reference

LIVE_FIELDS = ("memory_used_bytes", "utilization_percent", "processes")  # checked on their own below
GPU_FIELDS = [f.name for f in dataclasses.fields(Gpu) if f.name != "host" and f.name not in LIVE_FIELDS]
LINK_FIELDS = ["type", "nvlink_count", "nvswitch", "pcie_path", "p2p_read", "p2p_write", "p2p_atomics", "p2p_nvlink"]


def _host_of(topo: Topology) -> str | None:
    """NVML sees one host: for a multi-host rack (GB200 NVL72) probe the second tray."""
    hosts = sorted({g.host for g in topo.gpus if g.host})
    return hosts[1] if len(hosts) > 1 else None


def _findings(topo: Topology) -> list:
    """What the probe noted (``Topology.reading_notes``: facts), as analysis words it; the words
    themselves are tested in tests/unit/analysis/notes/test_reading_notes.py."""
    assert topo.diagnostics == []  # the probe makes no findings
    return note_findings(topo.reading_notes)


def _codes(topo: Topology) -> list[str]:
    return [f.code for f in _findings(topo)]


def _finding(topo: Topology, code: str):
    matches = [f for f in _findings(topo) if f.code == code]
    assert len(matches) == 1, (code, _codes(topo))
    return matches[0]


# --- every reference machine round-trips through the fake -----------------------------------------


@pytest.mark.parametrize("strings", ["str", "bytes"])
@pytest.mark.parametrize("machine", list(MACHINES))
def test_probe_reproduces_reference_machine(machine: str, strings: str) -> None:
    original = load_reference(machine)
    fake = FakeNvml(original, host=_host_of(original), strings=strings)
    probed = probe(fake)

    assert probed.source == "nvml"
    assert probed.host == socket.gethostname()
    assert probed.diagnostics == [] and probed.reading_notes == []
    assert fake.shutdown_calls == 1 and fake.initialized == 0
    assert len(probed.gpus) == len(fake.original_index)
    for local, orig_index in fake.original_index.items():
        got, want = probed.gpu(local), original.gpu(orig_index)
        for name in GPU_FIELDS:
            expected = local if name == "index" else getattr(want, name)
            assert getattr(got, name) == expected, (machine, local, name)
        # Live state the fake is not given: memory in use 0, utilisation and processes "not supported".
        assert (got.memory_used_bytes, got.utilization_percent, got.processes) == (0, None, None)
    for link in probed.links:
        want = original.link(fake.original_index[link.a], fake.original_index[link.b])
        for name in LINK_FIELDS:
            assert getattr(link, name) == getattr(want, name), (machine, link.a, link.b, name)
    probed.validate()
    assert Topology.from_dict(probed.to_dict()) == probed


def test_versions_and_probe_pair_count() -> None:
    probed = probe(FakeNvml(load_reference("dgx1"), driver_version="535.129.03", cuda_driver_version=12020))
    assert (probed.driver_version, probed.cuda_driver_version, probed.nvml_version) == ("535.129.03", "12.2", "12.535.129.03")
    assert len(probed.links) == 28  # every pair of 8 GPUs


# --- the fake behaves like the real binding ------------------------------------------------------


def test_fake_mirrors_real_types_and_traps() -> None:
    fake = FakeNvml(load_reference("dgx1"))
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        fake.nvmlDeviceGetCount()
    fake.nvmlInit()
    h0, h1 = fake.nvmlDeviceGetHandleByIndex(0), fake.nvmlDeviceGetHandleByIndex(1)
    assert isinstance(fake.nvmlDeviceGetPciInfo(h0), pynvml.nvmlPciInfo_t)
    assert fake.nvmlDeviceGetPciInfo(h0).busId == "00000000:06:00.0"  # 13.x decodes to str
    assert isinstance(fake.nvmlDeviceGetMemoryInfo(h0), pynvml.c_nvmlMemory_t)
    assert list(fake.nvmlDeviceGetCpuAffinity(h0, 2)) == [(1 << 20) - 1 | ((1 << 60) - (1 << 40)), 0]
    # The 13.x trap: NVML_P2P_CAPS_INDEX_READ is (0,), which the ctypes call cannot convert.
    assert pynvml.NVML_P2P_CAPS_INDEX_READ == (0,)
    with pytest.raises(ctypes.ArgumentError):
        fake.nvmlDeviceGetP2PStatus(h0, h1, fake.NVML_P2P_CAPS_INDEX_READ)
    assert fake.nvmlDeviceGetP2PStatus(h0, h1, 0) == pynvml.NVML_P2P_STATUS_OK
    with pytest.raises(pynvml.NVMLError_InvalidArgument):
        fake.nvmlDeviceGetNvLinkState(h0, 6)  # V100 has links 0..5
    with pytest.raises(pynvml.NVMLError_NotSupported):
        fake.nvmlDeviceGetMigMode(h0)  # Volta has no MIG
    fake.nvmlShutdown()

    legacy = FakeNvml(load_reference("dgx1"), strings="bytes")
    legacy.nvmlInit()
    handle = legacy.nvmlDeviceGetHandleByIndex(0)
    assert legacy.nvmlDeviceGetPciInfo(handle).busId == b"00000000:06:00.0"
    assert legacy.nvmlDeviceGetName(handle) == b"Tesla V100-SXM2-16GB"


def test_probe_never_passes_the_tuple_caps_index() -> None:
    probed = probe(FakeNvml(load_reference("two-socket-4gpu")))
    assert all(link.p2p_read is not None for link in probed.links)
    assert probed.link(0, 2).p2p_read == "TNS" and probed.link(0, 1).p2p_atomics == "NS"


# --- failure modes degrade one field, grouped ----------------------------------------------------


def test_globally_unsupported_query_gives_one_grouped_finding() -> None:
    fake = FakeNvml(load_reference("dgx-h100"), unsupported={"nvmlDeviceGetCpuAffinity": pynvml.NVMLError_NotSupported})
    probed = probe(fake)
    assert all(g.cpu_affinity is None for g in probed.gpus)
    assert all(g.numa_node == g.index // 4 for g in probed.gpus)  # the rest is intact
    finding = _finding(probed, "nvml-cpu-affinity-unavailable")
    assert finding.severity == "info"
    assert finding.gpus == list(range(8))
    assert "CPU affinity" in finding.message and "not supported" in finding.message
    assert len(probed.reading_notes) == 1


def test_per_gpu_no_permission_is_a_warning_with_a_fix() -> None:
    fake = FakeNvml(load_reference("pcie-8gpu"), unsupported={("nvmlDeviceGetMaxPcieLinkWidth", 3): pynvml.NVMLError_NoPermission})
    probed = probe(fake)
    assert probed.gpu(3).pcie_width_max is None and probed.gpu(3).pcie_width_current == 16
    assert probed.gpu(2).pcie_width_max == 16
    finding = _finding(probed, "nvml-pcie-width-unavailable")
    assert (finding.severity, finding.gpus) == ("warning", [3])
    assert "GPU 3" in finding.message and "no permission" in finding.message
    assert "/dev/nvidia" in finding.fix


@pytest.mark.parametrize(
    "error", [pynvml.NVMLError_FunctionNotFound, pynvml.NVMLError_Unknown, pynvml.NVMLError_InvalidArgument]
)
def test_each_nvml_error_degrades_not_aborts(error: type[Exception]) -> None:
    probed = probe(FakeNvml(load_reference("dgx1"), unsupported={"nvmlDeviceGetCudaComputeCapability": error}))
    assert [g.compute_capability for g in probed.gpus] == [None] * 8
    assert probed.link(0, 3).type == "NV2"
    assert _finding(probed, "nvml-compute-capability-unavailable").gpus == list(range(8))


def test_numa_falls_back_to_numa_node_id_then_to_unknown() -> None:
    topo = load_reference("dgx-a100")
    no_affinity = {"nvmlDeviceGetMemoryAffinity": pynvml.NVMLError_NotSupported}
    probed = probe(FakeNvml(topo, unsupported=no_affinity, gpu_numa_ids={i: 10 + i for i in range(8)}))
    assert [g.numa_node for g in probed.gpus] == [10 + i for i in range(8)]
    assert "nvml-numa-unavailable" not in _codes(probed)

    # An older nvidia-ml-py without the binding at all, and no memory affinity: unknown + finding.
    probed = probe(FakeNvml(topo, unsupported=no_affinity, missing={"nvmlDeviceGetNumaNodeId"}))
    assert [g.numa_node for g in probed.gpus] == [None] * 8
    assert _finding(probed, "nvml-numa-unavailable").gpus == list(range(8))


def test_p2p_status_unsupported_lists_pairs() -> None:
    fake = FakeNvml(load_reference("two-socket-4gpu"), unsupported={("nvmlDeviceGetP2PStatus", 3): pynvml.NVMLError_Unknown})
    probed = probe(fake)
    assert probed.link(2, 3).p2p_read is None and probed.link(0, 1).p2p_read == "ok"
    finding = _finding(probed, "nvml-p2p-unavailable")
    assert "pairs 0-3, 1-3, 2-3" in finding.message
    assert finding.gpus == [0, 1, 2, 3] and finding.severity == "warning"


def test_gpu_lost_during_its_own_queries() -> None:
    fake = FakeNvml(load_reference("dgx-h100"), lost_after={2: 3})
    probed = probe(fake)
    lost = probed.gpu(2)
    assert lost.pci_bus_id == "0000:3a:00.0"  # answered before it fell off
    assert lost.cpu_affinity is None and lost.nvlink_active_links is None and lost.compute_capability is None
    finding = _finding(probed, "gpu-lost")
    assert finding.gpus == [2] and finding.severity == "warning"
    assert "GPU 2" in finding.message and "fell off the bus" in finding.message and "0000:3a:00.0" in finding.message
    assert "nvidia-smi -r -i 2" in finding.fix
    assert _codes(probed) == ["gpu-lost"]  # its skipped queries are not reported again
    for other in (0, 1, 3, 7):
        assert probed.link(2, other).type == "UNKNOWN"
    assert probed.link(0, 1).type == "NV18" and probed.gpu(7).compute_capability == "9.0"
    assert fake.shutdown_calls == 1


def test_gpu_lost_during_pair_queries() -> None:
    topo = load_reference("dgx-h100")
    clean = FakeNvml(topo)
    probe(clean)
    pair_calls = 5 * 7  # per peer: common ancestor + 4 P2P caps
    own_calls = clean._gpus[5].calls - pair_calls
    # GPU 5 answers all its own queries, then falls off the bus on its first pair query.
    fake = FakeNvml(topo, lost_after={5: own_calls})
    probed = probe(fake)
    assert probed.gpu(5).compute_capability == "9.0" and probed.gpu(5).nvlink_active_links == 18
    assert _finding(probed, "gpu-lost").gpus == [5]
    assert _codes(probed) == ["gpu-lost"]
    assert probed.link(0, 5).type == "UNKNOWN" and probed.link(5, 7).type == "UNKNOWN"
    assert probed.link(0, 4).type == "NV18" and probed.link(6, 7).p2p_read == "ok"


def test_handle_failure_keeps_the_gpu_with_unknown_fields() -> None:
    fake = FakeNvml(load_reference("pcie-8gpu"), unsupported={("nvmlDeviceGetHandleByIndex", 1): pynvml.NVMLError_NoPermission})
    probed = probe(fake)
    assert probed.gpu(1).pci_bus_id is None and probed.gpu(0).pci_bus_id == "0000:1a:00.0"
    assert probed.link(0, 1).type == "UNKNOWN" and probed.link(0, 2).type == "NODE"
    assert _finding(probed, "nvml-handle-unavailable").gpus == [1]


def test_internal_common_ancestor_is_a_multi_gpu_board() -> None:
    fake = FakeNvml(load_reference("two-socket-4gpu"), ancestor_overrides={(0, 1): pynvml.NVML_TOPOLOGY_INTERNAL})
    probed = probe(fake)
    assert probed.link(0, 1).type == "PIX" and probed.link(0, 1).pcie_path == "PIX"
    finding = _finding(probed, "multi-gpu-board")
    assert finding.gpus == [0, 1] and "0-1" in finding.message


def test_nvswitch_gpu_with_links_down_gets_fewer_links() -> None:
    probed = probe(FakeNvml(load_reference("dgx-h100"), inactive_links={5: 2}))
    assert probed.gpu(5).nvlink_active_links == 16 and probed.gpu(4).nvlink_active_links == 18
    assert probed.link(4, 5).type == "NV16" and probed.link(4, 5).nvswitch
    assert probed.link(4, 6).type == "NV18"


def test_without_remote_device_type_switch_links_are_reported_unresolved() -> None:
    fake = FakeNvml(load_reference("dgx-a100"), unsupported={"nvmlDeviceGetNvLinkRemoteDeviceType": pynvml.NVMLError_FunctionNotFound})
    probed = probe(fake)
    assert probed.link(0, 1).type == "PXB" and not probed.link(0, 1).nvswitch
    assert probed.gpu(0).nvlink_active_links == 12
    assert _finding(probed, "nvml-nvlink-remote-unavailable").gpus == list(range(8))
    # Direct (non-switch) NVLinks still resolve by remote PCI bus id on a DGX-1.
    dgx1 = probe(FakeNvml(load_reference("dgx1"), unsupported={"nvmlDeviceGetNvLinkRemoteDeviceType": pynvml.NVMLError_FunctionNotFound}))
    assert dgx1.link(0, 3).type == "NV2" and dgx1.link(0, 4).type == "NV2"


# --- NVLink edges of the fabric graph -------------------------------------------------------------


def _agrees_with_pair_table(probed: Topology) -> None:
    """Every pair's NVLink count and NVSwitch flag, derived from the fabric's edges, is the pair table's."""
    for link in probed.links:
        assert (probed.fabric.gpu_nvlinks(link.a, link.b) or (0, False)) == (link.nvlink_count, bool(link.nvswitch)), link


@pytest.mark.parametrize("machine", [name for name in MACHINES if load_reference(name).gpus[0].nvlink_version])
def test_nvlink_edges_give_the_pair_tables_counts_on_every_nvlink_machine(machine: str) -> None:
    original = load_reference(machine)
    probed = probe(FakeNvml(original, host=_host_of(original)))
    _agrees_with_pair_table(probed)
    assert Topology.from_dict(probed.to_dict()).fabric == probed.fabric


def test_a_gpu_reaches_each_nvswitch_by_its_bus_id_and_a_peer_gpu_directly() -> None:
    a100 = probe(FakeNvml(load_reference("dgx-a100"))).fabric
    switches = [node for node in a100.nodes if node.kind == "nvswitch"]
    assert len(switches) == 6 and all(node.id == f"pci:{node.bdf}" for node in switches)
    gpu0 = a100.gpu_node(0).id
    assert a100.nvswitches_of(gpu0) == sorted(node.id for node in switches)
    assert {(e.count, e.active) for e in a100.edges if e.a == gpu0} == {(2, 2)}  # 12 links, 2 per switch
    assert len(a100.edges) == 8 * 6 and a100.nvlink_word(0, 7) == "NV12"
    dgx1 = probe(FakeNvml(load_reference("dgx1"))).fabric
    assert not [node for node in dgx1.nodes if node.kind == "nvswitch"]
    assert dgx1.nvlink_count(dgx1.gpu_node(0).id, dgx1.gpu_node(3).id) == 2 and dgx1.gpu_nvlinks(0, 5) == (0, False)


def test_switch_links_without_a_remote_bus_id_end_at_the_one_nvswitch_fabric_node() -> None:
    fake = FakeNvml(load_reference("dgx-h100"), inactive_links={5: 2},
                    unsupported={"nvmlDeviceGetNvLinkRemotePciInfo": pynvml.NVMLError_NotSupported})
    probed = probe(fake)
    fabric = probed.fabric
    assert [node.id for node in fabric.nodes if node.kind == "nvswitch"] == ["nvswitch:fabric"]
    assert len(fabric.edges) == 8 and fabric.nvswitch_links(fabric.gpu_node(5).id) == 16
    assert probed.reading_notes == []  # which switch is not asked of every driver: no gap said
    _agrees_with_pair_table(probed)


def test_without_nvlink_there_is_no_fabric_from_nvml() -> None:
    assert probe(FakeNvml(load_reference("pcie-8gpu"))).fabric is None


def test_nvlink_state_error_leaves_links_unknown_but_peers_still_see_it() -> None:
    probed = probe(FakeNvml(load_reference("dgx1"), unsupported={("nvmlDeviceGetNvLinkState", 0): pynvml.NVMLError_Unknown}))
    assert probed.gpu(0).nvlink_active_links is None
    assert probed.link(0, 3).type == "NV2"  # GPU 3's links end at GPU 0's bus id
    assert _finding(probed, "nvml-nvlink-unavailable").severity == "warning"


# --- NVML cannot start ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (pynvml.NVMLError_LibraryNotFound, "libnvidia-ml.so"),
        (pynvml.NVMLError_DriverNotLoaded, "kernel driver is not loaded"),
        (pynvml.NVMLError_NoPermission, "no permission"),
    ],
)
def test_init_failure_raises_one_line_pointing_at_other_sources(error: type[Exception], words: str) -> None:
    fake = FakeNvml(load_reference("dgx1"), init_error=error)
    with pytest.raises(NvmlUnavailable) as info:
        probe(fake)
    message = str(info.value)
    assert "\n" not in message and words in message
    assert "--machine NAME" in message and "gputopo machines" in message and "--from FILE" in message
    assert fake.shutdown_calls == 0  # nothing to shut down: init never succeeded


def test_failure_after_init_still_shuts_down() -> None:
    fake = FakeNvml(load_reference("dgx1"), unsupported={"nvmlDeviceGetCount": pynvml.NVMLError_Unknown})
    with pytest.raises(NvmlUnavailable, match="could not count the GPUs"):
        probe(fake)
    assert fake.shutdown_calls == 1 and fake.initialized == 0


def test_missing_pynvml_is_nvml_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    with pytest.raises(NvmlUnavailable, match=r"nvidia-ml-py\) is not installed.*--machine NAME"):
        probe()


def test_real_cli_scan_without_driver_is_one_line_with_the_environment_exit_code() -> None:
    """Without an NVIDIA driver the real pynvml fails in nvmlInit (skipped on a GPU host)."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("this machine has a working NVIDIA driver")
    result = subprocess.run(
        [sys.executable, "-m", "gputopo", "scan"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == EXIT_ENVIRONMENT, result.stderr  # no NVML: the machine, not the command line
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gputopo: error: ")
    assert "--machine" in lines[0] and "Traceback" not in result.stderr
    assert result.stdout == ""


class _GarbageNvml(FakeNvml):
    """A driver answering nonsense: unparseable bus id, unknown enums and status codes."""

    def nvmlDeviceGetPciInfo(self, handle):
        info = super().nvmlDeviceGetPciInfo(handle)
        if handle.index == 1:
            info.busId = b"not-a-bus-id"
            info.busIdLegacy = b""
        return info

    def nvmlDeviceGetNvLinkVersion(self, device, link):
        super().nvmlDeviceGetNvLinkVersion(device, link)
        return 0  # NVML_NVLINK_VERSION_INVALID

    def nvmlDeviceGetTopologyCommonAncestor(self, device1, device2):
        super().nvmlDeviceGetTopologyCommonAncestor(device1, device2)
        return 35 if (device1.index, device2.index) == (0, 2) else pynvml.NVML_TOPOLOGY_SYSTEM

    def nvmlDeviceGetP2PStatus(self, device1, device2, p2pIndex):
        super().nvmlDeviceGetP2PStatus(device1, device2, p2pIndex)
        return 42


def test_garbage_answers_become_unknown_with_findings() -> None:
    probed = probe(_GarbageNvml(load_reference("dgx1")))
    assert probed.gpu(1).pci_bus_id is None and probed.gpu(0).pci_bus_id == "0000:06:00.0"
    assert _finding(probed, "nvml-pci-unavailable").gpus == [1]
    assert all(g.nvlink_version is None for g in probed.gpus)
    assert "unknown version enum 0" in _finding(probed, "nvml-nvlink-version-unavailable").message
    assert probed.link(0, 2).pcie_path is None and "unknown level 35" in _finding(probed, "nvml-topology-unavailable").message
    assert all(link.p2p_read is None for link in probed.links)
    assert "unknown status 42" in _finding(probed, "nvml-p2p-unavailable").message
    probed.validate()


def test_the_minor_number_is_read_and_its_failure_is_no_finding():
    """gres.conf's File=/dev/nvidiaN needs the minor number, which need not be the index."""
    machine = load_reference("pcie-8gpu")
    for gpu in machine.gpus:
        gpu.minor_number = 7 - gpu.index
    got = probe(nvml=FakeNvml(machine))
    assert [gpu.minor_number for gpu in got.gpus] == [7, 6, 5, 4, 3, 2, 1, 0]
    bare = probe(nvml=FakeNvml(load_reference("pcie-8gpu")))  # NotSupported (Windows): unknown, nothing said
    assert {gpu.minor_number for gpu in bare.gpus} == {None}
    assert not [code for code in _codes(bare) if "minor" in code]
