"""Live GPU state through NVML (issue 24): memory used, utilisation, compute processes with PID and
name; shown by `scan`, kept in snapshots; `recommend` skips busy GPUs and says so; `train` refuses
a busy GPU unless --allow-busy."""

from __future__ import annotations

import json

import pytest
from conftest import assert_one_error_line
from fake_nvml import FakeNvml

from gputopo.sources.host.nvml import probe
from gputopo.sources.reference import load_reference

GIB = 1024**3


def _busy_h100(**extra):
    utilization = {gpu: 0 for gpu in range(8)} | {3: 97, 6: 55}
    processes = {gpu: [] for gpu in range(8)} | {3: [(4242, "python3", 70 * GIB), (4243, None, None)]}
    return probe(FakeNvml(load_reference("dgx-h100"), memory_used={3: 70 * GIB, 5: 2 * GIB},
                          utilization=utilization, processes=processes, **extra))


def test_the_probe_reads_memory_used_utilisation_and_processes():
    topology = _busy_h100()
    gpu3 = topology.gpu(3)
    assert gpu3.memory_used_bytes == 70 * GIB and gpu3.utilization_percent == 97
    assert [(p.pid, p.name, p.used_memory_bytes) for p in gpu3.processes] == [(4242, "python3", 70 * GIB), (4243, None, None)]
    assert topology.gpu(0).processes == [] and topology.gpu(0).utilization_percent == 0
    assert topology.reading_notes == [] and topology.diagnostics == []  # a process name NVML will not give is no finding


def test_a_process_name_of_nothing_but_control_characters_is_no_name():
    """Any user names a process (prctl); one of only NULs and escapes is no name, not a crash."""
    topology = probe(FakeNvml(load_reference("dgx-h100"), processes={3: [(4242, b"\x1b\x00", 1), (4243, "a" * 300, 1)]}))
    assert [(p.pid, p.name) for p in topology.gpu(3).processes] == [(4242, None), (4243, "a" * 256)]


MIB = 1024**2


def test_memory_used_leaves_out_the_drivers_reserve_as_nvidia_smi_does():
    """A real idle H200 (tests/hardware/README.md): version 1 of the memory query said 616 MiB used,
    nvidia-smi 0 MiB used and 616 MiB reserved. The probe asks version 2 where it can."""
    topology = probe(FakeNvml(load_reference("dgx-h100"), memory_reserved={g: 616 * MIB for g in range(8)},
                              memory_used={2: 5 * GIB}))
    assert topology.gpu(0).memory_used_bytes == 0
    assert topology.gpu(2).memory_used_bytes == 5 * GIB
    assert topology.reading_notes == []


def test_a_driver_without_memory_v2_gives_version_1_with_no_note():
    topology = probe(FakeNvml(load_reference("dgx-h100"), memory_reserved={0: 616 * MIB}, memory_v2=False))
    assert topology.gpu(0).memory_used_bytes == 616 * MIB  # version 1: the reserve counts as used
    assert topology.gpu(0).memory_total_bytes == load_reference("dgx-h100").gpu(0).memory_total_bytes
    assert topology.reading_notes == []


def test_a_binding_without_memory_v2_asks_version_1():
    """nvidia-ml-py before 11.510 has no ``nvmlMemory_v2`` and a one-argument query."""
    fake = FakeNvml(load_reference("dgx-h100"), memory_reserved={0: 616 * MIB}, missing=("nvmlMemory_v2",))
    topology = probe(fake)
    assert topology.gpu(0).memory_used_bytes == 616 * MIB and topology.reading_notes == []


