"""NVLinks inactive or erring (gputopo/analysis/causes/nvlink.py), worded once whether doctor or scan
reads them: ``nvlink -s`` and ``-e`` pastes, NVML's "all links are inActive" line."""

from __future__ import annotations

from conftest import OWN_FIXTURES
from doctor_trees import capture

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.observed_findings import observed_findings
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.smi.nvlink import read


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def test_all_links_inactive_is_a_fault_only_on_a_module():
    text = "GPU 2: NVIDIA B200 (UUID: x)\nNVML: Unable to retrieve NVLink information as all links are inActive"
    assert [(f.severity, f.code) for f in _report(text).findings] == [("warning", "nvlink-inactive")]
    assert [f.severity for f in _report(text.replace("B200", "GeForce RTX 4090")).findings] == ["info"]


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


def test_nvlink_status_makes_its_check_and_an_elided_list_is_said_with_the_pastes_line():
    """A healthy `nvlink -s` makes the nvlink check (never 'no nvlink -s output in the pastes'); a list
    the paste elided (k8s-test-infra#371) is said, at the paste's own line, and no link is called down."""
    nvlink_dir = OWN_FIXTURES / "corpus" / "nvlink"
    healthy = _report((nvlink_dir / "power9_4x_v100_status_all_active.txt").read_text())
    assert [(c.name, c.status) for c in healthy.checks if c.name.startswith("nvlink")] == [("nvlink status", "ok")]
    cut = _report((nvlink_dir / "k8sti371_gb200_status_18_links_53gbps_gpu1_elided.txt").read_text())
    (note,) = cut.findings
    assert note.code == "nvlink-list-cut" and "GPU 1: 2 links listed, then line 24" in note.message
