"""Every shape of answer NVML gives to the fabric queries (``nvmlDeviceGetGpuFabricInfoV``, else
``nvmlDeviceGetGpuFabricInfo``), one case each, for both fakes of the library (tests/fake_nvml.py's
knobs; tests/system/test_fake_libnvml.py's ``Case`` turns them into the C fake's injection section):
what doctor's NVML reader must make of it (tests/unit/sources/host/test_nvml_health.py) and what doctor
concludes (``fabric_conclusions``: tests/unit/analysis/causes/test_fabric.py, and through NVIDIA's
real binding on the C fake, tests/system/test_doctor_real_binding.py). Which GPU and driver gives
which shape is cited in tests/fake_nvml.py (``fabric_answer``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any

import pynvml
from conftest import OWN_FIXTURES

from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.analysis.causes.doctor import nvml_checks
from gputopo.model import Topology
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.reference import load_reference
from gputopo.sources.snapshot import parse_snapshot

RECORDED_H200 = OWN_FIXTURES / "hardware" / "2026-11-26-h200-firecracker-run3" / "nvml-recording.json"
NOT_STARTED, IN_PROGRESS, COMPLETED = (pynvml.NVML_GPU_FABRIC_STATE_NOT_STARTED, pynvml.NVML_GPU_FABRIC_STATE_IN_PROGRESS,
                                       pynvml.NVML_GPU_FABRIC_STATE_COMPLETED)
DEGRADED, NOT_DEGRADED = (pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_TRUE,
                          pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE)
V, PLAIN = "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetGpuFabricInfo"


@cache
def recorded_h200() -> Topology:
    """What the probe read of a real H200 alone in a VM (no NVLink peer, no NVSwitch)."""
    topology = parse_snapshot(json.dumps(json.loads(RECORDED_H200.read_text())["topology"]), "recording")
    assert isinstance(topology, Topology)
    return topology


def fabric_conclusions(evidence: HealthEvidence) -> tuple[list[tuple[str, str, list[int]]], list[int], str | None]:
    """Doctor's fabric findings (severity, code, GPUs), the GPUs it marks as having NVLink down, and the
    status of its ``nvswitch-fabric`` check (None: no such check)."""
    report = DoctorReport("test")
    nvml_checks(evidence, report)
    index_of = evidence.bdf_to_index()
    marked = sorted(index_of[bdf] for bdf, words in report.gpu_problems.items() if "nvlink-down" in words)
    (check, *_) = [c.status for c in report.checks if c.name == "nvswitch-fabric"] or [None]
    return [(f.severity, f.code, f.gpus) for f in report.findings if f.code.startswith("fabric")], marked, check


@dataclass(frozen=True)
class FabricCase:
    name: str
    machine: Callable[[], Topology]
    knobs: dict[str, Any]  # FakeNvml's
    gpu: int  # the GPU the shape is about
    health: tuple[str | None, int | None, bool | None]  # its fabric_state, fabric_status, fabric_degraded_bandwidth
    asked: tuple[str, ...]  # the fabric calls doctor's reader asks of it, in order
    check: str | None  # the status of doctor's nvswitch-fabric check (None: not listed, no fabric)
    findings: list[tuple[str, str, list[int]]] = field(default_factory=list)  # doctor's fabric findings

    def __str__(self) -> str:
        return self.name


CASES = [
    # An A100 on NVSwitches answers NotSupported: its Fabric Manager cannot be seen through NVML.
    FabricCase("before-hopper-not-supported", lambda: load_reference("dgx-a100"), {}, 0,
               (None, None, None), (V, PLAIN), "not-made"),
    FabricCase("hopper-off-nvswitch-state-not-supported", recorded_h200, {}, 0,
               ("not-supported", 0, None), (V,), None),
    FabricCase("hopper-on-nvswitch-registered", lambda: load_reference("dgx-h100"), {}, 0,
               ("completed", 0, None), (V,), "ok"),
    FabricCase("fabric-manager-not-started", lambda: load_reference("dgx-h100"), {"fabric": {3: (NOT_STARTED, 0, 0)}}, 3,
               ("not-started", 0, None), (V,), "problem", [("error", "fabric-not-ready", [3])]),
    FabricCase("registration-in-progress", lambda: load_reference("hgx-b200"), {"fabric": {5: (IN_PROGRESS, 0, 0)}}, 5,
               ("in-progress", 0, None), (V,), "problem", [("error", "fabric-not-ready", [5])]),
    FabricCase("registration-failed", lambda: load_reference("dgx-h100"),
               {"fabric": {2: (COMPLETED, pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, NOT_DEGRADED)}}, 2,
               ("completed", pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES, False), (V,), "problem",
               [("error", "fabric-not-ready", [2])]),
    FabricCase("degraded-bandwidth", lambda: load_reference("dgx-h100"), {"fabric": {1: (COMPLETED, 0, DEGRADED)}}, 1,
               ("completed", 0, True), (V,), "problem", [("warning", "fabric-degraded", [1])]),
    FabricCase("bandwidth-not-degraded", lambda: load_reference("dgx-h100"), {"fabric": {1: (COMPLETED, 0, NOT_DEGRADED)}}, 1,
               ("completed", 0, False), (V,), "ok"),
    # R525-R549: no V call (FunctionNotFound), the plain one answers, without a health mask.
    FabricCase("driver-535-plain-call-only", lambda: load_reference("dgx-h100"),
               {"driver_version": "535.129.03", "fabric": {3: (NOT_STARTED, 0, 0)}}, 3,
               ("not-started", 0, None), (V, PLAIN), "problem", [("error", "fabric-not-ready", [3])]),
    # R520 (the first Hopper driver, CUDA 11.8): neither call exists; the fabric cannot be read.
    FabricCase("driver-520-no-fabric-query", lambda: load_reference("dgx-h100"), {"driver_version": "520.61.05"}, 0,
               (None, None, None), (V, PLAIN), "not-made"),
]
