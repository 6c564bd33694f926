"""``gputopo doctor``: why P2P is slow, wrong or hangs. Pure: ``HealthEvidence`` in, ``DoctorReport``
out, findings worst first, each with its cause (message), evidence (the file and value read),
effect (which GPU pairs) and fix. Checks that could not be made say so and why.

Each cause is judged in its own module, one function per door its evidence can come through; this
module says which run for which evidence, and in which order (the order findings of one severity
are listed in): this host's or an archive's sysfs (``acs``, ``pcie_link``), its host files
(``iommu``, ``peermem``, ``shm``, ``nccl_env``, ``visibility``, ``vm``), NVML (``nvlink``,
``fabric``, ``pcie_link``, ``p2p_support``), and pasted text (lspci, kernel logs, command lines,
nvidia-smi, NCCL and CUDA output: the same modules and ``xid_aer``).
"""

from __future__ import annotations

from gputopo.analysis.causes import (
    acs,
    checks_not_made,
    fabric,
    iommu,
    nccl_env,
    nvlink,
    p2p_support,
    pcie_link,
    peermem,
    shm,
    visibility,
    vm,
    xid_aer,
)
from gputopo.analysis.causes.doctor_report import SCHEMA, DoctorReport, and_list
from gputopo.analysis.causes.observed_findings import P2P_CAUSES
from gputopo.analysis.causes.pcie_pstate import states_read
from gputopo.analysis.causes.slow_gpu_findings import link_slow_gpu_causes
from gputopo.analysis.causes.slurm_check import doctor_slurm_checks
from gputopo.model import Finding, Link, Topology
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_evidence import PastedEvidence

__all__ = ["SCHEMA", "DoctorReport", "doctor", "apply_health", "nvml_checks"]


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
        _sysfs_checks(evidence, report)
        _host_checks(evidence, report)
        nvml_checks(evidence, report)
    if evidence.pasted:  # a paste names bus ids only: the topology given beside it says which are GPUs
        for bdf, index in index_of.items():
            report.gpus.setdefault(bdf, index)
        for _, pasted in evidence.pasted:  # GPUs an lspci paste names (by bus id only)
            for bdf in pasted.nvidia_gpus:
                report.gpus.setdefault(bdf, None)
    for label, pasted in evidence.pasted:
        _pasted_checks(label, pasted, report)
    for label, topology in evidence.read_as_topology:
        _topology_checks(label, topology, report)
    for label, reason in evidence.unread_outputs:
        report.check(f"read the other outputs in {label}", "not-made", reason)
    doctor_slurm_checks(evidence, report)
    acs.link_causes(report)
    _slow_gpu_causes(report)
    if evidence.root is None and (evidence.pasted or evidence.read_as_topology):  # pastes alone: the whole list, each check made or not
        checks_not_made.list_checks_not_made(report, [k for _, p in evidence.pasted for k in p.kinds], bool(evidence.read_as_topology))
    report.findings = report.sorted_findings()
    return report


def _sysfs_checks(evidence: HealthEvidence, report: DoctorReport) -> None:
    """The PCIe paths read from sysfs (a live host, an archive): ACS on a bridge above a GPU, and links
    trained below what they can do (on the GPU or any bridge above it)."""
    paths = {bdf: path for bdf, path in evidence.paths.items() if path is not None}
    unplaced = [bdf for bdf, path in evidence.paths.items() if path is None]
    container = evidence.host.container if evidence.host is not None else None
    hidden = f" (in a container: {container}; the host's PCI tree may be hidden)" if container else ""
    if not evidence.gpu_bdfs:
        report.check("pcie-paths", "not-made", "no NVIDIA GPU listed under /sys/bus/pci/devices" + hidden)
        return
    if unplaced:
        report.check("pcie-paths", "not-made", f"sysfs does not place {and_list(unplaced)} in the PCI tree" + hidden)
    nvlinked = evidence.nvml.nvlink_pairs() if evidence.nvml is not None else set()
    acs.check_sysfs(paths, report, nvlinked)
    pcie_link.check_sysfs(paths, report, nvlinked, states_read(evidence))


