"""Whether the IOMMU translates the GPUs' DMA (``iommu-translating``) and what it refused
(``iommu-fault``), whichever door the evidence came through: this host's (or an archive's) IOMMU
groups and kernel command line (``check_host``), a pasted kernel log or ``/proc/cmdline``: what the
kernel says it did (``Default domain type``) first, then what it was asked (``check_cmdline``), a
pasted GRUB config, worded as a configuration, not the running host (``check_grub``), and the DMA
faults a pasted kernel log shows (``check_kernel_log``). ``iommu_translating`` is the one wording,
whoever read it; its fix names only the IOMMU the evidence shows (Intel's or AMD's), and keeps the
IOMMU on where the command line passes devices to VMs. ACS that an IOMMU turned on is ``acs``'s
(``caused_by`` this finding)."""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.evidence.health import HealthEvidence
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.host_health import HostHealth

TRANSLATING = ("DMA", "DMA-FQ")

IOMMU_FIX = ("boot with `iommu=pt` (keeps the IOMMU for VMs, passes host devices through), or turn it off with "
             "`intel_iommu=off` / `amd_iommu=off` (or in the BIOS: VT-d / AMD-Vi / IOMMU); e.g. add it to "
             "GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot")

GROUP_TYPES = "read /sys/kernel/iommu_groups/*/type (DMA or DMA-FQ: translating; identity: passthrough)"


def check_host(evidence: HealthEvidence, host: HostHealth, report: DoctorReport) -> None:
    """This host's (or an archive's) IOMMU groups and their ``type`` files, else its kernel command line:
    which GPUs' DMA the IOMMU translates (NVLink pairs spared)."""
    options = cmdline_iommu(host.cmdline)
    booted = " ".join(f"{k}={v}" if v else k for k, v in options.items()) or "no IOMMU option"
    if not host.iommu_group_of:
        # The folder exists and is empty: no IOMMU is active. Missing (an archive or root without it):
        # not known, unless the command line turned the IOMMU off or to passthrough.
        said = passthrough_or_off(host.cmdline)
        report.iommu = "off" if host.iommu_groups is not None else said
        if host.iommu_groups is not None:
            report.check("iommu", "ok", "no IOMMU groups: no IOMMU is active")
        elif said is not None:
            report.check("iommu", "ok", f"the kernel command line sets the IOMMU {said} ({booted})")
        else:
            report.check("iommu", "not-made", "/sys/kernel/iommu_groups was not read (missing here), and the kernel "
                         "command line does not turn the IOMMU off or to passthrough")
        return
    grouped = {bdf: host.iommu_group_of[bdf] for bdf in evidence.gpu_bdfs if bdf in host.iommu_group_of}
    kinds = {bdf: (host.iommu_groups or {}).get(group) for bdf, group in grouped.items()}
    translated = {bdf: grouped[bdf] for bdf, kind in kinds.items() if kind in TRANSLATING}
    evidence_lines = [f"/sys/kernel/iommu_groups/{group}/type: {(host.iommu_groups or {})[group]}"
                      for group in sorted(set(translated.values()), key=lambda g: (len(g), g))][:8]
    untyped = sorted(bdf for bdf, kind in kinds.items() if kind is None)
    if untyped and not translated:  # kernels before 5.11 have no `type` file: the command line decides
        said = passthrough_or_off(host.cmdline)
        if said is None and switched_on(options):
            translated = {bdf: grouped[bdf] for bdf in untyped}
            evidence_lines = [f"/sys/kernel/iommu_groups/{grouped[untyped[0]]}: no type file (Linux before 5.11)"]
        elif said is None:
            report.check("iommu", "not-made", f"{and_list(untyped)} are in IOMMU groups without a type file (Linux "
                         "before 5.11) and /proc/cmdline does not say passthrough: see `dmesg | grep -e DMAR -e AMD-Vi`")
            return
    if not translated:
        report.iommu = "passthrough" if "identity" in kinds.values() or passthrough_or_off(host.cmdline) == "passthrough" else None
        report.check("iommu", "ok", "passthrough or no IOMMU")
        return
    report.check("iommu", "problem", f"{len(translated)} GPU(s) behind a translating IOMMU")
    nvlinked = evidence.nvml.nvlink_pairs() if evidence.nvml is not None else set()
    iommu_translating(report, f"The IOMMU translates the DMA of {and_list([report.label(b) for b in sorted(translated)])}",
                      sorted(translated), [*evidence_lines, f"/proc/cmdline: {booted}"], vendor(options, None),
                      spared=nvlinked)


