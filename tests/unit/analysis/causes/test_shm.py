"""``shm-too-small`` from pastes (gputopo/analysis/causes/shm.py): NCCL's errors, df, docker run lines."""

from __future__ import annotations

from gputopo.analysis.causes.doctor import doctor
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted


def _report(text: str, name: str = "paste.txt"):
    return doctor(HealthEvidence(source=name, pasted=[(name, parse_pasted(text))]))


def _codes(text):
    return {(f.severity, f.code) for f in _report(text).findings}


def test_docker_run_without_shm_is_an_inference_and_with_it_is_quiet():
    (finding,) = _report("docker run --gpus all img").findings
    assert finding.code == "shm-too-small" and "inferred" in finding.message
    assert _codes("docker run --gpus all --ipc=host img") == set()
    assert _codes("docker run --shm-size=64m img") == {("warning", "shm-too-small")}


def test_nccl_shm_errors_and_df():
    assert ("error", "shm-too-small") in _codes("NCCL WARN Call to posix_fallocate failed : No space left on device")
    assert _codes("shm  64M  0  64M  0% /dev/shm") == {("warning", "shm-too-small")}
    assert _codes("tmpfs  32G  0  32G  0% /dev/shm") == set()


def test_a_sigbus_in_nccls_shared_memory_code_is_shm_too_small():
    """JAX-Toolbox#183 as posted, and the same crash quoted in a ticket with prompts: one error naming the
    SIGBUS and the frame, and the dev-shm check a problem."""
    from pathlib import Path

    real = Path("tests/fixtures/corpus/doctor_pastes/jaxtoolbox183_gdb_sigbus_in_ncclshmopen_proxy_backtrace.txt").read_text()
    quoted = "\n".join("> " + line for line in real.splitlines())
    for text in (real, quoted):
        report = _report(text)
        (finding,) = report.findings
        assert (finding.severity, finding.code) == ("error", "shm-too-small")
        assert "SIGBUS in its shared-memory code" in finding.message and "ncclShmOpen" in finding.evidence[0]
        assert [c.status for c in report.checks if c.name == "dev-shm"] == ["problem"]
