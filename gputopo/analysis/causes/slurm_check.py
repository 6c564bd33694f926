"""Slurm's view of a node's GPUs (``slurmd -G``, ``scontrol show node``) against the wiring.

What gres.conf should say is ``analysis/slurm/slurm_gres.py``'s (Slurm's device order, NVLink counts,
Slurm's core indices); each difference Slurm's own view shows is named:

- ``slurm-gpu-missing``: the wiring has GPUs Slurm does not list (slurmd drops a GPU whose explicit
  ``Cores=``/``Links=`` differ from what AutoDetect found, or whose ``File=`` does not exist);
- ``slurm-nvswitch-links-zero``: NVSwitch peers seen as ``0`` (AutoDetect=nvml counts a link only
  when its far end is a GPU): every pair is equal, so Slurm loses no choice, but it says "no link";
- ``slurm-links-differ``: NVLink pairs whose count Slurm has otherwise (it picks GPUs "most linked
  first" by these);
- ``slurm-cores-wrong-socket``: a GPU bound to cores that are none of its own (with
  ``--gres-flags=enforce-binding`` a job gets CPUs across the socket interconnect from its GPUs).
"""

from __future__ import annotations

from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.analysis.slurm.slurm_gres import GresGpu, GresNode, gres_nodes
from gputopo.model import Finding
from gputopo.notation import format_cpu_list, gpus_word, pair_list
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.slurm_gres_text import SlurmGpu, SlurmGresText

FIX_FILE = ("write gres.conf from the wiring (`gputopo recommend --from SNAPSHOT --format gres`), or leave "
            "Cores=/Links= out of it where AutoDetect=nvml is on; restart slurmd and check with `slurmd -G`")


def _matched(expected: GresNode, seen: list[SlurmGpu]) -> dict[int, SlurmGpu]:
    """Expected GPU index -> Slurm's line: by device file (``/dev/nvidiaN``) where Slurm names one,
    else by Slurm's device index (both count in PCI bus order)."""
    by_minor = {gpu.minor: gpu for gpu in seen if gpu.minor is not None}
    if by_minor:
        return {gpu.index: by_minor[gpu.minor] for gpu in expected.gpus if gpu.minor in by_minor}
    by_index = {gpu.index: gpu for gpu in seen}
    return {gpu.index: by_index[position] for position, gpu in enumerate(expected.gpus) if position in by_index}


def _missing(label: str, expected: GresNode, count: int, absent: list[GresGpu]) -> Finding:
    names = ", ".join(f"GPU {g.index} ({g.pci_bus_id or 'bus id unknown'}, /dev/nvidia{g.minor})" for g in absent)
    return Finding("warning", "slurm-gpu-missing",
                   f"Slurm lists {count} of the {len(expected.gpus)} GPUs the wiring shows"
                   + (f": {names} missing" if names else ""),
                   gpus=[g.index for g in absent], fix=FIX_FILE, evidence=[label],
                   effect="jobs cannot be given the missing GPUs; slurmd drops a GPU whose Cores=/Links= differ "
                          "from what AutoDetect=nvml found, or whose File= does not exist (slurmd's log says which)")


