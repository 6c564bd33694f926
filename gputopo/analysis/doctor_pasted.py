"""Doctor's reading of pasted evidence (``doctor --from lspci.txt|dmesg.txt|cmdline.txt|nvlink.txt``):
the same causes as the live checks, from what the text shows and no more (a grepped ``ACSCtl`` line
does not say which bridge it was). Here: ACS, PCIe links and whether the IOMMU translates; what a
kernel log says is ``doctor_dmesg``, what nvidia-smi text says ``doctor_smi_pasted``."""

from __future__ import annotations

from gputopo.analysis.doctor_common import DoctorReport, and_list, gts_to_gen
from gputopo.analysis.doctor_dmesg import kernel_log_checks
from gputopo.analysis.doctor_host import (
    IOMMU_FIX,
    cmdline_iommu,
    passthrough_or_off,
    switched_on,
)
from gputopo.analysis.doctor_links import narrow_link, slow_link
from gputopo.analysis.doctor_paste_cuda import cuda_paste_checks
from gputopo.analysis.doctor_paste_host import host_paste_checks
from gputopo.analysis.doctor_pcie import setpci_loop
from gputopo.analysis.doctor_smi_pasted import fabric_checks, nvlink_checks
from gputopo.model import Finding
from gputopo.quoting import shell_word
from gputopo.sources.pasted_health import PastedEvidence
from gputopo.sources.pcie_health import ACS_REDIRECT_MASK, AcsState


def pasted_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    if not evidence.kinds:
        report.check(f"recognise {label}", "not-made",
                     "nothing recognised (expected lspci -vvv / -tv, dmesg, /proc/cmdline, nvidia-smi nvlink -s / -e "
                     "or nvidia-smi -q)")
        return
    report.check(f"recognise {label}", "ok", and_list(evidence.kinds))
    _acs(label, evidence, report)
    _links(label, evidence, report)
    kernel_log_checks(label, evidence, report)
    _iommu_mode(label, evidence, report)
    nvlink_checks(label, evidence, report)
    fabric_checks(label, evidence, report)
    host_paste_checks(label, evidence, report)  # env, /dev/shm, GDR, GRUB (doctor_paste_host)
    cuda_paste_checks(label, evidence, report)  # CUDA errors, peer answers, NVML/nvtop/CSV lines (doctor_paste_cuda)


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
    for down in evidence.links_down:
        report.check(f"pcie link {down.bdf or 'of a device not named in the paste'}", "not-made",
                     f"no link trained ({_where(label, down.line)}: {down.text}): nothing in the slot or the link "
                     "is down, so its width and speed say nothing")
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


TRANSLATING = "hang, run slowly or deliver zeros (NVIDIA/nccl#257, pytorch#84803)"
GROUP_TYPES = "read /sys/kernel/iommu_groups/*/type (DMA or DMA-FQ: translating; identity: passthrough)"


def _iommu_mode(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """Whether the IOMMU translates GPU DMA: what the kernel says it did (``Default domain type``)
    first, then the command line. A translated default alone is no proof: the kernel prints it
    whether or not an IOMMU is present, so it needs the IOMMU seen at work too."""
    domain = evidence.default_domain
    if evidence.cmdline is None and domain is None:
        return
    options = cmdline_iommu(evidence.cmdline)
    booted = " ".join(f"{k}={v}" for k, v in options.items()) or "no IOMMU option"
    said = passthrough_or_off(evidence.cmdline)
    switched = switched_on(options)
    if domain is not None and domain[0] == "passthrough":
        report.check("iommu (dmesg)", "ok", f"{domain[1]}: passthrough")
    elif said is not None:
        report.check("iommu (cmdline)", "ok", f"{booted}: {'passthrough' if said == 'passthrough' else 'IOMMU off'}")
    elif switched or (domain is not None and evidence.iommu_active):
        seen = ([f"{label}: {booted}"] if evidence.cmdline is not None else []) + [
            f"{label}: {line}" for line in (domain[1] if domain else None, evidence.iommu_active) if line]
        report.add(Finding(
            "warning", "iommu-translating",
            ("The kernel was booted with the IOMMU on and without `iommu=pt`" if switched else
             "The kernel's IOMMU translates DMA by default and an IOMMU is at work")
            + f": it translates every GPU DMA, which can make peer-to-peer copies {TRANSLATING}.",
            evidence=seen, effect="P2P between every pair of GPUs", fix=IOMMU_FIX))
    elif domain is not None:
        report.check("iommu (dmesg)", "not-made",
                     f"{domain[1]}: devices behind an IOMMU have their DMA translated, but the paste shows no IOMMU at "
                     f"work (no `DMAR: IOMMU enabled`, AMD-Vi or iommu group line) and the kernel prints this line "
                     f"without one; {GROUP_TYPES}")
    else:
        report.check("iommu (cmdline)", "not-made",
                     f"{booted}: the kernel's default applies, which the command line alone does not show; {GROUP_TYPES}")
