"""`gputopo doctor` through NVIDIA's REAL binding (nvidia-ml-py) on the fake libnvidia-ml.so.1
(tests/fake_libnvml/fake_nvml.c, built as tests/system/test_fake_libnvml.py builds it): the fabric
structures passed by reference, the NVLink error counters and link states take the real ctypes path.
Every shape of fabric answer (tests/fabric_cases.py) is read and judged as through the Python fake,
and the C fake answers every call a real H200 was asked as that driver did."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pynvml
import pytest
from fabric_cases import CASES, RECORDED_H200, fabric_conclusions, recorded_h200
from fake_nvml import FakeNvml
from nvml_recording import differences, live_state

from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.host.nvml_health import read_nvml_health
from gputopo.sources.reference import load_reference
from system.test_fake_libnvml import (  # a sibling test module (tests/ is on sys.path)
    Case,
    _env,
    build_library,
)


@pytest.fixture(scope="module")
def libnvml(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_library(tmp_path_factory.mktemp("fake-nvml-doctor"))


def test_doctor_reads_fabric_nvlink_state_and_errors_through_the_real_binding(libnvml: Path, tmp_path: Path) -> None:
    data = load_reference("dgx-h100").to_dict()
    data["fake_nvml"] = {"inactive_links": {"0": 1}, "gpus": {
        "0": {"fabric": {"state": "IN_PROGRESS", "status": "NOT_READY", "clique_id": 7, "health_mask": 0},
              "nvlink_errors": {"1": {"1": 3, "3": 12}}},
        "1": {"fabric": {"state": "COMPLETED", "status": "SUCCESS", "clique_id": 7, "health_mask": 0}},
    }}
    snapshot = tmp_path / "box.json"
    snapshot.write_text(json.dumps(data))
    result = subprocess.run([sys.executable, "-m", "gputopo", "doctor", "--json"], env=_env(libnvml, snapshot),
                            capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    by_code = {f["code"]: f for f in report["findings"]}
    assert by_code["fabric-not-ready"]["gpus"] == [0] and by_code["fabric-not-ready"]["severity"] == "error"
    assert "in-progress" in by_code["fabric-not-ready"]["message"]
    assert by_code["nvlink-inactive"]["gpus"] == [0]
    assert by_code["nvlink-errors"]["gpus"] == [0]
    assert "recovery 3" in by_code["nvlink-errors"]["evidence"][0] and "crc_data 12" in by_code["nvlink-errors"]["evidence"][0]
    assert report["findings"][0]["code"] == "fabric-not-ready"  # worst first
    assert any(c["name"] == "nvml" and c["status"] == "ok" for c in report["checks"])


_FABRIC_WORKER = """
import json, os, sys
from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.analysis.causes.doctor import nvml_checks
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.host.nvml_health import read_nvml_health
out = []
for snapshot in json.load(sys.stdin):
    os.environ["GPUTOPO_FAKE_NVML_SNAPSHOT"] = snapshot
    health = read_nvml_health()
    report = DoctorReport("fake")
    nvml_checks(HealthEvidence(nvml=health), report)
    out.append({"health": repr(health),
                "findings": [[f.severity, f.code, f.gpus] for f in report.findings if f.code.startswith("fabric")],
                "check": next((c.status for c in report.checks if c.name == "nvswitch-fabric"), None)})
