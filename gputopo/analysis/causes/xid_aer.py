"""The GPU or its PCIe link failing, as a pasted kernel log says it (``check_kernel_log``;
``gputopo.sources.evidence.pasted_kernel`` read it): the NVIDIA driver's Xids (by the cause the
driver names where it names one), GPUs fallen off the bus, and PCIe AER errors.

AER: an uncorrected error is an error (the link or the device failed; a fatal one resets the link,
and a GPU below it is lost until reset); a corrected one is a warning (the link retried, which costs
bandwidth, and many of them mark a marginal link). Each is said for the device that reported it, as
the log names it (a port above a GPU, or the GPU); the log does not say which GPUs sit below a port.

A pasted ``lspci -vvv`` shows the same AER capability's correctable error status (CESta): link
errors set there are ``pcie-errors-logged`` (``check_lspci_error_status``). The IOMMU faults a kernel
log shows are ``iommu``'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list, at_line
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.evidence.pasted_evidence import PastedAer, PastedEvidence, PastedXid

NVLINK_XIDS = frozenset({74, *range(144, 151)})

# NVIDIA's Xid catalog (https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html): Xids 144-150 are the
# NVLink5 blocks of Blackwell GPUs (B100, GB200), each resolved by decoding its intrInfo and errorStatus
# (WORKFLOW_NVLINK5_ERR); Xid 137 (NVLINK_PRIV_ERR) is a fault the remote MMU reported, "such as when an illegal
# NVLink peer-to-peer access is made": typically the application's bug, immediate action IGNORE (XID_137_FLOW).
NVLINK5_BLOCKS = {144: "SAW", 145: "RLW", 146: "TLW", 147: "TREX", 148: "NVLPW_CTRL", 149: "NETIR", 150: "MSE"}
NVLINK_PRIV_XID = 137
CATALOG = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

ECC_XIDS = frozenset({48, 63, 64, 94, 95})
# Xids NVIDIA's catalog puts on the application first (its action: restart the application): alone, with no
# earlier Xid the driver names as their cause, they are a warning of the job, not an error of the GPU.
APPLICATION_XIDS = frozenset({13, 31, 43})

XID_MEANING = {
    13: "a graphics engine exception (most often the application's own fault)",
    31: "a GPU memory page fault (with IOMMU faults: a DMA the IOMMU refused)",
    32: "an invalid or corrupted push buffer stream (driver error, system memory corruption, a PCIe bus error)",
    43: "the GPU stopped processing (an application fault, most often not the hardware)",
    45: "the driver's cleanup of the GPU's work after an earlier error (the cause is the Xid before it)",
    48: "a double-bit ECC error",
    63: "an ECC page retirement or row remapping",
    64: "an ECC page retirement or row remapping that failed",
    74: "an NVLink error",
    79: "the GPU fell off the bus (PCIe link lost: power, slot, riser or overheating)",
    94: "a contained ECC error (the application was stopped; the GPU goes on)",
    95: "an uncontained ECC error (the GPU needs a reset)",
    119: "a GSP firmware timeout",
    NVLINK_PRIV_XID: ("an NVLink privilege error: a fault the remote GPU's MMU reported, such as an illegal NVLink "
                      "peer-to-peer access (NVIDIA's Xid catalog: typically the application's bug, sometimes the "
                      "driver's or the hardware's)"),
    154: "the GPU's recovery action changed (it names what the other Xids of the event need)",
}

FALLEN_FIX = "check power cables and PSU headroom, reseat the card and riser, watch temperatures, update the BIOS"


def check_kernel_log(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A pasted kernel log: Xids, GPUs fallen off the bus, AER errors (an Xid 79 that follows a fatal
    AER error is said as its consequence)."""
    _xids(label, evidence.xids, report)
    for bdf in evidence.fallen_off_bus:
        report.add(Finding(
            "error", "gpu-fallen-off-bus",
            f"GPU {bdf} fell off the bus (Xid 79 class): its PCIe link was lost.",
            evidence=[f"{label}: NVRM: ... {bdf} ... fallen off the bus"],
            effect=f"every job on {bdf} until it is reset",
            fix=FALLEN_FIX))
    _aer(label, evidence, report)
    _fell_after_aer(evidence, report)


