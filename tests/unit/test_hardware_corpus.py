"""What real NVIDIA hardware answered, kept under tests/fixtures/hardware/ by tests/hardware/
device_check.sh (tests/hardware/README.md says what an expert expected before each run and what
was seen): today's probe and doctor must make of NVML's recorded answers what they made on the
machine, and the fakes must answer as the real driver did."""

from __future__ import annotations

import json
import tarfile

import pytest
from conftest import REPO
from fake_nvml import FakeNvml
from nvml_recording import ASKED_SINCE, NotRecorded, Recorder, Replay, differences, live_state, predated

from gputopo.analysis.causes.doctor import doctor
from gputopo.model import Topology
from gputopo.sources.doctor_input import evidence_of_host
from gputopo.sources.host.nvml import probe
from gputopo.sources.host.nvml_health import read_nvml_health
from gputopo.sources.snapshot import parse_snapshot

HARDWARE = REPO / "tests/fixtures/hardware"
RUNS = sorted(p.parent.name for p in HARDWARE.glob("*/nvml-recording.json"))
# When and on which host name: not NVML's answers; and `findings`, the name the recordings' snapshots
# predate (the same list as their `diagnostics`, which is compared).
MACHINE_ONLY = ("captured_at", "host", "findings")


@pytest.fixture(params=RUNS)
def run(request):
    return HARDWARE / request.param


@pytest.fixture
def recording(run):
    return json.loads((run / "nvml-recording.json").read_text())


def _replay(recording: dict) -> Replay:
    return Replay(recording["calls"], predates=predated(recording))


@pytest.fixture
def gathered_root(run, tmp_path):
    """The machine's own sysfs/procfs files, as `gputopo gather` packed them in the same run."""
    with tarfile.open(run / "gather.tar.gz") as archive:
        archive.extractall(tmp_path, filter="data")
    return tmp_path


PROBE_ONLY = frozenset({"nvmlDeviceGetMinorNumber"})  # asked by the probe, not by doctor's health reader


def test_every_recorded_run_is_replayed():
    assert len(RUNS) >= 2, RUNS


def _without(data: dict, keys=MACHINE_ONLY) -> dict:
    return {k: v for k, v in data.items() if k not in keys}


def test_the_probe_makes_of_the_recorded_answers_what_it_made_on_the_machine(recording, gathered_root):
    replayed = _without(probe(nvml=_replay(recording), sysfs_root=gathered_root).to_dict())
    newer = [ASKED_SINCE[fn] for fn in predated(recording)]
    for gpu, recorded in zip(replayed["gpus"], recording["topology"]["gpus"]):
        assert all(gpu.pop(name) is None for name in newer)  # not recorded: unknown, never made up
        for name in set(gpu) - set(recorded):  # fields the model gained since (fabric ids): no reader, unknown
            assert gpu.pop(name) is None, name
    if "fabric" not in recording["topology"]:  # read from the gathered sysfs since the recording was made
        fabric = replayed.pop("fabric")
        placed = {node["bdf"]: node["gpu"] for node in fabric["nodes"] if node["kind"] == "gpu"}
        assert placed == {gpu["pci_bus_id"]: gpu["index"] for gpu in replayed["gpus"]}
    assert replayed == _without(recording["topology"])


def test_what_the_real_driver_said_of_this_h200(recording):
    """The facts the expert's expectations were about (tests/hardware/README.md)."""
    [gpu] = recording["topology"]["gpus"]
    assert gpu["name"] == "NVIDIA H200" and gpu["compute_capability"] == "9.0"
    assert (gpu["pcie_gen_current"], gpu["pcie_gen_max"], gpu["pcie_width_current"], gpu["pcie_width_max"]) == (5, 5, 16, 16)
    assert gpu["nvlink_active_links"] == 0 and gpu["nvlink_version"] is None  # NVLink: Not Supported in the VM
    assert gpu["memory_used_bytes"] == 0  # version 2: nvidia-smi's "Used"; version 1 said 615 MiB
    nvlink_answers = {c.get("error") for c in recording["calls"] if c["fn"] == "nvmlDeviceGetNvLinkState"}
    assert nvlink_answers == {3}  # NVML_ERROR_NOT_SUPPORTED


