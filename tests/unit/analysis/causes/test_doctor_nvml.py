"""Doctor's conclusions (gputopo/analysis/causes/doctor_nvml.py) from every shape of answer NVML gives to the
fabric queries (tests/fabric_cases.py), read through the fake pynvml: no finding where the GPU or
driver has no fabric to report (before Hopper, off any NVSwitch, a driver without the query) or where
Fabric Manager has registered it; an error where registration has not finished or failed, a warning
where the fabric reports degraded bandwidth. The ``nvswitch-fabric`` check says which: made (ok or a
problem) where NVML gave a state, not made where GPUs sit on NVSwitches but NVML gave none (an A100, a
driver before R525), not listed where there is no fabric."""

from __future__ import annotations

import pytest
from fabric_cases import CASES, FabricCase, fabric_conclusions
from fake_nvml import FakeNvml

from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.host.nvml_health import read_nvml_health


@pytest.mark.parametrize("case", CASES, ids=str)
def test_doctor_concludes_from_each_fabric_answer(case: FabricCase) -> None:
    health = read_nvml_health(nvml=FakeNvml(case.machine(), **case.knobs))
    findings, marked, check = fabric_conclusions(HealthEvidence(nvml=health))
    assert findings == case.findings and check == case.check
    assert marked == [gpu for severity, _, gpus in case.findings if severity == "error" for gpu in gpus]