print(json.dumps(out))
"""


def test_every_fabric_answer_reads_and_judges_as_through_the_python_fake(libnvml: Path, tmp_path: Path) -> None:
    cases = [Case(tmp_path, case.name, case.machine(), **case.knobs) for case in CASES]
    result = subprocess.run([sys.executable, "-c", _FABRIC_WORKER], input=json.dumps([str(c.snapshot) for c in cases]),
                            env=_env(libnvml), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    for fabric_case, case, got in zip(CASES, cases, json.loads(result.stdout), strict=True):
        health = read_nvml_health(nvml=case.fake)
        assert got["health"] == repr(health), case.name  # the two fakes agree, every field of every GPU
        gpu = health.gpus[fabric_case.gpu]
        assert (gpu.fabric_state, gpu.fabric_status, gpu.fabric_degraded_bandwidth) == fabric_case.health, case.name
        findings, _, check = fabric_conclusions(HealthEvidence(nvml=health))
        assert [tuple(f) for f in got["findings"]] == findings == fabric_case.findings, case.name
        assert got["check"] == check == fabric_case.check, case.name


def test_a_fabric_state_for_a_gpu_before_hopper_is_refused_at_init(libnvml: Path, tmp_path: Path) -> None:
    """As FakeNvml refuses it (ValueError): no driver gives one, so a snapshot asking for it is a mistake."""
    data = load_reference("dgx-a100").to_dict()
    data["fake_nvml"] = {"gpus": {"0": {"fabric": {"state": "NOT_STARTED"}}}}
    snapshot = tmp_path / "a100.json"
    snapshot.write_text(json.dumps(data))
    result = subprocess.run([sys.executable, "-c", "import pynvml; pynvml.nvmlInit()"], env=_env(libnvml, snapshot),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode != 0 and "NVMLError_Unknown" in result.stderr
    assert "fake libnvidia-ml: a fabric is given for a GPU before Hopper" in result.stderr
    with pytest.raises(ValueError, match="before Hopper"):
        FakeNvml(load_reference("dgx-a100"), fabric={0: (1, 0, 0)})


_RECORD = """
import json, sys
import pynvml
sys.path.insert(0, "tests")
from nvml_recording import Recorder
from gputopo.sources.host.nvml import probe
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.host.nvml_health import read_nvml_health
recorder = Recorder(pynvml)
probe(nvml=recorder, sysfs_root=sys.argv[1])
read_nvml_health(nvml=recorder)
print(json.dumps(recorder.calls))
"""


def test_the_c_fake_answers_every_call_a_real_h200_was_asked_as_its_driver_did(libnvml: Path, tmp_path: Path) -> None:
    """tests/unit/test_hardware_corpus.py's check of the Python fake, through the real binding: the
    probe and doctor's NVML reader, recorded on the C fake built from what the probe read there (and
    the machine's live state), ask the same calls and get the same answers (the fabric's: SUCCESS,
    state NOT_SUPPORTED), leaving out what a snapshot does not carry (nvml_recording.NOT_IN_A_SNAPSHOT)."""
    recording = json.loads(RECORDED_H200.read_text())
    case = Case(tmp_path, "h200", recorded_h200(), **live_state(recording))
    with tarfile.open(RECORDED_H200.parent / "gather.tar.gz") as archive:
        archive.extractall(tmp_path / "gathered", filter="data")
    result = subprocess.run([sys.executable, "-c", _RECORD, str(tmp_path / "gathered")], env=_env(libnvml, case.snapshot),
                            capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr[-3000:]
    assert differences(json.loads(result.stdout), recording["calls"]) == []


_READ_WITH_THE_13_610_LAYOUT = """
import ctypes, json, pynvml
class FabricInfo(ctypes.Structure):  # c_nvmlGpuFabricInfo_t as nvidia-ml-py 13.610.43 declares it
    _fields_ = [("clusterUuid", ctypes.c_uint8 * 80), ("status", ctypes.c_int), ("cliqueId", ctypes.c_uint32),
                ("state", ctypes.c_uint)]
pynvml.c_nvmlGpuFabricInfo_t = FabricInfo
from gputopo.sources.host.nvml_health import read_nvml_health
print(json.dumps([[gpu.fabric_state, gpu.fabric_status] for gpu in read_nvml_health().gpus]))
"""


def test_the_plain_fabric_call_reads_the_state_whatever_layout_the_binding_declares(libnvml: Path, tmp_path: Path) -> None:
    """A driver before R550 answers only the plain call; nvidia-ml-py 13.610.43's structure for it has an
    80-byte cluster UUID, so read through it the state would always be 0, "not supported", and Fabric
    Manager not running would go unseen (gputopo/sources/host/nvml_binding.py, fabric_info_v1)."""
    case = Case(tmp_path, "r535", load_reference("dgx-h100"), driver_version="535.129.03",
                fabric={3: (pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED, 0, 0)})
    result = subprocess.run([sys.executable, "-c", _READ_WITH_THE_13_610_LAYOUT], env=_env(libnvml, case.snapshot),
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-3000:]
    states = json.loads(result.stdout)
    assert states[3] == ["not-started", 0] and states[0] == ["completed", 0]