def test_doctors_nvml_reader_makes_the_same_health_of_the_recorded_answers(recording):
    health = repr(read_nvml_health(nvml=_replay(recording)))
    for fn in predated(recording) - PROBE_ONLY:  # a field the recorded health had not yet: unknown, taken off
        assert f", {ASKED_SINCE[fn]}=None)" in health
        health = health.replace(f", {ASKED_SINCE[fn]}=None)", ")")
    assert health == recording["nvml_health"]


def test_doctor_on_the_recorded_machine_finds_only_that_it_is_a_one_gpu_vm(recording, gathered_root):
    report = doctor(evidence_of_host(str(gathered_root), env={}, nvml=_replay(recording)))
    assert [(f.severity, f.code) for f in report.findings] == [("info", "virtual-machine")]
    assert "with one GPU" in report.findings[0].message
    checks = {c.name: c.status for c in report.checks}
    assert checks["nvml"] == "ok" and checks["p2p-status"] == "ok"


def test_the_python_fake_answers_the_probe_as_the_real_driver_did(recording, gathered_root):
    """FakeNvml built from what the machine's probe saw gives the probe the same topology back:
    NVLink queries answered Not Supported, the fabric state, the affinity masks."""
    seen = parse_snapshot(json.dumps(recording["topology"]), "recording")
    assert isinstance(seen, Topology)
    faked = probe(nvml=FakeNvml(seen, utilization={0: 0}, processes={0: []}), sysfs_root=gathered_root)
    live = ("memory_used_bytes", *ASKED_SINCE.values())  # the fake's default is 0, as the machine's was
    got, want = faked.to_dict(), recording["topology"]
    gained = {name for g, w in zip(got["gpus"], want["gpus"]) for name in set(g) - set(w) if g[name] is None}
    live += tuple(sorted(gained))  # fields the model gained since the recording (fabric ids): unknown in both
    assert [_without(g, live) for g in got["gpus"]] == [_without(g, live) for g in want["gpus"]]
    derived = ("fabric",) if "fabric" not in want else ()  # from the gathered sysfs, since the recording
    assert _without(got, MACHINE_ONLY + derived + ("gpus", "driver_version", "cuda_driver_version", "nvml_version")) == \
        _without(want, MACHINE_ONLY + ("gpus", "driver_version", "cuda_driver_version", "nvml_version"))


def test_the_python_fake_answers_every_recorded_call_as_the_real_driver_did(recording, gathered_root):
    """Call by call, the probe and doctor's NVML reader on FakeNvml built from what the probe saw (and
    the machine's live state): the same calls, the same answers, errors and filled structures, the
    fabric's too (SUCCESS with state NOT_SUPPORTED on this Hopper GPU off any NVSwitch)."""
    seen = parse_snapshot(json.dumps(recording["topology"]), "recording")
    assert isinstance(seen, Topology)
    recorder = Recorder(FakeNvml(seen, **live_state(recording)))
    probe(nvml=recorder, sysfs_root=gathered_root)
    read_nvml_health(nvml=recorder)
    assert differences(recorder.calls, recording["calls"]) == []


def test_a_query_the_real_driver_was_never_asked_fails_instead_of_being_made_up(recording):
    with pytest.raises(NotRecorded):
        Replay(recording["calls"]).nvmlDeviceGetPowerUsage(None)
    with pytest.raises(NotRecorded):
        _replay(recording).nvmlDeviceGetPowerUsage(None)  # hiding the newer calls hides nothing else


def test_a_call_asked_since_the_recording_is_absent_not_answered(recording):
    """The query door finds no such function, as with an older binding: "not in this driver", never
    an answer the driver did not give; and a function the recording holds cannot be hidden."""
    from gputopo.sources.host.nvml_binding import FUNCTION_NOT_FOUND, Failed, NvmlBinding

    for fn in predated(recording):
        answer = NvmlBinding(_replay(recording)).query(fn, None)
        assert answer == Failed(FUNCTION_NOT_FOUND, "not in this driver")
    with pytest.raises(ValueError, match="replay its answers"):
        Replay(recording["calls"], predates=frozenset({"nvmlDeviceGetCount"}))
