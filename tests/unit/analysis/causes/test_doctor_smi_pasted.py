"""Pasted nvidia-smi text judged (gputopo/analysis/causes/doctor_smi_pasted.py): NVLink error counters and the
NVSwitch fabric, in the words of the live NVML checks."""

from __future__ import annotations

from conftest import OWN_FIXTURES
from doctor_trees import capture
from fabric_cases import CASES
from fake_nvml import FakeNvml

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.doctor_common import DoctorReport
from gputopo.analysis.causes.doctor_nvml import nvml_checks
from gputopo.analysis.causes.observed_findings import observed_findings
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.smi.nvlink import read
from gputopo.sources.host.nvml_health import read_nvml_health
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_nvlink_error_counters_are_a_warning_per_gpu_and_a_saturated_counter_is_said():
    report = _report(capture("nvlink_e_v100_replay_and_crc_errors.txt"))
    assert [(f.code, f.severity, f.gpus) for f in report.findings] == [("nvlink-errors", "warning", [0]),
                                                                       ("nvlink-errors", "warning", [2])]
    assert "link 3: replay 2353" in report.findings[0].message
    assert "crc 65535 (the largest 16-bit count" in report.findings[1].message
    zeros = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-x)\n         Link 0: Replay Errors: 0\n         Link 0: CRC Errors: 0\n"
    quiet = _report(zeros)
    assert quiet.findings == [] and any(c.name == "nvlink errors" and c.status == "ok" for c in quiet.checks)
    # a counter the live check does not judge either (symbol errors come before error correction)
    assert _report(zeros + "         Link 0: Symbol Errors: 12\n").findings == []


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


def test_nvlink_s_is_worded_once_whether_doctor_or_scan_reads_it():
    """`doctor --from` and `scan --from` of one `nvidia-smi nvlink -s` say the same thing: a module
    (SXM2, its board wires every link) is a warning; a card with links down is only info (it may
    have more link slots than its bridge uses)."""
    module = capture("nvlink_s_v100_two_inactive.txt")
    card = module.replace("Tesla V100-SXM2-32GB", "NVIDIA RTX A6000")
    for text, severity in ((module, "warning"), (card, "info")):
        (by_doctor,) = [f for f in _report(text).findings if f.code == "nvlink-inactive"]
        (by_scan,) = [f for f in observed_findings(read(text, "paste.txt")) if f.code == "nvlink-inactive"]
        assert by_doctor.severity == by_scan.severity == severity
        assert (by_doctor.message, by_doctor.fix) == (by_scan.message, by_scan.fix)
        assert by_doctor.evidence == ["paste.txt: GPU 3 Link 3: <inactive>", "paste.txt: GPU 3 Link 5: <inactive>"]


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


def test_nvlink_status_makes_its_check_and_an_elided_list_is_said_with_the_pastes_line():
    """A healthy `nvlink -s` makes the nvlink check (never 'no nvlink -s output in the pastes'); a list
    the paste elided (k8s-test-infra#371) is said, at the paste's own line, and no link is called down."""
    nvlink_dir = OWN_FIXTURES / "corpus" / "nvlink"
    healthy = _report((nvlink_dir / "power9_4x_v100_status_all_active.txt").read_text())
    assert [(c.name, c.status) for c in healthy.checks if c.name.startswith("nvlink")] == [("nvlink status", "ok")]
    cut = _report((nvlink_dir / "k8sti371_gb200_status_18_links_53gbps_gpu1_elided.txt").read_text())
    (note,) = cut.findings
    assert note.code == "nvlink-list-cut" and "GPU 1: 2 links listed, then line 24" in note.message
