"""Which pairs can peer (gputopo/analysis/causes/p2p_support.py): CUDA's errors on peer access
(217, 711, 704) and simpleP2P's answers."""

from __future__ import annotations

from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


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


def test_peer_mapping_exhausted_is_cudas_limit_not_a_fault():
    from conftest import OWN_FIXTURES

    name = "llamacpp21883_10x_p40_peer_mapping_resources_exhausted_elided.txt"
    text = (OWN_FIXTURES / "corpus" / "doctor_pastes" / name).read_text()
    (finding,) = [f for f in _report(text).findings if f.code == "cuda-too-many-peers"]
    assert finding.severity == "warning" and "at most 8 peers" in finding.message and "not a fault" in finding.message
    assert "CUDA_VISIBLE_DEVICES" in finding.fix
