"""NVLinks inactive (``nvlink-inactive``) or counting errors (``nvlink-errors``), in one wording
whichever door read them: NVML on a live host (``check_nvml_gpu``), a pasted ``nvidia-smi nvlink -s``
read as scan reads it (``check_smi_paste``, with ``nvlink_findings.nvlinks_down``: fewer active links
than its peers) and ``nvlink -e``'s counters, NVML's one-line "all links are inActive" and ``Link K:
<inactive>`` lines without their GPU (``check_nvml_lines``), and a topology's ``nvlink -s`` for scan
(``nvlink_inactive_findings``). A module whose board wires every link (SXM, H100 SXM5, H200, B200 ...)
makes a link down a fault; a card has more link slots than its bridge uses, so there it may be normal.
In a VM that holds fewer than 8 GPUs, links to the board's GPUs the VM was not given are down by design.

GPUs are named as nvidia-smi numbers them (NVML's index)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, nvml_bus_id
from gputopo.analysis.causes.nvlink_findings import nvlinks_down
from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import InputError
from gputopo.model import Finding, ReadingNote, Topology
from gputopo.notation import count_word
from gputopo.sources.smi import nvlink as nvlink_status

if TYPE_CHECKING:
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.nvml_health import GpuNvmlHealth, NvmlHealth

# GPU models sold only as modules on boards that wire every NVLink (most behind NVSwitches): SXM parts,
# the H100 SXM5 ("H100 80GB HBM3"), H200 (its PCIe card is "H200 NVL"), B100/B200/B300, GB200/GB300.
BOARD_MODULE = re.compile(r"SXM|H100 80GB HBM3|\bH200\b(?! NVL)|\bG?B[123]00\b", re.IGNORECASE)

# "Tesla V100-SXM2-32GB", "NVIDIA A100-SXM4-80GB": a module on a board (an H100 SXM's name, "H100 80GB
# HBM3", does not say so: it keeps the card wording).
_SXM_RE = re.compile(r"\bSXM\d?\b", re.IGNORECASE)

# The counters judged, as the live check judges NVML's (replay, recovery, CRC flit / data); others a newer
# nvidia-smi prints (symbol errors, before forward error correction, are normal on a healthy link) are not.
JUDGED_COUNTERS = ("replay", "recovery", "crc")

COUNTER_MAX_16BIT = 65535


def check_nvml_gpu(gpu: GpuNvmlHealth, nvml: NvmlHealth, report: DoctorReport, in_vm: bool = False) -> None:
    """Some NVLinks up and some down: on bare metal a bridge, a link or the board. In a VM that holds
    fewer than 8 GPUs, most often the links to the board's GPUs the VM was not given (down by design:
    4 of an 8-GPU V100 board, say), so said as a question; a VM with 8 or more holds a whole direct-NVLink
    board (they have at most 8 GPUs), and a down link there is a fault as on bare metal."""
    if not gpu.nvlinks:
        return
    down = [link.link for link in gpu.nvlinks if link.active is False]
    active = [link for link in gpu.nvlinks if link.active]
    if down and active and in_vm and len(nvml.gpus) < 8:
        report.add(nvlink_inactive_nvml(report.label(nvml_bus_id(gpu)), gpu.index, down, len(gpu.nvlinks), in_vm=True))
    elif down and active:
        report.mark_gpu(nvml_bus_id(gpu), "nvlink-down")
        for other in nvml.gpus:
            if other.index != gpu.index and other.pci_bus_id and gpu.pci_bus_id:
                report.mark_pair(gpu.pci_bus_id, other.pci_bus_id, "nvlink-down")
        report.add(nvlink_inactive_nvml(report.label(nvml_bus_id(gpu)), gpu.index, down, len(gpu.nvlinks), in_vm=False))
    erring = {link.link: link.errors for link in active if any(link.errors.get(k) for k in ("replay", "recovery", "crc_flit", "crc_data"))}
    if erring:
        shown = [f"link {n}: " + ", ".join(f"{k} {v}" for k, v in errs.items() if v) for n, errs in erring.items()]
        report.add(nvlink_errors(report.label(nvml_bus_id(gpu)), gpu.index, shown,
                                 [f"nvmlDeviceGetNvLinkErrorCounter(GPU {gpu.index}) {s}" for s in shown[:6]], since_load=True))


def check_smi_paste(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A pasted ``nvidia-smi nvlink -s`` (links inactive, fewer than peers) and ``nvlink -e`` (counters)."""
    _inactive(label, evidence, report)
    _errors(label, evidence, report)


