"""Doctor's NVML reader (gputopo/sources/host/nvml_health.py) on every shape of answer NVML gives to the
fabric queries (tests/fabric_cases.py), through the fake pynvml: what it reads, and which calls it
asks in which order (the V call first; the plain one only where the V call gave nothing)."""

from __future__ import annotations

import pytest
from fabric_cases import CASES, PLAIN, FabricCase, V
from fake_nvml import FakeNvml

from gputopo.sources.host.nvml_health import read_nvml_health
from gputopo.sources.reference import load_reference


@pytest.mark.parametrize("case", CASES, ids=str)
def test_each_fabric_answer_is_read_as_the_driver_gave_it(case: FabricCase) -> None:
    topology = case.machine()
    fake = FakeNvml(topology, **case.knobs)
    gpu = read_nvml_health(nvml=fake).gpus[case.gpu]
    assert (gpu.fabric_state, gpu.fabric_status, gpu.fabric_degraded_bandwidth) == case.health
    assert [call for call in fake.calls if call in (V, PLAIN)] == list(case.asked) * len(topology.gpus)


def test_a_binding_without_the_versioned_structure_asks_the_plain_call_only() -> None:
    """nvidia-ml-py before the V call (no ``c_nvmlGpuFabricInfoV_t``): the plain call, no health mask."""
    fake = FakeNvml(load_reference("dgx-h100"), missing={"c_nvmlGpuFabricInfoV_t"}, fabric={0: (1, 0, 1)})
    gpus = read_nvml_health(nvml=fake).gpus
    assert [(g.fabric_state, g.fabric_degraded_bandwidth) for g in gpus[:2]] == [("not-started", None), ("completed", None)]
    assert {call for call in fake.calls if "Fabric" in call} == {PLAIN}


def test_a_gpu_lost_at_the_fabric_query_is_lost_not_unknown() -> None:
    h100 = load_reference("dgx-h100")
    clean = FakeNvml(h100)
    read_nvml_health(nvml=clean)
    before_fabric = clean._gpus[4].calls - 7 - 1  # GPU 4's own calls but its last (fabric); its 7 pair queries come after
    gpus = read_nvml_health(nvml=FakeNvml(h100, lost_after={4: before_fabric})).gpus
    assert [g.index for g in gpus if g.lost] == [4] and gpus[4].fabric_state is None and gpus[4].nvlinks
    assert gpus[3].fabric_state == "completed"


def test_the_fake_refuses_a_fabric_state_no_driver_gives() -> None:
    """NVML reports the fabric of Hopper and newer GPUs only: an A100 answers NotSupported, whatever
    its NVSwitches (tests/fake_nvml.py fabric_answer)."""
    with pytest.raises(ValueError, match="before Hopper"):
        FakeNvml(load_reference("dgx-a100"), fabric={0: (1, 0, 0)})
