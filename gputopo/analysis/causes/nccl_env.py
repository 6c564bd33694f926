"""The NCCL variables that turn a transport off (``env-nccl-p2p-disable``, ``env-nccl-p2p-level``,
``env-nccl-shm-disable``, ``env-nccl-ib-disable``), in one wording (``env_findings``) whichever door
read them: this host's or a gathered archive's environment (``check_host``), or a paste's ``export``,
``printenv`` or ``docker run -e`` lines (``check_paste``: the last one given wins, as in a shell;
whether they reached every rank the paste does not show)."""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING, Callable, Mapping

from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.evidence.health import HealthEvidence
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.host_health import HostHealth

ENV_RULES = {
    "NCCL_P2P_DISABLE": (lambda v: v.strip() not in ("", "0"), "warning",
                         "turns GPU peer-to-peer off: NCCL copies through host memory instead"),
    "NCCL_P2P_LEVEL": (lambda v: v.strip().upper() in ("LOC", "0"), "warning",
                       "LOC allows P2P between no GPUs at all (NVIDIA/nccl-tests#228)"),
    "NCCL_SHM_DISABLE": (lambda v: v.strip() not in ("", "0"), "info",
                         "turns NCCL's shared-memory transport off: processes fall back to the network"),
    "NCCL_IB_DISABLE": (lambda v: v.strip() not in ("", "0"), "info",
                        "turns InfiniBand / RoCE off: NCCL between nodes goes over TCP sockets, and GPUDirect RDMA "
                        "is not used"),
}


def check_host(evidence: HealthEvidence, host: HostHealth, report: DoctorReport) -> None:
    """This host's (or an archive's saved) NCCL/CUDA variables."""
    if host.env is None:
        report.check("environment", "not-made", "the NCCL/CUDA variables of that host were not saved (no gputopo/env)")
        return
    hits = env_findings(host.env, lambda name: f"environment: {name}={host.env[name]!r}", report, evidence.gpu_bdfs)
    report.check("environment", "problem" if hits else "ok")


def check_paste(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """The variables a paste sets (``export``, ``printenv``, ``docker run -e``): the last one given wins."""
    settings = evidence.facts.env
    if not settings:
        return
    env = {s.name: s.value for s in settings}  # the last one given wins, as in a shell
    line_of = {s.name: s.line for s in settings}
    hits = env_findings(env, lambda name: f"{label} line {line_of[name]}: {name}={env[name]!r}", report,
                        sorted(b for b in report.gpus))
    visible = env.get("CUDA_VISIBLE_DEVICES")
    shown = f"; CUDA_VISIBLE_DEVICES={visible!r}: the job sees only those GPUs" if visible is not None else ""
    report.check("environment", "problem" if hits else "ok",
                 f"{len(env)} NCCL/CUDA variable(s) in {label}{shown} (whether they reached every rank is not shown)")


def env_findings(env: Mapping[str, str], where: Callable[[str], str], report: DoctorReport,
                 gpu_bdfs: list[str] = ()) -> int:
    """``env-<name>`` for each variable of ``env`` that turns a transport off, whichever door read
    it (this host's environment, a gathered archive's, a paste's ``export`` line); ``where(name)``:
    the evidence line. Returns how many were found."""
    hits = 0
    for name, (is_bad, severity, meaning) in ENV_RULES.items():
        value = env.get(name)
        if value is None or not is_bad(value):
            continue
        hits += 1
        if name == "NCCL_P2P_DISABLE" or name == "NCCL_P2P_LEVEL":
            for a, b in combinations(sorted(gpu_bdfs), 2):
                report.mark_pair(a, b, "p2p-disabled")
        report.add(Finding(
            severity, "env-" + name.lower().replace("_", "-"),
            f"{name}={value!r} is set: it {meaning}.",
            evidence=[where(name)],
            effect="every NCCL job started from this environment",
            fix=f"`unset {name}` (and remove it from your shell profile, job script or container image)"))
    return hits