def check_lspci_error_status(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
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
            evidence=[f"{at_line(label, line)}: {text}" for _, _, line, text in seen[:3]],
            effect=f"copies through the link of {who}",
            fix="clear the bits and read them again under load (`sudo setpci -s <bdf> ECAP_AER+10.l=ffffffff`, then "
                "`sudo lspci -vvv -s <bdf> | grep CESta`); reseat the card and its riser or cable, try another slot; "
                "as a test, boot with `pcie_aspm=off`"))


def xid_meaning(code: int) -> str:
    if code in XID_MEANING:
        return XID_MEANING[code]
    if code in NVLINK5_BLOCKS:
        return f"an NVLink error in the GPU's {NVLINK5_BLOCKS[code]} block (NVLink5: Blackwell GPUs)"
    if code in NVLINK_XIDS:
        return "an NVLink error"
    return "see NVIDIA's Xid catalogue"


PRIV_FIX = ("the Xid itself needs no reset (the catalog's immediate action: none); find the access: run the application "
            "under `compute-sanitizer --tool memcheck` or `cuda-gdb` (or with `CUDA_DEVICE_WAITS_ON_EXCEPTION=1`, then "
            "attach cuda-gdb); if they find nothing, report it to NVIDIA (a driver or hardware fault)")


def _xid_fix(code: int) -> str:
    if code in NVLINK5_BLOCKS:
        return ("decode the Xid's intrInfo and errorStatus (the first two numbers in its parentheses) with the \"XID "
                f"144-150 Decode\" sheet of NVIDIA's Xid catalog ({CATALOG}): it gives the action (none, restart the "
                "application, reset the GPU); where the log has an Xid 154 (recovery action changed to Drain P2P, Drain "
                "and Reset, GPU Reset Required or Node Reboot Required), do that: drain the GPU's jobs before a reset; "
                "`nvidia-smi nvlink -e` shows the links' error counters; errors that come back go to NVIDIA or the "
                "system's vendor (its service flow decides a replacement)")
    if code == NVLINK_PRIV_XID:
        return PRIV_FIX
    if code in NVLINK_XIDS:
        return ("check the NVLinks: `nvidia-smi nvlink -s` and `nvidia-smi nvlink -e` (links down, counters growing); "
                "reseat the NVLink bridge (PCIe cards) or have the baseboard or NVSwitch tray checked; on NVSwitch "
                "systems read the Fabric Manager log")
    if code == 79:
        return FALLEN_FIX
    if code in APPLICATION_XIDS:
        return ("most often the application's own fault: restart it, and debug it under `compute-sanitizer` or "
                "`cuda-gdb`; the GPU is suspect only where Xids recur with different applications (then `dcgmi diag`)")
    if code in ECC_XIDS:
        return ("check `nvidia-smi -q -d ECC,ROW_REMAPPER`: a GPU with remapping pending needs a reset; errors that "
                "come back need the GPU replaced")
    return "look the Xid up in NVIDIA's Xid catalogue (https://docs.nvidia.com/deploy/xid-errors/)"


def _fell_after_aer(evidence: PastedEvidence, report: DoctorReport) -> None:
    """An Xid 79 of a GPU the same log shows not recovering from a fatal AER error is that error's
    consequence: one event, said once as such (the AER finding names the port and the fix)."""
    aer = next((f for f in report.findings if f.code == "pcie-aer-uncorrected"), None)
    if aer is None:
        return
    lost = {bdf.rsplit(".", 1)[0] for bdf in evidence.not_recovered}  # 0000:02:00.0 -> the driver's 0000:02:00
    for finding in report.findings:
        xids = [x for x in evidence.xids if x.code == 79 and x.pci in lost]
        if finding.code == "xid-79" and xids and id(finding) not in report.causes:
            finding.message += (" It follows the fatal PCIe error in this log that the GPU could not recover from "
                                "(see pcie-aer-uncorrected): one event, fixed there.")
            report.causes[id(finding)] = aer


def _cause_class(cause: int | None) -> int | str | None:
    """Causes fixed the same way are one class: every NVLink Xid is the NVLink."""
    return "nvlink" if cause in NVLINK_XIDS else cause


def _causes_meaning(causes: list[int]) -> str:
    """What the earlier Xids an Xid names mean: one, or several NVLink5 blocks together."""
    blocks = [NVLINK5_BLOCKS[c] for c in causes if c in NVLINK5_BLOCKS]
    if len(blocks) > 1 and len(blocks) == len(causes):
        return f"NVLink errors in the GPU's {and_list(blocks)} blocks (NVLink5: Blackwell GPUs)"
    return xid_meaning(causes[0])


