from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text):
    return doctor(HealthEvidence(source="t", pasted=[("t", parse_pasted(text))]))


def test_802_names_fabric_manager_and_says_when_nvswitches_are_unknown():
    (finding,) = _report("cudaGetDeviceProperties returned 802\n-> system not yet initialized").findings
    assert finding.code == "fabric-not-ready" and "does not show" in finding.message
    (finding,) = _report("GPU 0: NVIDIA H100 80GB HBM3\nError: system not yet initialized").findings
    assert "H100 80GB HBM3" in finding.message and finding.gpus == [0]


def test_217_is_a_warning_and_704_harmless():
    assert [(f.severity, f.code) for f in _report("CUDA error 217 at x.cu:1: y").findings] == [
        ("warning", "cuda-peer-access-unsupported")]
    assert [(f.severity, f.code) for f in _report("cudaDeviceEnablePeerAccess returned (0x2c0) cuda").findings] == [
        ("info", "cuda-peer-access-already-enabled")]


def test_simple_p2p_all_yes_is_quiet_and_no_pairs_are_info():
    yes = "Peer access from A (GPU0) -> A (GPU1) : Yes\nPeer access from A (GPU1) -> A (GPU0) : Yes"
    assert _report(yes).findings == []
    (finding,) = _report(yes.replace("Yes", "No")).findings
    assert (finding.severity, finding.code) == ("info", "cuda-peer-access-no")


def test_all_links_inactive_is_a_fault_only_on_a_module():
    text = "GPU 2: NVIDIA B200 (UUID: x)\nNVML: Unable to retrieve NVLink information as all links are inActive"
    assert [(f.severity, f.code) for f in _report(text).findings] == [("warning", "nvlink-inactive")]
    assert [f.severity for f in _report(text.replace("B200", "GeForce RTX 4090")).findings] == ["info"]


def test_idle_gen1_in_p8_is_quiet_and_p0_below_max_warns():
    head = "index, pstate, pcie.link.gen.current, pcie.link.gen.max\n"
    assert {f.severity for f in _report(head + "0, P8, 1, 4").findings} <= {"info"}
    assert [f.code for f in _report(head + "0, P0, 3, 4").findings] == ["pcie-link-slow"]
    report = _report("index, pstate, pcie.link.gen.current\n0, P8, 1")
    assert report.findings == [] and any(c.name == "pcie-links" and c.status == "not-made" for c in report.checks)


def test_fabric_manager_nothing_to_do_is_quiet():
    report = _report("nv-fabricmanager[1]: ... [NV_WARN_NOTHING_TO_DO]")
    assert [f.severity for f in report.findings] == ["info"]


def test_peer_mapping_exhausted_is_cudas_limit_not_a_fault():
    from conftest import OWN_FIXTURES

    name = "llamacpp21883_10x_p40_peer_mapping_resources_exhausted_elided.txt"
    text = (OWN_FIXTURES / "corpus" / "doctor_pastes" / name).read_text()
    (finding,) = [f for f in _report(text).findings if f.code == "cuda-too-many-peers"]
    assert finding.severity == "warning" and "at most 8 peers" in finding.message and "not a fault" in finding.message
    assert "CUDA_VISIBLE_DEVICES" in finding.fix
