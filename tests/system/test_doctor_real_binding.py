"""`gputopo doctor` through NVIDIA's REAL binding (nvidia-ml-py) on the fake libnvidia-ml.so.1
(tests/fake_libnvml/fake_nvml.c, built as tests/system/test_fake_libnvml.py builds it): the fabric
structures passed by reference, the NVLink error counters and link states take the real ctypes path."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gputopo.sources.reference import load_reference

from system.test_fake_libnvml import _env, build_library  # a sibling test module (tests/ is on sys.path)


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