def _same_event(xids: list[PastedXid]) -> dict[int, PastedXid]:
    """Each Xid 137 that an NVLink5 Xid (144-150) of the same GPU reports with it: both lines name the same
    unit on the same link (``145, RLW_RXPIPE Nonfatal ... Link 11`` and ``137, RLW_RXPIPE interrupt hit on link
    11``), one interrupt logged twice (inferred from the lines; the catalog does not link them). By the 137's id."""
    blocks = {(x.pci, x.unit, x.link): x for x in xids
              if x.code in NVLINK5_BLOCKS and x.unit is not None and x.link is not None}
    return {id(x): blocks[(x.pci, x.unit, x.link)] for x in xids
            if x.code == NVLINK_PRIV_XID and (x.pci, x.unit, x.link) in blocks}


def _xids(label: str, xids: list[PastedXid], report: DoctorReport) -> None:
    """One finding per Xid and class of named cause, naming every GPU that logged it (one NVLink
    event that made four GPUs clean up is one problem, not four); a consequence (Xid 45 after an
    NVLink Xid) is said with its cause, and fixed as the cause is. An Xid 137 that an NVLink5 Xid
    reports with it is said in that Xid's finding: the illegal access it names is the event's cause."""
    joined = _same_event(xids)
    # the NVLink5 Xids a 137 joins (its GPU, unit and link, any repeat): that event's; the rest stand alone
    partners = {(p.code, p.pci, p.unit, p.link) for p in joined.values()}
    grouped: dict[tuple[int, int | str | None], dict[str | None, list[PastedXid]]] = {}
    paired: dict[tuple[int, int | str | None], dict[str | None, list[PastedXid]]] = {}
    privileged: dict[tuple[int, int | str | None], list[PastedXid]] = {}
    for xid in xids:
        if id(xid) in joined:
            partner = joined[id(xid)]
            privileged.setdefault((partner.code, _cause_class(partner.cause)), []).append(xid)
            continue
        into = paired if (xid.code, xid.pci, xid.unit, xid.link) in partners else grouped
        into.setdefault((xid.code, _cause_class(xid.cause)), {}).setdefault(xid.pci, []).append(xid)
    for key, by_gpu in paired.items():
        if key in privileged:
            _nvlink_with_privilege_error(label, by_gpu, privileged[key], report)
        else:  # a repeat of the partner with another named cause: said as such
            for pci, seen in by_gpu.items():
                grouped.setdefault(key, {}).setdefault(pci, []).extend(seen)
    for key, by_gpu in grouped.items():
        code = key[0]
        causes = sorted({xid.cause for seen in by_gpu.values() for xid in seen if xid.cause is not None})
        who = _who_logged(by_gpu)
        if causes:
            earlier = f"an earlier Xid {causes[0]}" if len(causes) == 1 else f"earlier Xids {and_list([str(c) for c in causes])}"
            caused = f", caused (the driver says) by {earlier}: {_causes_meaning(causes)}. Xid {code} is "
        else:
            caused = ": "
        report.add(Finding(
            "warning" if code in APPLICATION_XIDS and not causes else "error", f"xid-{code}",
            f"The NVIDIA driver logged Xid {code} for {who}{caused}{xid_meaning(code)}.",
            evidence=[f"{label}: {seen[0].text}" for seen in list(by_gpu.values())[:4]],
            fix=_xid_fix(causes[0] if causes else code)))