def _links_findings(label: str, expected: GresNode, matched: dict[int, SlurmGpu]) -> list[Finding]:
    order = [gpu.index for gpu in expected.gpus]
    zero, differ = [], []
    for gpu in expected.gpus:
        line = matched.get(gpu.index)
        if line is None or line.links is None or len(line.links) != len(order):
            continue
        peers = [n for position, n in enumerate(line.links) if order[position] != gpu.index]
        if expected.nvswitch and not any(peers):
            zero.append(gpu.index)
            continue
        for position, (want, got) in enumerate(zip(gpu.links, line.links)):
            other = order[position]
            if gpu.index < other and want != got:
                differ.append((gpu.index, other))
    findings = []
    if zero:
        findings.append(Finding(
            "info", "slurm-nvswitch-links-zero",
            f"Slurm sees no link from {gpus_word(zero)} to any other GPU (Links= 0 to every peer), though every "
            "pair is joined through NVSwitch: AutoDetect=nvml counts a link only when its far end is a GPU",
            gpus=zero, evidence=[label], fix="nothing is needed for scheduling; to say what the wiring is, "
            "write gres.conf with `gputopo recommend --format gres` (AutoDetect=off)",
            effect="none on which GPUs a job gets: every pair is equal, and Slurm treats them so"))
    if differ:
        findings.append(Finding(
            "warning", "slurm-links-differ",
            f"Slurm's Links= disagree with the NVLinks on {pair_list(differ)}",
            gpus=sorted({g for pair in differ for g in pair}), evidence=[label], fix=FIX_FILE,
            effect="Slurm picks GPUs 'most linked first' by these counts: a job can get GPUs without NVLink "
                   "between them where better-linked ones were free"))
    return findings


def _cores_findings(label: str, expected: GresNode, matched: dict[int, SlurmGpu]) -> list[Finding]:
    wrong = []
    for gpu in expected.gpus:
        line = matched.get(gpu.index)
        if gpu.cores and line is not None and line.cores and not set(gpu.cores) & set(line.cores):
            wrong.append((gpu, line))
    if not wrong:
        return []
    said = "; ".join(f"GPU {g.index}: Slurm's Cores={format_cpu_list(s.cores or [])}, its own cores "
                     f"{format_cpu_list(g.cores or [])}" for g, s in wrong)
    return [Finding("warning", "slurm-cores-wrong-socket",
                    f"Slurm binds {gpus_word([g.index for g, _ in wrong])} to cores that are none of the GPU's own "
                    f"({said})", gpus=[g.index for g, _ in wrong], evidence=[label], fix=FIX_FILE,
                    effect="with --gres-flags=enforce-binding a job gets CPUs on the other socket: its input "
                           "pipeline and host-staged copies cross the socket interconnect")]


def slurm_findings(label: str, seen: SlurmGresText, expected: GresNode) -> list[Finding]:
    """Every difference between what Slurm shows in ``seen`` and the node's wiring ``expected``."""
    gpus = [g for g in seen.gpus if g.node is None or expected.node is None or g.node == expected.node]
    findings: list[Finding] = []
    if gpus:
        matched = _matched(expected, gpus)
        absent = [gpu for gpu in expected.gpus if gpu.index not in matched]
        if absent:
            findings.append(_missing(label, expected, len(gpus), absent))
        findings += _links_findings(label, expected, matched)
        findings += _cores_findings(label, expected, matched)
    for node in seen.nodes:
        count = sum(n for _, n in node.entries)
        if (expected.node is None or node.node == expected.node) and count < len(expected.gpus) and not findings:
            findings.append(_missing(f"{label} line {node.line}", expected, count, []))
    return findings


def doctor_slurm_checks(evidence: HealthEvidence, report: DoctorReport) -> None:
    """``doctor --from`` Slurm's text beside the wiring (a snapshot, ``topo -m`` text, a gathered
    archive): each node's differences as findings; without the wiring, a check not made."""
    if not evidence.slurm_gres:
        return
    wiring = [evidence.topology] if evidence.topology is not None else []
    wiring += [topology for _, topology in evidence.read_as_topology if topology.gpus]
    name = "compare Slurm's GPUs (slurmd -G / scontrol show node) with the wiring"
    if not wiring:
        report.check(name, "not-made", "give the wiring too: a snapshot or `nvidia-smi topo -m` text with another --from")
        return
    topology = wiring[0]
    nodes = gres_nodes([topology])
    for label, seen in evidence.slurm_gres:
        named = {gpu.node for gpu in seen.gpus if gpu.node} | {node.node for node in seen.nodes}
        for node in nodes:
            if len(nodes) > 1 and named and node.node not in named:
                continue
            for finding in slurm_findings(label, seen, node):
                report.add(finding)
    report.check(name, "ok", f"against {topology.source_detail or topology.source}")
