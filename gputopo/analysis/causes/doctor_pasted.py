"""Doctor's reading of pasted evidence (``doctor --from lspci.txt|dmesg.txt|cmdline.txt|nvlink.txt``):
the same causes as the live checks, from what the text shows and no more (a grepped ``ACSCtl`` line
does not say which bridge it was). Here: ACS, PCIe links and whether the IOMMU translates; what a
kernel log says is ``doctor_dmesg``, what nvidia-smi text says ``doctor_smi_pasted``."""

from __future__ import annotations

from gputopo.analysis.causes.doctor_acs import NO_BUS_IDS, acs_redirect, acs_words, gpus_in_range, pairs_hit
from gputopo.analysis.causes.doctor_common import DoctorReport, and_list, gts_to_gen
from gputopo.analysis.causes.doctor_dmesg import kernel_log_checks
from gputopo.analysis.causes.doctor_host import (
    cmdline_iommu,
    cmdline_vfio,
    iommu_translating,
    passthrough_or_off,
    switched_on,
    vendor,
)
from gputopo.analysis.causes.doctor_links import link_limited_at_boot, narrow_link, slow_link
from gputopo.analysis.causes.doctor_paste_cuda import cuda_paste_checks
from gputopo.analysis.causes.doctor_paste_host import host_paste_checks
from gputopo.analysis.causes.doctor_smi_pasted import fabric_checks, nvlink_checks
from gputopo.model import Finding
from gputopo.sources.evidence.pasted_health import PastedEvidence, PastedLink
from gputopo.sources.host.pcie_health import ACS_REDIRECT_MASK


def pasted_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    if not evidence.kinds:
        report.check(f"recognise {label}", "not-made",
                     "nothing recognised (expected lspci -vvv / -tv, dmesg, /proc/cmdline, nvidia-smi nvlink -s / -e "
                     "or nvidia-smi -q)")
        return
    report.check(f"recognise {label}", "ok", and_list(evidence.kinds))
    report.kernel_release = report.kernel_release or evidence.kernel_release
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
    gpus = sorted(report.gpus)
    for acs in (a for a in on if a.bdf):
        bus_range, port = evidence.bus_ranges.get(acs.bdf), evidence.port_types.get(acs.bdf)
        below = gpus_in_range(gpus, acs.bdf, bus_range)
        why = ("the paste does not show the bridge's buses (lspci -vvv's `Bus: primary=.., secondary=.., "
               "subordinate=..` line)" if bus_range is None else NO_BUS_IDS if not gpus else
               "no GPU the evidence names is on its buses" if not below else "")
        switch = _switch_gpus(evidence, acs.bdf, gpus) if port == "Downstream Port" else None
        acs_redirect(report, acs.bdf, acs.control, [f"{_where(label, acs.line)}: {acs_words(acs.control)}"],
                     pairs=pairs_hit(below, gpus, switch) if below else [], gpus=below, port=port, why_no_pairs=why)
    unnamed = [a for a in on if not a.bdf]
    if unnamed:
        acs_redirect(report, None, max(a.control for a in unnamed), [f"{_where(label, a.line)}: {a.text}" for a in unnamed[:6]],
                     pairs=[], gpus=[], count=len(unnamed),
                     why_no_pairs="the paste does not say which bridges (find them with "
                                  "`sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'`)")


def _switch_gpus(evidence: PastedEvidence, port: str, gpus: list[str]) -> list[str] | None:
    """The GPUs below the switch a downstream port belongs to: below the upstream port whose
    secondary bus is the port's own bus; None where the paste does not show that upstream port."""
    domain, bus = port.split(":")[0], int(port.split(":")[1], 16)
    for bdf, (secondary, _) in evidence.bus_ranges.items():
        if (bdf.split(":")[0] == domain and secondary == bus
                and evidence.port_types.get(bdf) == "Upstream Port"):
            return gpus_in_range(gpus, bdf, evidence.bus_ranges[bdf])
    return None