def _nvlink_with_privilege_error(label: str, by_gpu: dict[str | None, list[PastedXid]], priv: list[PastedXid],
                                 report: DoctorReport) -> None:
    """An NVLink5 Xid and the Xid 137 logged with it (same GPU, unit and link): one event, its cause the illegal
    peer access the 137 reports (by the catalog, typically the application's), fixed as the 137 is."""
    first = next(x for seen in by_gpu.values() for x in seen)
    code = first.code
    fatal = {x.fatal for seen in by_gpu.values() for x in seen}
    how = "which the driver calls fatal" if fatal == {True} else "which the driver calls non-fatal" if fatal == {False} else ""
    place = and_list(sorted({f"{x.unit} on link {x.link}" for x in priv}))
    report.add(Finding(
        "error", f"xid-{code}",
        f"The NVIDIA driver logged Xid {code} (NVLink5, the GPU's {NVLINK5_BLOCKS[code]} block) and Xid {NVLINK_PRIV_XID} for {_who_logged(by_gpu)}: "
        f"both name {place}, one event (inferred from the lines). Its cause is what Xid {NVLINK_PRIV_XID} reports, "
        f"{xid_meaning(NVLINK_PRIV_XID)}; Xid {code} is the NVLink {NVLINK5_BLOCKS[code]} block logging it"
        f"{', ' + how if how else ''}.",
        evidence=[f"{label}: {x.text}" for x in ([seen[0] for seen in by_gpu.values()][:3] + priv[:1])],
        fix=(PRIV_FIX + f"; to be sure Xid {code} asks for no more, decode its intrInfo and errorStatus with the \"XID "
             f"144-150 Decode\" sheet of NVIDIA's Xid catalog ({CATALOG}) and follow an Xid 154 where one is logged")))


def _who_logged(by_gpu: dict[str | None, list[PastedXid]]) -> str:
    """The GPUs that logged one Xid, as their addresses (with counts); lines whose address the paste
    hides (``PCI:...``) as a GPU it does not name, never as an address."""
    def times(seen: list[PastedXid]) -> str:
        return f" ({len(seen)} times)" if len(seen) > 1 else ""

    places = [f"{pci}{times(seen)}" for pci, seen in by_gpu.items() if pci is not None]
    named = (f"the GPU at PCI {places[0]}" if len(places) == 1 else f"{len(places)} GPUs, at PCI {and_list(places)}"
             if places else "")
    hidden = by_gpu.get(None)
    if not hidden:
        return named
    unnamed = f"a GPU whose PCI address the paste does not show{times(hidden)}"
    return f"{named} and {unnamed}" if named else unnamed


def _who(aer: PastedAer) -> str:
    kind = "port" if aer.driver == "pcieport" else "NVIDIA GPU" if aer.driver == "nvidia" else f"device ({aer.driver})"
    return f"PCIe {kind} {aer.bdf}"


def _aer(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    by_device: dict[tuple[str, bool], list[PastedAer]] = {}
    for aer in evidence.aer:
        by_device.setdefault((aer.bdf, aer.corrected), []).append(aer)
    lost = sorted(evidence.not_recovered)
    for (bdf, corrected), errors in by_device.items():
        layers = and_list(sorted({e.layer for e in errors}))
        severities = and_list(sorted({e.severity for e in errors}))
        below = (f"every device below {bdf}" if errors[0].driver == "pcieport" else bdf)
        if corrected:
            report.add(Finding(
                "warning", "pcie-aer-corrected",
                f"{_who(errors[0])} logged {len(errors)} corrected AER error(s) ({layers}): the link recovered each by "
                "retrying, which costs bandwidth; many of them mark a marginal link (riser, slot, power, or the "
                "link's power saving, ASPM).",
                evidence=[f"{label} line {e.line}: {e.text}" for e in errors[:3]],
                effect=f"copies to and from {below}",
                fix="watch whether they keep coming under load (`sudo dmesg -w`); reseat the card and its riser, try "
                    "another slot; as a test, boot with `pcie_aspm=off`"))
            continue
        gone = f" {and_list(lost)} could not recover (a driver without AER recovery): lost until reset or reboot." if lost else ""
        lost = []  # said once, with the first uncorrected error
        report.add(Finding(
            "error", "pcie-aer-uncorrected",
            f"{_who(errors[0])} logged {len(errors)} {severities} AER error(s) ({layers}): the link or the device "
            f"failed; a fatal error resets the link, and a GPU below it is lost (it falls off the bus).{gone}",
            evidence=[f"{label} line {e.line}: {e.text}" for e in errors[:3]],
            effect=f"every job using {below}",
            fix="reseat the GPU and its riser, check its power cables, try another slot, update the BIOS; a port that "
                "keeps logging errors points to the slot, the riser or the board"))
    if lost:
        report.add(Finding(
            "error", "pcie-aer-not-recovered",
            f"{and_list(lost)} could not recover from a PCIe error (a driver without AER recovery): lost until reset "
            "or reboot; the error itself is not in the paste.",
            evidence=[f"{label}: {evidence.not_recovered[bdf]}" for bdf in lost[:3]],
            effect=f"every job on {and_list(lost)}",
            fix=FALLEN_FIX))