def test_live_state_not_supported_is_unknown_and_other_failures_get_a_finding():
    import pynvml

    quiet = probe(FakeNvml(load_reference("dgx-h100")))  # the fake's default: "not supported"
    assert all(g.utilization_percent is None and g.processes is None for g in quiet.gpus)
    assert quiet.reading_notes == [] and quiet.diagnostics == []
    denied = probe(FakeNvml(load_reference("dgx-h100"), processes={0: []},
                            unsupported={"nvmlDeviceGetComputeRunningProcesses": pynvml.NVMLError_NoPermission}))
    assert all(g.processes is None for g in denied.gpus)
    assert {"query": "processes", "failed": [{"gpu": g, "reason": "no permission"} for g in range(8)]} in [
        n.facts for n in denied.reading_notes if n.code == "nvml-query-failed"]  # nvml-processes-unavailable


CAPTURED = "2025-06-01T10:00:00Z"


@pytest.fixture
def busy_snapshot(tmp_path):
    path = tmp_path / "busy.json"
    path.write_text(json.dumps(_busy_h100().to_dict() | {"captured_at": CAPTURED}))
    return str(path)


@pytest.fixture
def undated_snapshot(tmp_path):
    """A busy snapshot saved before gputopo recorded when (no ``captured_at`` key at all)."""
    data = _busy_h100().to_dict()
    del data["captured_at"]
    path = tmp_path / "undated.json"
    path.write_text(json.dumps(data))
    return str(path)


def test_the_probe_records_when_it_read_the_live_state_in_utc():
    from datetime import datetime, timedelta, timezone

    captured = _busy_h100().captured_at
    assert captured.endswith("Z") and len(captured) == len("2025-06-01T10:00:00Z")
    read = datetime.fromisoformat(captured.replace("Z", "+00:00"))
    assert abs(datetime.now(timezone.utc) - read) < timedelta(minutes=5)


def test_live_state_read_back_from_a_snapshot_says_when_it_was_read(cli, busy_snapshot, undated_snapshot):
    shown = " ".join(cli("scan", "--from", busy_snapshot).output.split())
    assert "memory in use, utilisation and processes as of 2025-06-01 10:00:00 UTC" in shown
    text = " ".join(cli("recommend", "--from", busy_snapshot, "-n", "4").output.split())
    assert "skipped busy GPU 6 (as of 2025-06-01 10:00:00 UTC): 55% utilisation" in text
    data = json.loads(cli("recommend", "--from", busy_snapshot, "-n", "4", "--json").output)
    assert data["busy_as_of"] == CAPTURED
    line = assert_one_error_line(cli("train", "--from", busy_snapshot, "--devices", "3", "--dry-run"))
    assert "as of 2025-06-01 10:00:00 UTC" in line
    # An older snapshot loads, and its live state is said to be of an unknown time, never of now.
    unknown = "as of an unknown time (the source does not record when it was read)"
    assert unknown in " ".join(cli("scan", "--from", undated_snapshot).output.split())
    assert f"skipped busy GPU 3 ({unknown})" in " ".join(cli("recommend", "--from", undated_snapshot, "-n", "4").output.split())
    assert json.loads(cli("recommend", "--from", undated_snapshot, "-n", "4", "--json").output)["busy_as_of"] is None
    env = cli("recommend", "--from", undated_snapshot, "-n", "4", "--format", "env")
    assert f"gputopo: note: skipped busy GPU 3 ({unknown})" in env.output


def test_scan_shows_memory_used_utilisation_and_the_processes(cli, busy_snapshot):
    result = cli("scan", "--from", busy_snapshot)
    assert result.exit_code == 0, result.output
    assert "70/80G" in result.output and "97%" in result.output
    assert "Processes on the GPUs" in result.output and "4242" in result.output and "python3" in result.output
    data = json.loads(cli("scan", "--from", busy_snapshot, "--json").output)
    assert data["gpus"][3]["processes"][0] == {"pid": 4242, "name": "python3", "used_memory_bytes": 70 * GIB}
    assert data["gpus"][3]["utilization_percent"] == 97