def _host_checks(evidence: HealthEvidence, report: DoctorReport) -> None:
    """The host's files (a live host, an archive): the IOMMU, the kernel command line, GPUDirect RDMA's
    module, /dev/shm, the NCCL/CUDA variables, GPUs this process cannot see, a VM or container."""
    host = evidence.host
    if host is None:
        return
    report.kernel_release = report.kernel_release or host.kernel_release
    report.vfio = report.vfio or iommu.cmdline_vfio(host.cmdline)
    iommu.check_host(evidence, host, report)
    peermem.check_host(evidence, host, report)
    shm.check_host(host, report)
    nccl_env.check_host(evidence, host, report)
    visibility.check_host(host, report)
    vm.check_host(host, len(evidence.gpu_bdfs), report)


def nvml_checks(evidence: HealthEvidence, report: DoctorReport) -> None:
    """NVML's answers: each GPU's NVLinks, fabric and (where sysfs did not place it) own PCIe link, then
    the fabric as a check and the pairs NVML says cannot peer. Without NVML, a gathered archive's
    ``topo -p2p r`` stands in for its P2P status."""
    if evidence.nvml is None:
        if evidence.topology is not None:
            p2p_support.check_gathered(evidence.topology, report)
        if evidence.nvml_unavailable:
            checks_not_made.nvml_not_checked(evidence.nvml_unavailable, report)
        return
    nvml = evidence.nvml
    report.check("nvml", "ok", f"{len(nvml.gpus)} GPU(s)")
    nvlinked = nvml.nvlink_pairs()
    in_vm = evidence.host is not None and evidence.host.is_vm
    for gpu in nvml.gpus:
        nvlink.check_nvml_gpu(gpu, nvml, report, in_vm)
        fabric.check_nvml_gpu(gpu, report)
        if evidence.paths.get(gpu.pci_bus_id or "") is None:  # sysfs did not place it (a container)
            pcie_link.check_nvml_gpu(gpu, report, nvlinked)
    fabric.check_nvml(nvml, report)
    p2p_support.check_nvml(nvml, report)


def _pasted_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """Pasted evidence (``doctor --from lspci.txt|dmesg.txt|cmdline.txt|nvlink.txt ...``): the same
    causes as the live checks, from what the text shows and no more (a grepped ``ACSCtl`` line does
    not say which bridge it was)."""
    if not evidence.kinds:
        report.check(f"recognise {label}", "not-made",
                     "nothing recognised (expected lspci -vvv / -tv, dmesg, /proc/cmdline, nvidia-smi nvlink -s / -e "
                     "or nvidia-smi -q)")
        return
    report.check(f"recognise {label}", "ok", and_list(evidence.kinds))
    report.kernel_release = report.kernel_release or evidence.kernel_release
    acs.check_lspci(label, evidence, report)
    pcie_link.check_lspci(label, evidence, report)
    xid_aer.check_lspci_error_status(label, evidence, report)
    iommu.check_kernel_log(label, evidence, report)
    xid_aer.check_kernel_log(label, evidence, report)
    iommu.check_cmdline(label, evidence, report)
    nvlink.check_smi_paste(label, evidence, report)
    fabric.check_smi_paste(label, evidence, report)
    nccl_env.check_paste(label, evidence, report)
    shm.check_paste(label, evidence, report)
    peermem.check_nccl_log(label, evidence, report)
    visibility.check_nccl_sysfs(label, evidence, report)
    iommu.check_grub(label, evidence, report)
    fabric.check_cuda_errors(label, evidence, report)
    p2p_support.check_cuda_errors(label, evidence, report)
    p2p_support.check_peer_answers(label, evidence, report)
    nvlink.check_nvml_lines(label, evidence, report)
    fabric.check_fabric_manager_log(label, evidence, report)
    pcie_link.check_smi_rows(label, evidence, report)


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
