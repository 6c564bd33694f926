"""Evidence users paste, recognised line by line (``doctor --from FILE``):

- ``lspci -vvv`` (whole, or grepped): device headers (``40:01.1 PCI bridge: ...``), a ``-s BDF`` on a
  ``$ lspci`` command line, ``ACSCtl:`` words, ``LnkCap:`` / ``LnkSta:`` speed and width;
- ``lspci -tv``: recognised (a tree says where devices sit, not their health);
- NCCL's ACS check script (``0000:03:00.0 (ecap 000d @2a0) @2a6 0000``): each bridge's control word;
- ``dmesg`` / journal: ``AMD-Vi: Event logged [IO_PAGE_FAULT ...]``, ``DMAR: [DMA Read] ... fault``,
  ``NVRM: Xid (PCI:0000:44:00): 79, ...``, ``fallen off the bus``, and ``Command line:``;
- ``/proc/cmdline``: a ``BOOT_IMAGE=`` or ``root=`` line, or (a VM booted straight into its kernel,
  with neither) one line of kernel parameters, read by shape (``_looks_like_kernel_parameters``);
- ``nvidia-smi nvlink -s``: ``GPU N: ...`` then ``Link K: <inactive>`` or a speed.

Every value is data: kept as read, never evaluated. Lines that match nothing are ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.sources.pcie_health import ACS_BITS, LinkState

_HEADER = re.compile(r"^(?:([0-9a-fA-F]{4}):)?([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])\s+\S")
_DASH_S = re.compile(r"\blspci\b.*\s-s\s*((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_ACSCTL = re.compile(r"ACSCtl:\s*((?:\w+[+-]\s*)+)")
_LNK = re.compile(r"\b(LnkCap|LnkSta):\s*(?:Port #\d+,\s*)?Speed\s+([0-9.]+)GT/s[^,]*,\s*Width\s+x(\d+)")
_SETPCI_ACS = re.compile(r"^\s*((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s+\(ecap 0*d @[0-9a-fA-F]+\)\s+@[0-9a-fA-F]+\s+([0-9a-fA-F]{4})\s*$")
_BDF_IN = r"((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])"
_AMD_VI = re.compile(_BDF_IN + r":?\s+AMD-Vi: Event logged \[IO_PAGE_FAULT")
_AMD_VI_DEVICE = re.compile(r"AMD-Vi: Event logged \[IO_PAGE_FAULT device=" + _BDF_IN)
_DMAR = re.compile(r"DMAR: \[DMA (?:Read|Write)[^\]]*\] Request device \[" + _BDF_IN + r"\]")
_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\):\s*(\d+)")
_FALLEN_GPU = re.compile(r"NVRM: (?:The NVIDIA GPU|GPU at(?: PCI:)?)\s+" + _BDF_IN)
_CMDLINE_DMESG = re.compile(r"(?:Kernel c|C)ommand line:\s*(.*)$")
_NVLINK_GPU = re.compile(r"^GPU (\d+):")
_NVLINK_LINK = re.compile(r"^\s+Link (\d+):\s*(.*?)\s*$")
_KERNEL_PARAMETER = re.compile(r"^[a-z][a-z0-9_.-]*(?:=\S*)?$")
# Parameters of the kernel itself (Documentation/admin-guide/kernel-parameters.txt) common enough
# that a line of parameters holds one: a line of lower-case words alone is not taken for a command line.
_KERNEL_KEYS = frozenset({
    "console", "root", "init", "rdinit", "ro", "rw", "quiet", "panic", "reboot", "mitigations", "crashkernel",
    "pci", "iommu", "intel_iommu", "amd_iommu", "nomodeset", "swiotlb", "hugepages", "default_hugepagesz",
    "isolcpus", "nohz_full", "rcu_nocbs", "transparent_hugepage", "selinux", "apparmor", "audit", "earlyprintk",
    "loglevel", "rootfstype", "initrd", "numa_balancing", "processor.max_cstate", "intel_idle.max_cstate",
})
_TREE = re.compile(r"-\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]-|[+\\]-[0-9a-fA-F]{2}\.[0-7]")


MAX_SHOWN_CHARS = 300  # a line kept as evidence is cut here (a paste can hold anything)
MAX_CMDLINE_CHARS = 4096  # the kernel's own limit on x86 is 2048 (COMMAND_LINE_SIZE); parsed whole


def shown(line: str) -> str:
    """A line as kept for evidence: stripped and bounded."""
    line = line.strip()
    return line if len(line) <= MAX_SHOWN_CHARS else line[:MAX_SHOWN_CHARS - 3] + "..."


def full_bdf(text: str) -> str:
    """``40:01.1`` -> ``0000:40:01.1`` (lower case)."""
    text = text.lower()
    return text if text.count(":") == 2 else f"0000:{text}"


@dataclass
class PastedAcs:
    bdf: str | None  # None: the paste does not say which device
    control: int
    line: int
    text: str


@dataclass
class PastedLink:
    bdf: str | None
    link: LinkState
    line: int
    text: str


@dataclass
class PastedEvidence:
    """What one pasted file says; ``kinds`` names what was recognised in it."""

    kinds: list[str] = field(default_factory=list)
    acs: list[PastedAcs] = field(default_factory=list)
    links: list[PastedLink] = field(default_factory=list)
    iommu_faults: dict[str, int] = field(default_factory=dict)  # bdf -> count
    iommu_fault_example: str | None = None
    xids: list[tuple[str, int, str]] = field(default_factory=list)  # (pci, code, line)
    fallen_off_bus: list[str] = field(default_factory=list)
    cmdline: str | None = None
    nvlink_states: dict[int, dict[int, bool]] = field(default_factory=dict)  # gpu -> link -> active

    def add_kind(self, kind: str) -> None:
        if kind not in self.kinds:
            self.kinds.append(kind)


def acs_control_from_words(words: str) -> int:
    """``SrcValid+ TransBlk- ReqRedir+ ...`` -> the control word (unknown names ignored)."""
    value = 0
    for token in words.split():
        name, sign = token[:-1], token[-1:]
        if name in ACS_BITS and sign == "+":
            value |= 1 << ACS_BITS.index(name)
    return value


def parse_pasted(text: str) -> PastedEvidence:
    """Everything recognised in ``text`` (see the module docstring)."""
    evidence = PastedEvidence()
    device: str | None = None
    pending_link: dict[str, tuple[float, int]] = {}
    nvlink_gpu: int | None = None
    recent: list[str] = []  # the lines before this one (a multi-line NVRM message names the GPU first)
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r")
        stripped = line.lstrip("> ").rstrip() if line.startswith(">") else line
        header = _HEADER.match(stripped)
        if header and not _SETPCI_ACS.match(stripped):
            device, pending_link = full_bdf(stripped.split()[0]), {}
            continue
        dash_s = _DASH_S.search(stripped)
        if dash_s:
            device, pending_link = full_bdf(dash_s.group(1)), {}
            continue
        if _scan_lspci(evidence, stripped, number, device, pending_link):
            continue
        nvlink_gpu = _scan_nvlink(evidence, stripped, nvlink_gpu)
        _scan_log(evidence, stripped, recent)
        recent = [*recent[-2:], stripped]
    return evidence


def _scan_lspci(evidence: PastedEvidence, line: str, number: int, device: str | None,
                pending_link: dict[str, tuple[float, int]]) -> bool:
    acs = _ACSCTL.search(line)
    if acs:
        evidence.add_kind("lspci -vvv")
        evidence.acs.append(PastedAcs(device, acs_control_from_words(acs.group(1)), number, shown(line)))
        return True
    lnk = _LNK.search(line)
    if lnk:
        evidence.add_kind("lspci -vvv")
        pending_link[lnk.group(1)] = (float(lnk.group(2)), int(lnk.group(3)))
        if lnk.group(1) == "LnkSta":
            cap = pending_link.get("LnkCap")
            state = LinkState(current_speed_gts=float(lnk.group(2)), current_width=int(lnk.group(3)),
                              max_speed_gts=cap[0] if cap else None, max_width=cap[1] if cap else None)
            evidence.links.append(PastedLink(device, state, number, shown(line)))
        return True
    setpci = _SETPCI_ACS.match(line)
    if setpci:
        evidence.add_kind("setpci ECAP_ACS")
        evidence.acs.append(PastedAcs(full_bdf(setpci.group(1)), int(setpci.group(2), 16), number, shown(line)))
        return True
    if _TREE.search(line):
        evidence.add_kind("lspci -tv")
        return True
    return False


def _scan_nvlink(evidence: PastedEvidence, line: str, gpu: int | None) -> int | None:
    match = _NVLINK_GPU.match(line)
    if match:
        return int(match.group(1))
    link = _NVLINK_LINK.match(line)
    if link and gpu is not None and ("GB/s" in link.group(2) or "inactive" in link.group(2)):
        evidence.add_kind("nvidia-smi nvlink -s")
        evidence.nvlink_states.setdefault(gpu, {})[int(link.group(1))] = "inactive" not in link.group(2)
    return gpu


def _scan_log(evidence: PastedEvidence, line: str, recent: list[str]) -> None:
    fault = _AMD_VI.search(line) or _AMD_VI_DEVICE.search(line) or _DMAR.search(line)
    if fault:
        evidence.add_kind("dmesg")
        bdf = full_bdf(fault.group(1))
        evidence.iommu_faults[bdf] = evidence.iommu_faults.get(bdf, 0) + 1
        evidence.iommu_fault_example = evidence.iommu_fault_example or shown(line)
        return
    xid = _XID.search(line)
    if xid:
        evidence.add_kind("dmesg")
        evidence.xids.append((xid.group(1), int(xid.group(2)), shown(line)))
        return
    if "fallen off the bus" in line:
        evidence.add_kind("dmesg")
        named = [m for m in map(_FALLEN_GPU.search, [line, *reversed(recent)]) if m]
        if named and full_bdf(named[0].group(1)) not in evidence.fallen_off_bus:
            evidence.fallen_off_bus.append(full_bdf(named[0].group(1)))
        return
    cmd = _CMDLINE_DMESG.search(line)
    if cmd:
        evidence.add_kind("dmesg")
        evidence.cmdline = evidence.cmdline or cmd.group(1).strip()[:MAX_CMDLINE_CHARS]
        return
    if evidence.cmdline is None and (re.match(r"^\s*(BOOT_IMAGE=|root=)\S*", line)
                                     or _looks_like_kernel_parameters(line)):
        evidence.add_kind("/proc/cmdline")
        evidence.cmdline = line.strip()[:MAX_CMDLINE_CHARS]


def _looks_like_kernel_parameters(line: str) -> bool:
    """One line that is a kernel command line by its shape: the words before any `` -- `` (after it
    come the init's own arguments) are kernel parameters (``word`` or ``word=value``, lower case),
    at least two of them with a value and at least two named in the kernel's own list. A real
    Firecracker microVM's line starts ``mitigations=auto,... console=ttyS0 quiet reboot=k panic=1``."""
    words = line[:MAX_CMDLINE_CHARS].split(" -- ")[0].split()
    if len(words) < 3 or not all(_KERNEL_PARAMETER.match(w) for w in words):
        return False
    keys = {w.split("=", 1)[0] for w in words}
    return sum("=" in w for w in words) >= 2 and len(keys & _KERNEL_KEYS) >= 2
