"""``gputopo doctor``: why P2P is slow, wrong or hangs. Pure: ``HealthEvidence`` in, ``DoctorReport``
out, findings worst first, each with its cause (message), evidence (the file and value read),
effect (which GPU pairs) and fix. Checks that could not be made say so and why.

The checks live in ``doctor_pcie`` (ACS, link width/speed), ``doctor_host`` (IOMMU, modules,
/dev/shm, environment, visibility, VM), ``doctor_nvml`` (NVLink, fabric, P2P status) and
``doctor_pasted`` (lspci, dmesg, cmdline and nvlink text users paste).
"""

from __future__ import annotations

from gputopo.analysis.causes.doctor_acs import link_causes
from gputopo.analysis.causes.doctor_common import SCHEMA, DoctorReport
from gputopo.analysis.causes.doctor_host import host_checks
from gputopo.analysis.causes.doctor_not_made import list_checks_not_made
from gputopo.analysis.causes.doctor_nvml import nvml_checks
from gputopo.analysis.causes.doctor_pasted import pasted_checks
from gputopo.analysis.causes.doctor_pcie import pcie_checks
from gputopo.analysis.causes.observed_findings import P2P_CAUSES
from gputopo.analysis.causes.slow_gpu_findings import link_slow_gpu_causes
from gputopo.analysis.causes.slurm_check import doctor_slurm_checks
from gputopo.model import Finding, Link, Topology
from gputopo.sources.evidence.health import HealthEvidence

__all__ = ["SCHEMA", "DoctorReport", "doctor", "apply_health"]


def doctor(evidence: HealthEvidence, index_of: dict[str, int] | None = None) -> DoctorReport:
    """Every check that applies to ``evidence``. GPUs are numbered as NVML numbers them, else by
    ``index_of`` (bus id -> index of a topology the findings will be put on), else not at all."""
    report = DoctorReport(source=evidence.source)
    # GPU indices by bus id: NVML's, else the topology given, else another tool's output pasted beside
    # (p2pBandwidthLatencyTest's `pciBusID`, nvidia-smi -q ...), so a bridge's effect names GPUs.
    pasted_topologies = [topology for _, topology in evidence.read_as_topology]
    if evidence.topology is not None:
        pasted_topologies.append(evidence.topology)
    told = {g.pci_bus_id: g.index for t in pasted_topologies for g in t.gpus if g.pci_bus_id}
    index_of = {**told, **(index_of or {}), **evidence.bdf_to_index()}
    for bdf in evidence.gpu_bdfs:
        report.gpus[bdf] = index_of.get(bdf)
    if evidence.root is not None:
        pcie_checks(evidence, report)
        host_checks(evidence, report)
        nvml_checks(evidence, report)
    if evidence.pasted:  # a paste names bus ids only: the topology given beside it says which are GPUs
        for bdf, index in index_of.items():
            report.gpus.setdefault(bdf, index)
        for _, pasted in evidence.pasted:  # GPUs an lspci paste names (by bus id only)
            for bdf in pasted.nvidia_gpus:
                report.gpus.setdefault(bdf, None)
    for label, pasted in evidence.pasted:
        pasted_checks(label, pasted, report)
    for label, topology in evidence.read_as_topology:
        _topology_checks(label, topology, report)
    for label, reason in evidence.unread_outputs:
        report.check(f"read the other outputs in {label}", "not-made", reason)
    doctor_slurm_checks(evidence, report)
    link_causes(report)
    _slow_gpu_causes(report)
    if evidence.root is None and (evidence.pasted or evidence.read_as_topology):  # pastes alone: the whole list, each check made or not
        list_checks_not_made(report, [k for _, p in evidence.pasted for k in p.kinds], bool(evidence.read_as_topology))
    report.findings = report.sorted_findings()
    return report


def _slow_gpu_causes(report: DoctorReport) -> None:
    """What a benchmark given beside the pastes shows, joined to its cause as ``scan`` joins it: a GPU
    slow to every peer whose own link doctor found trained narrow or slow
    (``slow_gpu_findings.link_slow_gpu_causes``); P2P slower than staged copies where doctor found
    the IOMMU translating or ACS redirecting (``observed_findings.P2P_CAUSES``, the root cause first)."""
    for finding, cause in link_slow_gpu_causes(report.findings):
        report.causes[id(finding)] = cause
    for finding in report.findings:
        if finding.code == "p2p-slower-than-staged" and id(finding) not in report.causes:
            cause = next((c for code in P2P_CAUSES for c in report.findings if c.code == code.removeprefix("doctor-")), None)
            if cause is not None:
                report.causes[id(finding)] = cause


# "narrow-link": what doctor --from a pasted lspci wrote for "downtrained" before one wording (old saved files).
def _topology_checks(label: str, topology: Topology, report: DoctorReport) -> None:
    """Another tool's output given to doctor (an NCCL log, a bandwidth test, ``topo -m``): what
    ``scan --from`` finds in it, on the same report (a failing NCCL log names its cause here too)."""
    from gputopo.analysis import with_findings

    report.check(f"recognise {label}", "ok", f"read as {topology.source} (what `gputopo scan --from` reads)")
    said = {(f.code, tuple(f.gpus)) for f in report.findings}  # a paste's nvlink part, read by doctor too
    for finding in with_findings(topology).diagnostics:
        if (finding.code, tuple(finding.gpus)) not in said:
            report.add(finding)


PCIE_PROBLEMS = frozenset({"acs", "iommu", "downtrained", "narrow-link"})


def apply_health(topology: Topology, report: DoctorReport) -> int:
    """Put doctor's pair problems on the topology's links (``Link.health``, joined by PCI bus id)
    and its findings among the topology's, so recommend ranks those pairs below healthy ones and
    says why. Returns how many links were marked."""
    by_bus = {g.pci_bus_id: g.index for g in topology.gpus if g.pci_bus_id}
    marked = 0
    for (a, b), problems in report.pair_problems.items():
        ia, ib = by_bus.get(a), by_bus.get(b)
        if ia is None or ib is None or ia == ib:
            continue
        try:
            link: Link = topology.link(ia, ib)
        except (KeyError, ValueError):
            continue
        # GPUs joined by NVLink copy over it: what slows PCIe (ACS, IOMMU, a narrow or slow link)
        # does not slow that pair (the live checks know NVLink from NVML; a paste does not).
        kept = [p for p in problems if not (link.is_nvlink and p in PCIE_PROBLEMS)]
        if not kept:
            continue
        link.health = sorted(set(link.health) | set(kept))
        marked += 1
    seen = {(f.code, f.message) for f in topology.diagnostics}
    for finding in report.findings:  # each kept: two bridges with ACS are two findings, whatever their GPUs
        if finding.severity != "info" and (f"doctor-{finding.code}", finding.message) not in seen:
            seen.add((f"doctor-{finding.code}", finding.message))
            cause = report.causes.get(id(finding))
            topology.diagnostics.append(Finding(finding.severity, f"doctor-{finding.code}", finding.message,
                                                gpus=finding.gpus, fix=finding.fix, evidence=finding.evidence,
                                                effect=finding.effect,
                                                caused_by=f"doctor-{cause.code}" if cause is not None else None))
    return marked
