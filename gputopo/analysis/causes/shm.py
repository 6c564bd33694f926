"""``/dev/shm`` too small for NCCL's shared-memory transport (``shm-too-small``), in one wording
whichever door read it: this host's mounts (``check_host``), or a paste (``check_paste``): ``df`` or
``mount`` lines, NCCL's own failure to create its segment, a ``docker run`` line without
``--shm-size`` or ``--ipc=host`` (inferred from the command, and said so)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.host_health import HostHealth

SHM_ENOUGH_BYTES = 512 << 20  # NCCL needs far more than Docker's 64 MB default (nccl#342)

SHM_FIX = "run the container with `--shm-size=1g --ulimit memlock=-1` (or `--ipc=host`)"


def check_host(host: HostHealth, report: DoctorReport) -> None:
    """The size of this host's (or an archive's) ``/dev/shm``."""
    if host.shm_bytes is None:
        return
    small = host.shm_bytes < SHM_ENOUGH_BYTES
    report.check("dev-shm", "problem" if small else "ok", f"{host.shm_bytes >> 20} MiB")
    if small:
        shm_too_small(report, f"/dev/shm is only {host.shm_bytes >> 20} MiB (Docker's default is 64 MB)",
                      [host.shm_evidence or "/dev/shm"])


def check_paste(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A paste's ``df``/``mount`` sizes of ``/dev/shm``, NCCL's failures to use it, ``docker run`` lines."""
    facts = evidence.facts
    sized = [s for s in facts.shm_sizes if s.size is not None]
    small = [s for s in sized if s.size < SHM_ENOUGH_BYTES]
    if facts.shm_failures:
        first = facts.shm_failures[0]
        segment = next((f.size for f in facts.shm_failures if f.size), None)
        what = ("NCCL crashed with SIGBUS in its shared-memory code: /dev/shm could not back the segment it "
                "mapped" if all(f.sigbus for f in facts.shm_failures) else
                "NCCL could not create its shared-memory segment in /dev/shm")
        shm_too_small(report, what + (f" ({segment / (1 << 20):.1f} MiB)" if segment else "")
                      + (f", which is {small[0].size >> 20} MiB" if small else ": /dev/shm is full or too small "
                         "(its size is not in the paste: `df -h /dev/shm` inside the container tells)"),
                      [f"{label} line {f.line}: {f.text}" for f in facts.shm_failures[:3]]
                      + [f"{label} line {s.line}: {s.text}" for s in small[:1]], severity="error")
        report.check("dev-shm", "problem", f"NCCL's error in {label} line {first.line}")
    elif small:
        shm_too_small(report, f"/dev/shm is only {small[0].size >> 20} MiB (Docker's default is 64 MB)",
                      [f"{label} line {s.line}: {s.text}" for s in small[:3]])
        report.check("dev-shm", "problem", f"{small[0].size >> 20} MiB")
    elif sized:
        report.check("dev-shm", "ok", f"{min(s.size for s in sized) >> 20} MiB ({label} line {sized[0].line})")
    elif facts.shm_sizes:
        report.check("dev-shm", "ok", f"{label} line {facts.shm_sizes[0].line}: no size= on the tmpfs mount: the "
                     "kernel's default applies (half of RAM)")
    _docker(label, evidence, report, said=bool(facts.shm_failures or sized))


def _docker(label: str, evidence: PastedEvidence, report: DoctorReport, said: bool) -> None:
    for run in evidence.facts.docker_runs:
        where = f"{label} line {run.line}: {run.text}"
        if run.shm_bytes is not None and run.shm_bytes < SHM_ENOUGH_BYTES:
            shm_too_small(report, f"This `docker run` gives the container a /dev/shm of {run.shm_option}", [where])
        elif run.shm_option is None and not said:
            shm_too_small(report, "This `docker run` has neither `--shm-size` nor `--ipc=host`, so the container "
                          "gets Docker's default /dev/shm of 64 MB (inferred from the command: the size inside the "
                          "container is not in the paste; `df -h /dev/shm` there tells). That is likely too small "
                          "for a job of several GPUs", [where])
        if run.shm_option is not None:
            report.check("dev-shm (docker run)", "ok", f"{run.shm_option} ({label} line {run.line})")


def shm_too_small(report: DoctorReport, said: str, evidence: list[str], severity: str = "warning") -> None:
    """``shm-too-small``, whichever door read it (this host's mounts, or a paste: ``df``, NCCL's own
    error, a ``docker run`` line). ``said``: what shows it, in the source's words."""
    report.add(Finding(
        severity, "shm-too-small",
        f"{said}: NCCL's shared-memory transport fails or hangs (NVIDIA/nccl#342).",
        evidence=evidence, effect="NCCL between processes on this host", fix=SHM_FIX))

