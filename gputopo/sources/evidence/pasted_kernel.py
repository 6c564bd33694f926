"""Kernel text users paste, for doctor: ``dmesg`` / ``journalctl -k`` / syslog lines and kernel
command lines (``/proc/cmdline``, dmesg's ``Command line:``).

Read from the log, each as printed:

- IOMMU faults: ``AMD-Vi: Event logged [IO_PAGE_FAULT ...]``, ``DMAR: [DMA Read] ... Request device [...]``;
- ``NVRM: Xid (PCI:0000:44:00): 79, ...`` (with the cause the driver names: ``caused by previous Xid 149``; the
  NVLink unit, link and ``Fatal``/``Nonfatal`` an NVLink Xid names: ``145, RLW_RXPIPE Nonfatal XC0 i0 Link 11``),
  and ``fallen off the bus`` (the GPU named on that line or one of the three before it);
- AER: ``<driver> <bdf>: [AER: ]PCIe Bus Error: severity=..., type=...`` (the device that reported it
  and the driver bound to it) and ``<driver> <bdf>: AER: can't recover`` / ``device has no AER-aware
  driver`` (a device left broken by the error);
- the kernel's boot-time ``... available PCIe bandwidth, limited by 8.0 GT/s PCIe x16 link at <bdf> (capable
  of ... 16.0 GT/s PCIe x16 link)``: the device's link as the slowest link on its path trained at boot;
- the IOMMU's default domain (``iommu: Default domain type: Translated``, which the kernel prints
  whether or not an IOMMU is present) and lines that show an IOMMU at work (``DMAR: IOMMU enabled``,
  ``Adding to iommu group``);
- the command line: dmesg's ``Command line:`` record, a ``BOOT_IMAGE=`` or ``root=`` line, or one line
  of kernel parameters read by shape (``looks_like_kernel_parameters``). A terminal narrower than the
  line wraps it over several lines, cutting words anywhere (``lockdown=confide`` / ``ntiality``): the
  lines after it that are no new record and hold only parameter-shaped words are joined to it as
  they were cut, with nothing between them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.sources.evidence.pasted_evidence import (
    BDF,
    MAX_CMDLINE_CHARS,
    PastedAer,
    PastedEvidence,
    PastedLink,
    PastedXid,
    full_bdf,
    shown,
)
from gputopo.sources.host.pcie_health import LinkState

_BDF_IN = "(" + BDF + ")"
_AMD_VI = re.compile(_BDF_IN + r":?\s+AMD-Vi: Event logged \[IO_PAGE_FAULT")
_AMD_VI_DEVICE = re.compile(r"AMD-Vi: Event logged \[IO_PAGE_FAULT device=" + _BDF_IN)
# Bounded: ``[^\]]*`` ran to the end of a line without ``]`` from every ``DMAR: [DMA Read``.
_DMAR = re.compile(r"DMAR: \[DMA (?:Read|Write)[^\]]{0,200}\] Request device \[" + _BDF_IN + r"\]")
# Numbers are ASCII digits and bounded: int() refuses a number of more than 4300 digits (a traceback).
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\):\s*([0-9]{1,9})\b")
_HEX_PAIR = re.compile(r"[0-9a-f]{2}")
_XID_CAUSE = re.compile(r"caused by previous Xid ([0-9]{1,9})\b")
# What an NVLink Xid's text names right after its number: the unit (``RLW_RXPIPE``), whether the driver calls the
# error fatal, and the link (``Link 11``, ``on link 11``). Bounded words, searched in the rest of the line only.
_XID_UNIT = re.compile(r"\s*([A-Z][A-Z0-9]{1,15}_[A-Z0-9_]{1,32})\b(?:\s+(Fatal|Nonfatal)\b)?")
_XID_LINK = re.compile(r"\b[Ll]ink ([0-9]{1,3})\b")
_FALLEN_GPU = re.compile(r"NVRM: (?:The NVIDIA GPU|GPU at(?: PCI:)?)\s+" + _BDF_IN)
# The driver's name is a word of its own, bounded: ``(\S+) `` searched along a long line without
# spaces would try every start and every length (quadratic: minutes on a 1 MB line).
_DRIVER = r"(?<!\S)(\S{1,64}) "
_AER = re.compile(_DRIVER + _BDF_IN + r": (?:AER: )?PCIe Bus Error: severity=([^,]{1,64}), type=([^,(]{1,64})")
_NOT_RECOVERED = re.compile(_DRIVER + _BDF_IN + r": (?:AER: )?(?:can't recover|device has no AER-aware driver)")
# The kernel's boot-time verdict on a device's link (``pcie_print_link_status``): what the slowest link
# on its path gives against what the device can do, and where that link is. Bounded numbers.
_NUM = r"([0-9]{1,3}(?:\.[0-9]{1,3})?)"
_LIMITED = re.compile(_BDF_IN + r": [0-9.]{1,12} Gb/s available PCIe bandwidth, limited by " + _NUM + r" GT/s PCIe x([0-9]{1,2}) "
                      r"link at " + _BDF_IN + r" \(capable of [0-9.]{1,12} Gb/s with " + _NUM + r" GT/s PCIe x([0-9]{1,2}) link\)")
_DEFAULT_DOMAIN = re.compile(r"iommu: Default domain type: (Translated|Passthrough)")
_IOMMU_ACTIVE = re.compile(r"Adding to iommu group|iommu: Adding device \S+ to group|DMAR: IOMMU enabled|"
                           r"AMD-Vi: Found IOMMU|DMAR: Intel\(R\) Virtualization Technology for Directed I/O")
_LINUX_VERSION = re.compile(r"\bLinux version (\d{1,2}\.\d{1,3}[\w.+~-]{0,60})")  # dmesg's first line: the kernel
_CMDLINE_DMESG = re.compile(r"(?:Kernel c|C)ommand line:\s*(.*)$")
_KERNEL_PARAMETER = re.compile(r"^[a-z][a-z0-9_.-]*(?:=\S*)?$")
# Parameters of the kernel itself (Documentation/admin-guide/kernel-parameters.txt) common enough
# that a line of parameters holds one: a line of lower-case words alone is not taken for a command line.
_KERNEL_KEYS = frozenset({
    "console", "root", "init", "rdinit", "ro", "rw", "quiet", "panic", "reboot", "mitigations", "crashkernel",
    "pci", "iommu", "intel_iommu", "amd_iommu", "nomodeset", "swiotlb", "hugepages", "default_hugepagesz",
    "isolcpus", "nohz_full", "rcu_nocbs", "transparent_hugepage", "selinux", "apparmor", "audit", "earlyprintk",
    "loglevel", "rootfstype", "initrd", "numa_balancing", "processor.max_cstate", "intel_idle.max_cstate",
})
# A line that starts a record of its own: a dmesg time stamp or level, a syslog date, a journal's
# ``kernel:``, a shell prompt, a comment. Such a line never continues a wrapped command line.
_RECORD_START = re.compile(r"^\s*(?:\[|<\d+>|[A-Z][a-z]{2} +\d|\d{4}-\d\d-\d\d|kernel:|[$#%>~\u276f]|[^\s@]+@[^\s@:#$]+[:#$])")
_CONTINUED_WORD = re.compile(r"^(?:[A-Za-z_][\w.-]*(?:=\S*)?|--)$")
_FRAGMENT = re.compile(r"^[\w.,:/=+@-]+$")  # the first word may be the tail of a word cut by the wrap
# A kernel message without its time stamp (``dmesg -t``, ``journalctl -k -o cat``): ``DMAR: IOMMU enabled``
# starts with its subsystem's name and a colon, which no parameter's tail is (a value holds ``=`` before).
_SUBSYSTEM = re.compile(r"^[^\s=]+:$")
MIN_WRAPPED_CHARS = 60  # a line a terminal wrapped filled its width: no terminal is narrower
MAX_WRAPPED_LINES = 32


@dataclass
class KernelLogState:
    """What reading a kernel log line by line carries from one line to the next."""

    recent: list[str] = field(default_factory=list)  # the lines before, up to 3 (a multi-line NVRM message names the GPU first)
    cmdline_open: bool = False  # the last line was the command line taken, or a wrapped part of it
    wrapped: int = 0


def scan_kernel(evidence: PastedEvidence, line: str, number: int, state: KernelLogState) -> None:
    """Read one line of kernel text into ``evidence``."""
    before = state.recent
    state.recent = [*before[-2:], line]
    if state.cmdline_open and evidence.cmdline is not None and _continues(line, before[-1] if before else "", state):
        evidence.cmdline = (evidence.cmdline + line)[:MAX_CMDLINE_CHARS]
        return
    state.cmdline_open = False
    if _scan_faults(evidence, line, number, before):
        return
    if _scan_iommu(evidence, line):
        return
    release = _LINUX_VERSION.search(line[:400])
    if release and evidence.kernel_release is None:
        evidence.kernel_release = release.group(1)
    cmd = _CMDLINE_DMESG.search(line)
    if cmd:
        evidence.add_kind("dmesg")
        if evidence.cmdline is None:
            evidence.cmdline, state.cmdline_open = cmd.group(1).strip()[:MAX_CMDLINE_CHARS], True
        return
    if evidence.cmdline is None and (re.match(r"^\s*(BOOT_IMAGE=|root=)\S*", line) or looks_like_kernel_parameters(line)):
        evidence.add_kind("/proc/cmdline")
        evidence.cmdline, state.cmdline_open = line.strip()[:MAX_CMDLINE_CHARS], True


def _continues(line: str, previous: str, state: KernelLogState) -> bool:
    """Whether ``line`` is the next part of a command line a terminal wrapped (see the module docstring)."""
    words = line.split()
    if (not words or len(previous.rstrip()) < MIN_WRAPPED_CHARS or state.wrapped >= MAX_WRAPPED_LINES
            or _RECORD_START.match(line) or not _FRAGMENT.match(words[0]) or _SUBSYSTEM.match(words[0])
            or not all(_CONTINUED_WORD.match(w) for w in words[1:])):
        return False
    state.wrapped += 1
    return True


def _scan_faults(evidence: PastedEvidence, line: str, number: int, before: list[str]) -> bool:
    fault = _AMD_VI.search(line) or _AMD_VI_DEVICE.search(line) or _DMAR.search(line)
    if fault:
        evidence.add_kind("dmesg")
        bdf = full_bdf(fault.group(1))
        evidence.iommu_faults[bdf] = evidence.iommu_faults.get(bdf, 0) + 1
        evidence.iommu_fault_example = evidence.iommu_fault_example or shown(line)
        return True
    xid = _XID.search(line)
    if xid:
        evidence.add_kind("dmesg")
        cause = _XID_CAUSE.search(line)
        pci = xid.group(1).lower()  # an address the poster blanked out (``PCI:...``) names no GPU
        rest = line[xid.end():].lstrip(",")
        unit, link = _XID_UNIT.match(rest), _XID_LINK.search(rest, 0, 400)
        evidence.xids.append(PastedXid(pci if _HEX_PAIR.search(pci) else None, int(xid.group(2)), shown(line),
                                       int(cause.group(1)) if cause else None, unit.group(1) if unit else None,
                                       int(link.group(1)) if link else None,
                                       unit.group(2) == "Fatal" if unit and unit.group(2) else None))
        return True
    if "fallen off the bus" in line:
        evidence.add_kind("dmesg")
        named = [m for m in map(_FALLEN_GPU.search, [line, *reversed(before)]) if m]
        if named and full_bdf(named[0].group(1)) not in evidence.fallen_off_bus:
            evidence.fallen_off_bus.append(full_bdf(named[0].group(1)))
        return True
    return _scan_aer(evidence, line, number)


def _scan_aer(evidence: PastedEvidence, line: str, number: int) -> bool:
    aer = _AER.search(line) if "PCIe Bus Error" in line else None
    if aer:
        evidence.add_kind("dmesg")
        said = aer.group(3).strip().lower()
        severity = ("corrected" if said.startswith("correct") else
                    "uncorrected (non-fatal)" if "non" in said else "uncorrected (fatal)")
        evidence.aer.append(PastedAer(full_bdf(aer.group(2)), aer.group(1), severity, aer.group(4).strip(),
                                      number, shown(line)))
        return True
    limited = _LIMITED.search(line) if "available PCIe bandwidth" in line else None
    if limited:
        evidence.add_kind("dmesg")
        device, at = full_bdf(limited.group(1)), full_bdf(limited.group(4))
        state = LinkState(current_speed_gts=float(limited.group(2)), current_width=int(limited.group(3)),
                          max_speed_gts=float(limited.group(5)), max_width=int(limited.group(6)))
        evidence.links.append(PastedLink(device, state, number, shown(line), limited_at=at))
        return True
    lost = _NOT_RECOVERED.search(line) if "recover" in line or "AER-aware" in line else None
    if lost:
        evidence.add_kind("dmesg")
        evidence.not_recovered.setdefault(full_bdf(lost.group(2)), shown(line))
        return True
    return False


def _scan_iommu(evidence: PastedEvidence, line: str) -> bool:
    domain = _DEFAULT_DOMAIN.search(line)
    if domain:
        evidence.add_kind("dmesg")
        evidence.default_domain = evidence.default_domain or (domain.group(1).lower(), shown(line))
        return True
    if _IOMMU_ACTIVE.search(line):
        evidence.add_kind("dmesg")
        evidence.iommu_active = evidence.iommu_active or shown(line)
        return True
    return False


def looks_like_kernel_parameters(line: str) -> bool:
    """One line that is a kernel command line by its shape: the words before any `` -- `` (after it
    come the init's own arguments) are kernel parameters (``word`` or ``word=value``, lower case),
    at least two of them with a value and at least two named in the kernel's own list. A real
    Firecracker microVM's line starts ``mitigations=auto,... console=ttyS0 quiet reboot=k panic=1``."""
    words = line[:MAX_CMDLINE_CHARS].split(" -- ")[0].split()
    if len(words) < 3 or not all(_KERNEL_PARAMETER.match(w) for w in words):
        return False
    keys = {w.split("=", 1)[0] for w in words}
    return sum("=" in w for w in words) >= 2 and len(keys & _KERNEL_KEYS) >= 2