def _links(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    for down in evidence.links_down:
        report.check(f"pcie link {down.bdf or 'of a device not named in the paste'}", "not-made",
                     f"no link trained ({_where(label, down.line)}: {down.text}): nothing in the slot or the link "
                     "is down, so its width and speed say nothing")
    gpus = sorted(report.gpus)
    for ends in _physical_links(evidence, gpus):
        gpu = next((p.bdf for p in ends if p.bdf in report.gpus), None) or _gpu_below(evidence, ends[0].bdf, gpus)
        pasted = next((p for p in ends if p.bdf == gpu), ends[0])  # the GPU's own reading where the paste has it
        link = pasted.link
        who = report.label(gpu) if gpu else pasted.bdf or "a device (not named in the paste)"
        if len(ends) > 1 or (gpu and pasted.bdf != gpu):
            who += f" (its link to {and_list(sorted(p.bdf for p in ends if p.bdf != gpu)) or 'the port above it'}, " \
                   f"read at {'both ends' if len(ends) > 1 else 'the port'})"
        device = who
        if pasted.limited_at and pasted.limited_at != pasted.bdf:  # the kernel's boot line: the slowest link on its path
            who += f" (limited at boot by the link at {pasted.limited_at})"
        shown = [f"{_where(label, p.line)}: {p.text}" for p in ends]
        below = [gpu] if gpu else gpus_in_range(gpus, pasted.bdf, evidence.bus_ranges.get(pasted.bdf)) if pasted.bdf else []
        if any(p.narrow for p in ends):  # a GPU's pairs all copy through its narrow link
            narrow = next(p.link for p in ends if p.narrow)
            narrow_link(report, who, narrow.current_width, narrow.max_width, below=below,
                        affected=and_list([report.label(b) for b in below]) if below else who, evidence=shown)
        if pasted.slow and pasted.limited_at:  # trained so at boot: the platform's limit or trained down, not idle
            link_limited_at_boot(report, device, gts_to_gen(link.current_speed_gts), gts_to_gen(link.max_speed_gts),
                                 pasted.limited_at, gpus=report.indices(below), evidence=shown)
        elif pasted.slow:  # said too where the link is narrow; no state in a paste; no top where only lspci's mark says it
            slow_link(report, who, gts_to_gen(link.current_speed_gts),
                      gts_to_gen(link.max_speed_gts) if link.max_speed_gts is not None else None,
                      gpus=report.indices(below), bdf=pasted.bdf, evidence=shown)
    _link_errors_logged(label, evidence, report)
    _links_check(label, evidence, report)


def _link_errors_logged(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """``pcie-errors-logged``: a device's correctable error status (CESta) with link errors set."""
    by_device: dict[str | None, list[tuple[str | None, list[str], int, str]]] = {}
    for seen in evidence.link_errors_logged:
        by_device.setdefault(seen[0], []).append(seen)
    for bdf, seen in by_device.items():
        bits = sorted({b for _, set_bits, _, _ in seen for b in set_bits})
        who = report.label(bdf) if bdf in report.gpus else bdf or (
            "a device the paste does not name" if len(seen) == 1 else f"devices the paste does not name ({len(seen)} lines)")
        report.add(Finding(
            "warning", "pcie-errors-logged",
            f"The PCIe correctable error status (CESta) of {who} has {and_list([b + '+' for b in bits])} set: the link has had "
            "receiver, CRC or replay errors since the bits were last cleared, each retried at a cost in bandwidth; "
            "many mark a marginal link (riser, cable, slot, power, or the link's power saving, ASPM).",
            evidence=[f"{_where(label, line)}: {text}" for _, _, line, text in seen[:3]],
            effect=f"copies through the link of {who}",
            fix="clear the bits and read them again under load (`sudo setpci -s <bdf> ECAP_AER+10.l=ffffffff`, then "
                "`sudo lspci -vvv -s <bdf> | grep CESta`); reseat the card and its riser or cable, try another slot; "
                "as a test, boot with `pcie_aspm=off`"))


def _links_check(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """The pcie-links check of the LnkSta lines: made where a line can be judged (its LnkCap, or lspci's
    ok/downgraded marks), never "ok" for lines that show only the current link."""
    if not evidence.links:
        return
    judged = [p for p in evidence.links if p.link.max_width is not None or p.width_mark or p.speed_mark]
    unjudged = len(evidence.links) - len(judged)
    if not judged:
        report.check("pcie-links", "not-made",
                     f"{label} shows {len(evidence.links)} link(s) as they run now (LnkSta) but not what they can do: "
                     "no LnkCap line and no (ok)/(downgraded) mark; paste the whole `sudo lspci -vvv` block of each device")
        return
    problem = any(f.code in ("pcie-link-narrow", "pcie-link-slow") for f in report.findings)
    report.check("pcie-links", "problem" if problem else "ok",
                 f"{len(judged)} link reading(s) (LnkSta, the kernel's boot-time line) in {label}"
                 + ("" if all(p.link.max_width is not None for p in judged) else
                    ", some without their LnkCap line (judged by lspci's own ok/downgraded marks)")
                 + (f"; {unjudged} more without their LnkCap line or marks: not judged" if unjudged else ""))


def _gpu_below(evidence: PastedEvidence, bdf: str | None, gpus: list[str]) -> str | None:
    """The GPU right below port ``bdf``: alone on its secondary bus, which is its last (a GPU's own link)."""
    bus_range = evidence.bus_ranges.get(bdf) if bdf else None
    below = gpus_in_range(gpus, bdf, bus_range) if bdf and bus_range and bus_range[0] == bus_range[1] else []
    return below[0] if len(below) == 1 else None


def _physical_links(evidence: PastedEvidence, gpus: list[str]) -> list[list[PastedLink]]:
    """The pasted LnkSta readings grouped by physical link: a GPU's own reading and that of the port
    right above it (its other end) are one link; every other reading is its own."""
    by_gpu: dict[str, list[PastedLink]] = {}
    alone: list[list[PastedLink]] = []
    for pasted in evidence.links:
        gpu = pasted.bdf if pasted.bdf in gpus else _gpu_below(evidence, pasted.bdf, gpus)
        if gpu is None:
            alone.append([pasted])
        else:
            by_gpu.setdefault(gpu, []).append(pasted)
    return alone + [ends for _, ends in sorted(by_gpu.items())]


GROUP_TYPES = "read /sys/kernel/iommu_groups/*/type (DMA or DMA-FQ: translating; identity: passthrough)"


def _iommu_mode(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """Whether the IOMMU translates GPU DMA: what the kernel says it did (``Default domain type``)
    first, then the command line. A translated default alone is no proof: the kernel prints it
    whether or not an IOMMU is present, so it needs the IOMMU seen at work too."""
    domain = evidence.default_domain
    if evidence.cmdline is None and domain is None:
        return
    options = cmdline_iommu(evidence.cmdline)
    report.vfio = report.vfio or cmdline_vfio(evidence.cmdline)
    booted = " ".join(f"{k}={v}" for k, v in options.items()) or "no IOMMU option"
    said = passthrough_or_off(evidence.cmdline)
    switched = switched_on(options)
    at_work = evidence.iommu_active
    if domain is not None and domain[0] == "passthrough":
        report.iommu = "passthrough"
        report.check("iommu (dmesg)", "ok", f"{domain[1]}: passthrough")
    elif said is not None:
        report.iommu = "off" if said == "off" else "passthrough" if switched or at_work else report.iommu
        report.check("iommu (cmdline)", "ok", f"{booted}: {'passthrough' if said == 'passthrough' else 'IOMMU off'}")
    elif switched or (domain is not None and at_work):
        seen = ([f"{label}: {booted}"] if evidence.cmdline is not None else []) + [
            f"{label}: {line}" for line in (domain[1] if domain else None, at_work) if line]
        iommu_translating(
            report, ("The kernel was booted with the IOMMU on and without `iommu=pt`" if switched else
                     "The kernel's IOMMU translates DMA by default and an IOMMU is at work")
            + ": it translates every GPU DMA", sorted(report.gpus), seen, vendor(options, at_work))
    elif domain is not None:
        report.check("iommu (dmesg)", "not-made",
                     f"{domain[1]}: devices behind an IOMMU have their DMA translated, but the paste shows no IOMMU at "
                     f"work (no `DMAR: IOMMU enabled`, AMD-Vi or iommu group line) and the kernel prints this line "
                     f"without one; {GROUP_TYPES}")
    else:
        report.check("iommu (cmdline)", "not-made",
                     f"{booted}: the kernel's default applies, which the command line alone does not show; {GROUP_TYPES}")