def test_recommend_skips_busy_gpus_and_says_which_and_why(cli, busy_snapshot):
    result = cli("recommend", "--from", busy_snapshot, "-n", "4", "--json")
    data = json.loads(result.output)
    best = data["groups"][0]["gpus"]
    assert not {3, 6} & set(best)  # a process on 3; 55% utilisation on 6 (over 10%)
    assert data["skipped_busy"] == [3, 6] and "python3 (PID 4242)" in data["busy"]["3"][0]
    text = " ".join(cli("recommend", "--from", busy_snapshot, "-n", "4").output.split())
    assert "skipped busy GPU 3 (as of 2025-06-01 10:00:00 UTC): 2 compute processes: python3 (PID 4242), ? (PID 4243)" in text
    env = cli("recommend", "--from", busy_snapshot, "-n", "4", "--format", "env")
    assert "gputopo: note: skipped busy GPU 3" in env.output  # on stderr (the runner mixes them)


def test_recommend_thresholds_and_free_only(cli, busy_snapshot):
    data = json.loads(cli("recommend", "--from", busy_snapshot, "-n", "2", "--json", "--max-util", "60").output)
    assert data["skipped_busy"] == [3]
    data = json.loads(cli("recommend", "--from", busy_snapshot, "-n", "8", "--json").output)
    assert data["skipped_busy"] == [] and any("busy but kept" in n for n in data["notes"])
    line = assert_one_error_line(cli("recommend", "--from", busy_snapshot, "-n", "8", "--free-only"))
    assert "--free-only" in line and "GPU 3" in line
    data = json.loads(cli("recommend", "--from", busy_snapshot, "-n", "4", "--json", "--include-busy").output)
    assert data["skipped_busy"] == [] and "3" in data["busy"]


def test_train_refuses_a_busy_gpu_unless_allowed(cli, busy_snapshot):
    line = assert_one_error_line(cli("train", "--from", busy_snapshot, "--devices", "3", "--dry-run"))
    assert "GPU 3 is in use" in line and "python3 (PID 4242)" in line and "--allow-busy" in line
    assert cli("train", "--from", busy_snapshot, "--devices", "3", "--dry-run", "--allow-busy").exit_code == 0
    picked = cli("train", "--from", busy_snapshot, "--gpus", "4", "--dry-run", "--json")
    assert picked.exit_code == 0, picked.output
    assert 3 not in json.loads(picked.output)["plan"]["gpus"]


def test_the_probe_reads_each_gpus_performance_state_and_anything_else_is_unknown_without_a_note():
    """nvmlDeviceGetPerformanceState, asked right after the link: 0 (P0) .. 15 kept; NVML's unknown
    state (32), NotSupported (a GPU not given), no permission, a binding without the function: None,
    and no reading note (the link findings word an unknown state as before)."""
    import pynvml

    machine = load_reference("pcie-8gpu")
    topology = probe(FakeNvml(machine, performance_state={0: 0, 1: 8, 2: 2, 3: 32, 4: 15},
                              unsupported={("nvmlDeviceGetPerformanceState", 5): pynvml.NVMLError_NoPermission}))
    assert [g.performance_state for g in topology.gpus] == [0, 8, 2, None, 15, None, None, None]
    assert topology.reading_notes == []
    old = probe(FakeNvml(machine, performance_state={0: 0}, missing=("nvmlDeviceGetPerformanceState",)))
    assert [g.performance_state for g in old.gpus] == [None] * 8 and old.reading_notes == []


def test_the_state_is_kept_in_a_snapshot_and_one_saved_before_it_existed_loads_unknown():
    from gputopo.model import Topology

    topology = probe(FakeNvml(load_reference("pcie-8gpu"), performance_state={2: 8}))
    data = json.loads(topology.to_json_text())
    assert data["gpus"][2]["performance_state"] == 8 and data["gpus"][0]["performance_state"] is None
    assert Topology.from_dict(data).gpu(2).performance_state == 8
    for gpu in data["gpus"]:
        del gpu["performance_state"]
    assert Topology.from_dict(data).gpu(2).performance_state is None
