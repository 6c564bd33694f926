"""Findings about merged sources: where two sources of one host (``--from`` given twice, or a
paste holding several outputs) say different things, and where GPUs were joined by index."""

from __future__ import annotations

from gputopo.model import GPU_NUMBERING_SUBJECT as NUMBERING
from gputopo.model import Finding, Topology
MAX_LISTED = 5


def disagreement_findings(topology: Topology) -> list[Finding]:
    """One warning listing what the sources disagree on (the first source's value was kept), and
    one note where GPUs were joined by index rather than by PCI bus id."""
    findings: list[Finding] = []
    joins = [d for d in topology.disagreements if d.subject == NUMBERING]
    conflicts = [d for d in topology.disagreements if d.subject != NUMBERING]
    if conflicts:
        shown = "; ".join(f"{d.subject}: {d.kept!r} from {d.kept_from} (kept) against {d.other!r} from {d.other_from}"
                          for d in conflicts[:MAX_LISTED])
        more = f"; and {len(conflicts) - MAX_LISTED} more" if len(conflicts) > MAX_LISTED else ""
        findings.append(Finding(
            "warning", "sources-disagree",
            f"the sources of this host disagree on {len(conflicts)} fact{'s' if len(conflicts) != 1 else ''}: {shown}{more}",
            gpus=sorted({g for d in conflicts for g in d.gpus}),
            fix="check that every --from is of this host and of its current state (a reboot, a driver or BIOS change "
                "between two captures changes what they say); the first --from wins where they disagree",
        ))
    for join in joins:
        findings.append(Finding(
            "info", "gpus-joined-by-index",
            f"the GPUs of {join.other_from} were matched to {join.kept_from}'s {join.kept}, an assumption "
            "(nvidia-smi and NVML number GPUs in PCI bus order; CUDA programs by CUDA_DEVICE_ORDER, "
            "FASTEST_FIRST by default)",
            gpus=join.gpus,
            fix="run the CUDA program with CUDA_DEVICE_ORDER=PCI_BUS_ID, or give a source with PCI bus ids",
        ))
    return findings