def _inactive(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """``nvidia-smi nvlink -s`` read as scan reads it (``sources.smi.nvlink``) and judged by scan's rules:
    a GPU with fewer active links than its peers of the same model (``nvlink-links-down``), links
    ``<inactive>`` (``nvlink-inactive``: the model on the ``GPU N:`` line says whether its board wires
    every link)."""
    if not evidence.nvlink_status:
        return
    try:
        topology = nvlink_status.read("\n".join(line for _, line in evidence.nvlink_status), label)
    except InputError:
        return
    found = nvlinks_down(topology) + nvlink_inactive_findings(topology)
    for finding in found:
        if finding.code == "nvlink-inactive":
            down = [s for s in topology.nvlinks if s.gpu in finding.gpus and s.active is False]
            finding.evidence = [f"{label}: GPU {s.gpu} Link {s.link}: <inactive>" for s in down[:6]]
        report.add(finding)
    # A list the paste elided: its links left out are unknown. The reader numbered the lines kept for it:
    # the note names the paste's own line numbers.
    cut = [ReadingNote(n.code, {**n.facts, "lines": [evidence.nvlink_status[k - 1][0] for k in n.facts["lines"]]}, n.gpus)
           for n in topology.reading_notes if n.code == "nvlink-list-cut"]
    for finding in note_findings(cut):
        report.add(finding)
    report.check("nvlink status", "problem" if any(f.severity != "info" for f in found) else "ok",
                 f"{len(topology.nvlinks)} link(s) of {len(topology.gpus)} GPU(s) in {label}")


def _counted(name: str, count: int) -> str:
    saturated = (" (the largest 16-bit count: the counter may have stopped there, the real count higher)"
                 if count == COUNTER_MAX_16BIT else "")
    return f"{name} {count}{saturated}"


def _errors(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    if not evidence.nvlink_errors:
        return
    counted = sum(len(links) for links in evidence.nvlink_errors.values())
    erring_gpus = 0
    for gpu, links in sorted(evidence.nvlink_errors.items()):
        erring = {link: {k: v for k, v in counters.items() if v and any(word in k for word in JUDGED_COUNTERS)}
                  for link, counters in sorted(links.items())}
        erring = {link: counters for link, counters in erring.items() if counters}
        if not erring:
            continue
        erring_gpus += 1
        shown = [f"link {n}: " + ", ".join(_counted(k, v) for k, v in counters.items()) for n, counters in erring.items()]
        report.add(nvlink_errors(f"GPU {gpu}", gpu, shown, [f"{label}: GPU {gpu} {s}" for s in shown[:6]]))
    report.check("nvlink errors", "problem" if erring_gpus else "ok",
                 f"{counted} link(s) of {len(evidence.nvlink_errors)} GPU(s) counted in {label}")


def check_nvml_lines(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """NVML's one-line "all links are inActive" and ``Link K: <inactive>`` lines pasted without their
    ``GPU N:`` header (a header's links are ``check_smi_paste``'s)."""
    facts = evidence.facts
    for gpu, said in sorted(facts.nvml_no_links.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        name = evidence.nvlink_names.get(gpu) if gpu is not None else None
        module = name is not None and BOARD_MODULE.search(name)
        report.add(nvlink_all_inactive_finding(gpu, name, bool(module), [f"{label} line {said.line}: {said.text}"]))
    for gpu, links in sorted(facts.links_inactive.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        if gpu is not None and gpu in evidence.nvlink_states:
            continue  # read with its header by pasted_smi, judged there
        report.add(nvlink_unheaded_finding(gpu, sorted(links),
                                           [f"{label} line {s.line}: {s.text}" for _, s in sorted(links.items())[:4]]))
    if facts.nvml_no_links or facts.links_inactive:
        report.check("nvlink", "problem" if any(f.code == "nvlink-inactive" and f.severity != "info"
                                                for f in report.findings) else "ok",
                     f"NVLink state in {label}")


def nvlink_errors(who: str, index: int, shown: list[str], evidence: list[str], *, since_load: bool = False) -> Finding:
    """``nvlink-errors``, whoever counted them (NVML on a live host, a pasted ``nvidia-smi nvlink -e``):
    ``shown`` the links and their counts in words."""
    return Finding(
        "warning", "nvlink-errors",
        f"{who} counts NVLink errors on {len(shown)} link(s){' since the driver loaded' if since_load else ''}: "
        f"{'; '.join(shown[:6])}. Replays and CRC errors cost bandwidth; recoveries retrain the link.",
        gpus=[index], evidence=evidence,
        effect=f"NVLink traffic of {who} over those links",
        fix="reset the counters (`sudo nvidia-smi nvlink -re`) and watch whether they grow under load "
            "(`nvidia-smi nvlink -e`); growing counts need the bridge or the board checked")


def nvlink_inactive_findings(topology: Topology) -> list[Finding]:
    """``nvlink-inactive`` for every GPU with links ``<inactive>`` (scan's and doctor's rule)."""
    findings = []
    by_gpu: dict[int, list[int]] = {}
    for state in topology.nvlinks:
        if state.active is False:
            by_gpu.setdefault(state.gpu, []).append(state.link)
    links = topology.link_map() if by_gpu else {}
    for gpu, down in sorted(by_gpu.items()):
        active = sum(1 for s in topology.nvlinks if s.gpu == gpu and s.active)
        wired = max((links[(gpu, other)].nvlink_count for other in topology.gpu_indices
                     if (gpu, other) in links and not links[(gpu, other)].nvswitch), default=0)
        findings.append(nvlink_inactive_finding(gpu, down, active, topology.gpu(gpu).name, wired))
    return findings


def nvlink_inactive_finding(gpu: int, down: list[int], active: int, name: str | None, wired: int = 0,
                            evidence: list[str] | None = None) -> Finding:
    """``nvlink-inactive`` from ``nvidia-smi nvlink -s`` (what scan reads, and doctor's pasted
    evidence): links ``down`` of GPU ``gpu`` (model ``name``), ``active`` up, ``wired`` the NV# count
    the topology shows to a peer (0: not shown). A warning where a link is missing that the topology
    shows, or on a module (SXM: its board wires every link); on a card only info: it has more link
    slots than its bridge uses."""
    expected_more = wired > active
    module = _SXM_RE.search(name or "")
    # A card whose active links are all the NV# the topology shows to its peer: the rest are slots its
    # bridge(s) do not use (an H100 NVL pair: NV12, 6 of 18 slots unused), nothing to fix.
    spare = not module and wired > 0 and wired == active
    return Finding(
        "warning" if expected_more or module else "info", "nvlink-inactive",
        f"GPU {gpu}: NVLink {count_word(len(down), 'link')} {', '.join(map(str, down))} <inactive>, {active} active"
        + (f", while the topology shows NV{wired} to a peer" if expected_more else
           f" ({module.group(0)} module: its board wires every NVLink, so a link down is a fault, unless the "
           "fabric is partitioned on purpose)" if module else
           f" (every link of the NV{wired} the topology shows to its peer is up: the others are link slots its "
           "bridge does not use, normal for this card)" if spare else
           " (a card has more link slots than its bridge uses: this can be normal; a link that should be up and is "
           "not means a bridge not seated or a fault)"),
        gpus=[gpu],
        fix=None if spare else
            "`nvidia-smi nvlink -e` shows error counters; a GPU reset or the vendor (no bridge to reseat on an "
            "SXM board)" if module else "reseat the NVLink bridge; `nvidia-smi nvlink -e` shows error counters",
        evidence=list(evidence or []),
    )


def nvlink_all_inactive_finding(gpu: int | None, name: str | None, module: bool, evidence: list[str]) -> Finding:
    """``nvlink-inactive`` from NVML's one-line answer "all links are inActive" (a pasted nvidia-smi):
    a fault on a module whose board wires every link, else maybe normal (a card without a bridge)."""
    who = f"GPU {gpu}" if gpu is not None else "A GPU the paste does not name"
    return Finding(
        "warning" if module else "info", "nvlink-inactive",
        f"{who}{f' ({name})' if name else ''}: NVML reports every NVLink inactive"
        + (": its board wires every link, so this GPU is cut off the NVLink fabric (a GPU or link fault, a "
           "fabric that did not finish, or a reset while Fabric Manager ran); its peer traffic falls back to "
           "PCIe or fails." if module else
           ": normal for a card without an NVLink bridge; a fault only if it has one (or sits on an SXM "
           "board). The paste does not show which."),
        gpus=[gpu] if gpu is not None else [],
        evidence=evidence,
        effect=f"every NVLink copy of {who}",
        fix=("`nvidia-smi -q | grep -A6 Fabric` (State, Status) and `dmesg | grep -i xid` on that GPU; restart "
             "nvidia-fabricmanager or reset the GPU; drain the node if the links stay down" if module else
             "reseat the NVLink bridge if one is fitted; `nvidia-smi topo -m` shows NV# where links are up"))


def nvlink_unheaded_finding(gpu: int | None, links: list[int], evidence: list[str]) -> Finding:
    """``nvlink-inactive`` from ``Link K: <inactive>`` lines pasted without their ``GPU N:`` header:
    whether those links should be up, the paste cannot show (info)."""
    who = f"GPU {gpu}" if gpu is not None else "a GPU the paste does not name"
    return Finding(
        "info", "nvlink-inactive",
        f"NVLink {', '.join(map(str, links))} of {who} <inactive>; the paste shows neither its other links "
        "nor its model, so whether these should be up is unknown (a card has more link slots than its bridge "
        "uses).", gpus=[gpu] if gpu is not None else [],
        evidence=evidence,
        fix="`nvidia-smi nvlink -s` whole (every GPU, every link) and `nvidia-smi topo -m`")


def nvlink_inactive_nvml(who: str, index: int, down: list[int], total: int, *, in_vm: bool) -> Finding:
    """``nvlink-inactive`` as NVML reads it on a live host (doctor): ``down`` of ``total`` links of GPU
    ``index`` (``who`` in words). In a VM holding fewer than 8 GPUs said as a question (info)."""
    if in_vm:
        return Finding(
            "info", "nvlink-inactive",
            f"{who} has {len(down)} of {total} NVLinks inactive (link {', '.join(map(str, down))}). This is a virtual "
            "machine: links to GPUs of the same board that this VM was not given are inactive by design, so this is a "
            "fault only if this instance type should have them up (inferred: NVML does not say where an inactive link "
            "leads).",
            gpus=[index], evidence=[f"nvmlDeviceGetNvLinkState(GPU {index}, link {n}): inactive" for n in down[:6]],
            effect="none if by design; else the NVLink bandwidth of pairs with this GPU",
            fix="compare `nvidia-smi nvlink -s` with another instance of the same type; if its links are up, ask the provider")
    return Finding(
        "warning", "nvlink-inactive",
        f"{who} has {len(down)} of {total} NVLinks inactive (link {', '.join(map(str, down))}): a bridge not seated, "
        "a failed link, or a board that wires only some links (NVIDIA/nccl#340, #2329, Azure/azhpc-diagnostics#73).",
        gpus=[index], evidence=[f"nvmlDeviceGetNvLinkState(GPU {index}, link {n}): inactive" for n in down[:6]],
        effect=f"NVLink bandwidth of every pair with {who}",
        fix="compare with `nvidia-smi nvlink -s` on a healthy node of the same model; reseat the NVLink bridge "
            "(PCIe cards) or have the baseboard checked (SXM), then `nvidia-smi -r` or reboot")

