"""The NVSwitch fabric (gputopo/analysis/causes/fabric.py), in one wording whichever door read it.

From every shape of answer NVML gives to the fabric queries (tests/fabric_cases.py), read through the
fake pynvml: no finding where the GPU or driver has no fabric to report (before Hopper, off any
NVSwitch, a driver without the query) or where Fabric Manager has registered it; an error where
registration has not finished or failed, a warning where the fabric reports degraded bandwidth. The
``nvswitch-fabric`` check says which: made (ok or a problem) where NVML gave a state, not made where
GPUs sit on NVSwitches but NVML gave none (an A100, a driver before R525), not listed where there is no
fabric. From pastes: ``nvidia-smi -q``'s Fabric section, CUDA error 802, Fabric Manager's log."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES
from doctor_trees import capture
from fabric_cases import CASES, FabricCase, fabric_conclusions
from fake_nvml import FakeNvml

from gputopo.analysis.causes.doctor import doctor, nvml_checks
from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.host.nvml_health import read_nvml_health


@pytest.mark.parametrize("case", CASES, ids=str)
def test_doctor_concludes_from_each_fabric_answer(case: FabricCase) -> None:
    health = read_nvml_health(nvml=FakeNvml(case.machine(), **case.knobs))
    findings, marked, check = fabric_conclusions(HealthEvidence(nvml=health))
    assert findings == case.findings and check == case.check
    assert marked == [gpu for severity, _, gpus in case.findings if severity == "error" for gpu in gpus]


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_802_names_fabric_manager_and_says_when_nvswitches_are_unknown():
    (finding,) = _report("cudaGetDeviceProperties returned 802\n-> system not yet initialized").findings
    assert finding.code == "fabric-not-ready" and "does not show" in finding.message
    (finding,) = _report("GPU 0: NVIDIA H100 80GB HBM3\nError: system not yet initialized").findings
    assert "H100 80GB HBM3" in finding.message and finding.gpus == [0]


def test_fabric_manager_nothing_to_do_is_quiet():
    report = _report("nv-fabricmanager[1]: ... [NV_WARN_NOTHING_TO_DO]")
    assert [f.severity for f in report.findings] == ["info"]


def test_a_fabric_not_registered_is_an_error_and_an_unhealthy_one_a_warning():
    (in_progress,) = _report(capture("smi_q_fabric_in_progress.txt")).findings
    assert (in_progress.severity, in_progress.code) == ("error", "fabric-not-ready")
    assert "State In Progress" in in_progress.message and "paste does not say which" in in_progress.message
    (unhealthy,) = _report(capture("smi_q_grep_fabric_completed_unhealthy.txt")).findings
    assert (unhealthy.severity, unhealthy.code) == ("warning", "fabric-degraded") and "Unhealthy" in unhealthy.message


def test_a_whole_query_says_each_gpu_and_one_check():
    report = _report((OWN_FIXTURES / "corpus/smi_q/h100_sxm_8gpu_565_q.txt").read_text())
    assert report.findings == []
    (check,) = [c for c in report.checks if c.name == "nvswitch fabric"]
    assert check.status == "ok" and "8 registered" in check.detail
    (no_fabric,) = [c for c in _report((OWN_FIXTURES / "corpus/smi_q/a100_sxm4_4gpu_555_q.txt").read_text()).checks
                    if c.name == "nvswitch fabric"]
    assert "4 no fabric" in no_fabric.detail


def test_the_fabric_is_worded_once_whether_nvml_or_a_pasted_query_says_it():
    """Fabric Manager not done and a degraded fabric: the same finding (fix, effect, wording) from a
    live NVML answer and from a pasted `nvidia-smi -q`, each naming the state in its source's words."""
    def live(name):
        case = next(c for c in CASES if c.name == name)
        report = DoctorReport("test")
        nvml_checks(HealthEvidence(nvml=read_nvml_health(nvml=FakeNvml(case.machine(), **case.knobs))), report)
        (finding,) = [f for f in report.findings if f.code.startswith("fabric")]
        return finding

    pasted = {f.code: f for text in (capture("smi_q_fabric_in_progress.txt"),
                                     capture("smi_q_grep_fabric_completed_unhealthy.txt"))
              for f in _report(text).findings}
    for name, code in (("fabric-manager-not-started", "fabric-not-ready"), ("degraded-bandwidth", "fabric-degraded")):
        mine = live(name)
        assert mine.code == code and (mine.severity, mine.fix, mine.effect) == (pasted[code].severity, pasted[code].fix,
                                                                               pasted[code].effect)
    assert "is not registered with the NVSwitch fabric (state not-started, status 0)" in live("fabric-manager-not-started").message
    assert "is not registered with the NVSwitch fabric (State In Progress, Status N/A)" in pasted["fabric-not-ready"].message


def test_a_registration_that_completed_with_an_error_is_not_told_to_start_fabric_manager():
    """azhpc-images#506: State Completed, Status Insufficient Resources, CliqueId 0: registration ran and
    the fabric refused the GPU; the same words from NVML's answer (state completed, an error status)."""
    (refused,) = _report(capture("smi_q_fabric_completed_insufficient_resources_azhpc506.txt")).findings
    assert (refused.severity, refused.code) == ("error", "fabric-not-ready")
    assert ("finished registering with the NVSwitch fabric with an error (State Completed, Status Insufficient "
            "Resources): it is not part of an NVLink fabric") in refused.message
    assert "systemctl enable" not in refused.fix and "journalctl -u nvidia-fabricmanager" in refused.fix
    case = next(c for c in CASES if c.name == "registration-failed")
    report = DoctorReport("test")
    nvml_checks(HealthEvidence(nvml=read_nvml_health(nvml=FakeNvml(case.machine(), **case.knobs))), report)
    (live,) = [f for f in report.findings if f.code == "fabric-not-ready"]
    assert "finished registering with the NVSwitch fabric with an error (state completed" in live.message
    assert (live.fix, live.effect) == (refused.fix, refused.effect)


def test_fabric_manager_refusing_another_driver_is_the_fabric_not_ready():
    """siderolabs/pkgs#720 as posted (no journal prefix), and gpu-driver-container#735's wording wrapped
    by the poster, quoted in a ticket: one error naming both versions, and the fabric check a problem."""
    real = (OWN_FIXTURES / "corpus/doctor_pastes/siderolabs720_fm_interface_525_vs_driver_530_no_prefix.txt").read_text()
    wrapped = ("> fabric manager NVIDIA GPU driver interface version 590.48.01 don't match with driver version "
               "580.126.09.\n> Please update with matching NVIDIA driver package.\n")
    for text, manager, driver in ((real, "525.85.12", "530.41.03"), (wrapped, "590.48.01", "580.126.09")):
        report = _report(text)
        (finding,) = report.findings
        assert (finding.severity, finding.code) == ("error", "fabric-not-ready")
        assert f"built for driver {manager}" in finding.message and f"driver is {driver}" in finding.message
        assert f"exactly the driver's version ({driver})" in finding.fix
        assert [c.status for c in report.checks if c.name == "nvswitch-fabric"] == ["problem"]