def check_cmdline(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
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


def check_grub(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A GRUB config is what the next boot will use: it is judged only where no booted command line
    (``/proc/cmdline``, dmesg's) is in the paste, and worded as a configuration."""
    grub = evidence.facts.grub_cmdline
    if grub is None or evidence.cmdline is not None or evidence.default_domain is not None:
        return
    value, said = grub
    options = cmdline_iommu(value)
    booted = " ".join(f"{k}={v}" for k, v in options.items()) or "no IOMMU option"
    mode = passthrough_or_off(value)
    unproven = "whether the running kernel booted with it, `cat /proc/cmdline` shows"
    if mode is not None:
        report.check("iommu (GRUB config)", "ok", f"{booted}: {'passthrough' if mode == 'passthrough' else 'IOMMU off'}"
                     f" ({unproven})")
    elif switched_on(options):
        iommu_translating(report, "The GRUB configuration boots the kernel with the IOMMU on and without `iommu=pt`, "
                          f"so it would translate every GPU DMA ({unproven})", [],
                          [f"{label} line {said.line}: {said.text}"], None)
    else:
        report.check("iommu (GRUB config)", "not-made",
                     f"{booted}: the kernel's default applies, which the configuration does not show; read "
                     "/sys/kernel/iommu_groups/*/type")


def check_kernel_log(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """``iommu-fault``: the DMAs a pasted kernel log shows the IOMMU refusing."""
    if evidence.iommu_faults:
        total = sum(evidence.iommu_faults.values())
        report.add(Finding(
            "error", "iommu-fault",
            f"The IOMMU refused {total} DMA(s) from {and_list(sorted(evidence.iommu_faults))}: it translates the GPUs' "
            "DMA and peer or host copies hit unmapped addresses: hangs, crashes or wrong data.",
            evidence=[f"{label}: {evidence.iommu_fault_example}"],
            effect="P2P and DMA of those devices",
            fix=iommu_fix("amd" if "AMD-Vi" in (evidence.iommu_fault_example or "") else
                          "intel" if "DMAR" in (evidence.iommu_fault_example or "") else None)))


def iommu_translating(report: DoctorReport, what: str, bdfs: list[str], evidence: list[str], which: str | None,
                      spared: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()) -> None:
    """``iommu-translating``, whoever read it (sysfs's group types, a pasted command line or dmesg):
    ``what`` the IOMMU was seen doing, ``bdfs`` the GPUs it translates for (every GPU known where the
    evidence names none). Its fix becomes the complete one where it also turned ACS on (``acs``)."""
    report.iommu, report.iommu_vendor = "translating", which
    pairs = [(a, b) for a, b in combinations(sorted(bdfs), 2) if (a, b) not in spared]  # NVLink pairs spared
    for a, b in pairs:
        report.mark_pair(a, b, "iommu")
    report.add(Finding(
        "warning", "iommu-translating",
        f"{what}: peer-to-peer copies between GPUs can hang, run slowly or silently deliver zeros (NVIDIA/nccl#257 "
        "with tensorflow#32654, pytorch#84803).",
        gpus=report.indices(bdfs),
        evidence=evidence,
        effect=("P2P over PCIe between " + (f"{and_list([report.label(b) for b in sorted(bdfs)])}" if bdfs else
                                            "every pair of GPUs (the evidence names no GPU)")
                + " (pairs joined by NVLink are spared) and GPUDirect RDMA"),
        fix=(f"boot with `iommu=pt` (passes host devices through); keep the IOMMU on: the command line passes devices "
             f"to VMs (`{report.vfio}`); e.g. add it to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, "
             "reboot" if report.vfio else iommu_fix(which))), pairs)


def cmdline_iommu(cmdline: str | None) -> dict[str, str]:
    """The IOMMU and ACS options on a kernel command line: ``{"iommu": "pt", "intel_iommu": "on", ...}``."""
    options: dict[str, str] = {}
    for token in (cmdline or "").split():
        name, _, value = token.partition("=")
        if name in ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough"):
            options[name] = value
        if name == "pci" and ("noacs" in value or "disable_acs_redir" in value):
            options["pci"] = value
    return options


def iommu_fix(which: str | None) -> str:
    """``IOMMU_FIX`` for the IOMMU the evidence names (``intel`` / ``amd``): only its own off switch."""
    off = {"intel": "`intel_iommu=off` (or VT-d off in the BIOS)",
           "amd": "`amd_iommu=off` (or AMD-Vi / IOMMU off in the BIOS)"}.get(which or "")
    return IOMMU_FIX if off is None else (
        "boot with `iommu=pt` (keeps the IOMMU for VMs, passes host devices through), or turn it off with "
        f"{off}; e.g. add it to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot")


def cmdline_vfio(cmdline: str | None) -> str | None:
    """The command line's ``vfio-pci.ids=...`` (devices bound to vfio-pci for VMs), None where it has none."""
    return next((t for t in (cmdline or "").split() if t.partition("=")[0] in ("vfio-pci.ids", "vfio_pci.ids")), None)


def passthrough_or_off(cmdline: str | None) -> str | None:
    """``"passthrough"`` / ``"off"`` where the kernel command line says so, else None. The kernel
    reads its parameters in order: ``iommu=pt`` / ``iommu=nopt`` and ``iommu.passthrough=<bool>``
    set one default (the DMA domain type), so the last one given wins (``iommu=pt ...
    iommu.passthrough=0`` translates); ``iommu=off``, ``intel_iommu=off`` or ``amd_iommu=off`` turn
    the IOMMU off whatever that default. ``iommu=`` and the vendor options take comma lists."""
    passthrough: bool | None = None
    off = False
    for token in (cmdline or "").split():
        name, _, value = token.partition("=")
        words = value.split(",")
        if name == "iommu":
            for word in words:
                passthrough = True if word == "pt" else False if word == "nopt" else passthrough
            off = off or "off" in words
        elif name == "iommu.passthrough":
            passthrough = _kernel_bool(value, passthrough)
        elif name in ("intel_iommu", "amd_iommu"):
            off = off or "off" in words
    if off:  # off whatever the default domain type
        return "off"
    return "passthrough" if passthrough else None


def switched_on(options: dict[str, str]) -> bool:
    """Whether ``intel_iommu=`` or ``amd_iommu=`` says ``on`` (alone or in a list: ``on,sm_on``)."""
    return any("on" in options.get(name, "").split(",") for name in ("intel_iommu", "amd_iommu"))


def _kernel_bool(value: str, before: bool | None) -> bool | None:
    """The kernel's ``kstrtobool``: 1/y/t true, 0/n/f false, on/off (any case); else the value is
    refused and the setting stays as it was."""
    word = value.lower()
    if word[:1] in ("1", "y", "t") or word[:2] == "on":
        return True
    if word[:1] in ("0", "n", "f") or word[:2] == "of":
        return False
    return before


def vendor(options: dict[str, str], seen_at_work: str | None) -> str | None:
    """``intel`` / ``amd``: which IOMMU the command line or a kernel line names, else None."""
    if "intel_iommu" in options or (seen_at_work and "DMAR" in seen_at_work):
        return "intel"
    if "amd_iommu" in options or (seen_at_work and "AMD-Vi" in seen_at_work):
        return "amd"
    return None

