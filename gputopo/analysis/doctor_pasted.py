"""Doctor's reading of pasted evidence (``doctor --from lspci.txt|dmesg.txt|cmdline.txt|nvlink.txt``):
the same causes as the live checks, from what the text shows and no more (a grepped ``ACSCtl`` line
does not say which bridge it was)."""

from __future__ import annotations

from gputopo.analysis.doctor_common import DoctorReport, and_list, gts_to_gen
from gputopo.analysis.doctor_host import IOMMU_FIX, cmdline_iommu, passthrough_or_off
from gputopo.analysis.doctor_links import narrow_link, slow_link
from gputopo.analysis.doctor_pcie import setpci_loop
from gputopo.model import Finding
from gputopo.quoting import shell_word
from gputopo.sources.pasted_health import PastedEvidence
from gputopo.sources.pcie_health import ACS_REDIRECT_MASK, AcsState

XID_MEANING = {
    79: "the GPU fell off the bus (PCIe link lost: power, slot, riser or overheating)",
    74: "an NVLink error",
    48: "a double-bit ECC error",
    31: "a GPU memory page fault (with IOMMU faults: a DMA the IOMMU refused)",
    32: "an invalid or corrupted push buffer stream (driver error, system memory corruption, a PCIe bus error)",
    13: "a graphics engine exception",
    119: "a GSP firmware timeout",
}


def pasted_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    if not evidence.kinds:
        report.check(f"recognise {label}", "not-made",
                     "nothing recognised (expected lspci -vvv / -tv, dmesg, /proc/cmdline or nvidia-smi nvlink -s)")
        return
    report.check(f"recognise {label}", "ok", and_list(evidence.kinds))
    _acs(label, evidence, report)
    _links(label, evidence, report)
    _faults(label, evidence, report)
    _cmdline(label, evidence, report)
    _nvlink(label, evidence, report)


def _where(label: str, line: int) -> str:
    return f"{label} line {line}"


def _acs(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    on = [a for a in evidence.acs if a.control & ACS_REDIRECT_MASK]
    if evidence.acs:
        report.check("acs", "problem" if on else "ok", f"{len(evidence.acs)} ACS control word(s) in {label}")
    named = [a for a in on if a.bdf]
    unnamed = [a for a in on if not a.bdf]
    for acs in named:
        report.add(Finding(
            "error", "acs-redirect",
            f"ACS redirect is on at PCIe bridge {acs.bdf}: peer-to-peer traffic through it is sent up to the root "
            "complex instead of straight across: slow copies, hangs or wrong data (NVIDIA/nccl#2079, #606).",
            evidence=[f"{_where(label, acs.line)}: ACS control 0x{acs.control:04x} ({AcsState('read', acs.control).words()})"],
            effect="P2P between GPUs on different sides of this bridge",
            fix=f"disable ACS in the BIOS, or at every boot `sudo setpci -s {shell_word(acs.bdf)} ECAP_ACS+6.w=0000`, "
                f"or boot with `pci=disable_acs_redir={shell_word(acs.bdf)}`"
                + setpci_loop(sorted({a.bdf for a in named if a.bdf}))))
    if unnamed:
        report.add(Finding(
            "error", "acs-redirect",
            f"ACS redirect is on at {len(unnamed)} device(s) in {label}, which does not say which ones (a grepped "
            "paste): peer-to-peer traffic through them goes up to the root complex: slow, hangs or wrong data.",
            evidence=[f"{_where(label, a.line)}: {a.text}" for a in unnamed[:6]],
            effect="P2P between GPUs below those bridges",
            fix="find them with `sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'`, then per bridge "
                "`sudo setpci -s <bdf> ECAP_ACS+6.w=0000` (every boot), or disable ACS in the BIOS"))


def _links(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    for pasted in evidence.links:
        link, who = pasted.link, pasted.bdf or "a device (not named in the paste)"
        gpu = pasted.bdf if pasted.bdf in report.gpus else None  # a GPU of the topology given with --topology
        if gpu is not None:
            who = report.label(gpu)
        if link.width_below_max:  # a GPU's pairs all copy through its narrow link
            narrow_link(report, who, link.current_width, link.max_width, below=[gpu] if gpu else [], affected=who,
                        evidence=[f"{_where(label, pasted.line)}: {pasted.text}"])
        if link.speed_below_max:
            slow_link(report, who, gts_to_gen(link.current_speed_gts), gts_to_gen(link.max_speed_gts),  # no state in a paste
                      gpus=report.indices([gpu]) if gpu else [], bdf=pasted.bdf,
                      evidence=[f"{_where(label, pasted.line)}: {pasted.text}"])


def _faults(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    if evidence.iommu_faults:
        total = sum(evidence.iommu_faults.values())
        report.add(Finding(
            "error", "iommu-fault",
            f"The IOMMU refused {total} DMA(s) from {and_list(sorted(evidence.iommu_faults))}: it translates the GPUs' "
            "DMA and peer or host copies hit unmapped addresses: hangs, crashes or wrong data.",
            evidence=[f"{label}: {evidence.iommu_fault_example}"],
            effect="P2P and DMA of those devices",
            fix=IOMMU_FIX))
    grouped: dict[tuple[str, int], list[str]] = {}
    for pci, code, line in evidence.xids:
        grouped.setdefault((pci, code), []).append(line)
    for (pci, code), lines in grouped.items():
        times = f" ({len(lines)} times)" if len(lines) > 1 else ""
        report.add(Finding(
            "error", f"xid-{code}",
            f"The NVIDIA driver logged Xid {code} for the GPU at PCI {pci}{times}: "
            f"{XID_MEANING.get(code, 'see NVIDIA Xid catalogue')}.",
            evidence=[f"{label}: {lines[0]}"],
            fix="look up the Xid in NVIDIA's Xid catalogue; 79: reseat, check power and riser, update the BIOS"))
    for bdf in evidence.fallen_off_bus:
        report.add(Finding(
            "error", "gpu-fallen-off-bus",
            f"GPU {bdf} fell off the bus (Xid 79 class): its PCIe link was lost.",
            evidence=[f"{label}: NVRM: ... {bdf} ... fallen off the bus"],
            effect=f"every job on {bdf} until it is reset",
            fix="check power cables and PSU headroom, reseat the card and riser, watch temperatures, update the BIOS"))


def _cmdline(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    if evidence.cmdline is None:
        return
    options = cmdline_iommu(evidence.cmdline)
    shown = " ".join(f"{k}={v}" for k, v in options.items()) or "no IOMMU option"
    said = passthrough_or_off(options)
    if said is not None:
        report.check("iommu (cmdline)", "ok", f"{shown}: {'passthrough' if said == 'passthrough' else 'IOMMU off'}")
    elif "on" in (options.get("intel_iommu"), options.get("amd_iommu")):
        report.add(Finding(
            "warning", "iommu-translating",
            "The kernel was booted with the IOMMU on and without `iommu=pt`: it translates every GPU DMA, which can "
            "make peer-to-peer copies hang, run slowly or deliver zeros (NVIDIA/nccl#257, pytorch#84803).",
            evidence=[f"{label}: {shown}"], effect="P2P between every pair of GPUs", fix=IOMMU_FIX))
    else:
        report.check("iommu (cmdline)", "not-made",
                     f"{shown}: the kernel's default applies, which the command line alone does not show; "
                     "read /sys/kernel/iommu_groups/*/type (DMA or DMA-FQ: translating; identity: passthrough)")


def _nvlink(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    for gpu, states in sorted(evidence.nvlink_states.items()):
        down = sorted(link for link, up in states.items() if not up)
        if down and any(states.values()):
            report.add(Finding(
                "warning", "nvlink-inactive",
                f"GPU {gpu} has {len(down)} of {len(states)} NVLinks inactive (link {and_list([str(n) for n in down])}): "
                "a bridge not seated or a failed link, unless this board wires only some links.",
                gpus=[gpu],
                evidence=[f"{label}: GPU {gpu} Link {n}: <inactive>" for n in down[:6]],
                effect=f"NVLink bandwidth of every pair with GPU {gpu}",
                fix="compare with a healthy node of the same model; reseat the bridge or have the board checked"))
