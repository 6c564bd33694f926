"""``lspci`` text as users paste it, for doctor: which device each line belongs to, its ACS control
word (``ACSCtl:``), its link (``LnkCap:`` / ``LnkSta:``); NCCL's ACS check script; ``lspci -tv``.

A device starts at its header line, found by shape wherever the paste puts it: ``40:01.1 PCI bridge:
...`` at the start of a line, indented (an IOMMU-group listing indents each device), or as a path
from its root port (``lspci -PP``: ``00:01.0/01:00.0/02:00.0 PCI bridge``, the device being the last
element, its domain the first's); or the ``-s BDF`` of a ``$ lspci ... -s BDF`` command line. Lines
after a header belong to that device until the next header, so a header this reader did not
recognise would hand its lines to the device before it: every header shape lspci prints is read.
"""

from __future__ import annotations

import re

from gputopo.sources.evidence.pasted_evidence import (
    BDF,
    PastedAcs,
    PastedEvidence,
    PastedLink,
    full_bdf,
    shown,
)
from gputopo.sources.host.pcie_health import ACS_BITS, LinkState

_SHORT = r"[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
# A header: optional indentation, a device or a path of devices (``0000:00:1c.3/08:00.0/09:01.0``), a word.
_HEADER = re.compile(r"^\s*((?:[0-9a-fA-F]{4}:)?" + _SHORT + r")((?:/" + _SHORT + r")*)\s+\S")
# ``lspci ... -s BDF``: the last ``-s`` after the word lspci. Found in two steps: ``\blspci\b.*\s-s...``
# ran ``.*`` to the end of the line from every ``lspci`` of a line without ``-s`` (quadratic).
_LSPCI_WORD = re.compile(r"\blspci\b")
_DASH_S = re.compile(r"\s-s\s*+(" + BDF + ")")
_ACSCTL = re.compile(r"ACSCtl:\s*((?:\w+[+-]\s*)+)")
# The correctable error status: bits stay set from the error until cleared. Those of the link itself
# (the physical layer's RxErr, the data link layer's CRC and replay errors); AdvNonFatalErr and the
# others say nothing of the link.
_CESTA = re.compile(r"\bCESta:\s*((?:\w+[+-]\s*)+)")
LINK_ERROR_BITS = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout")
# What stands between ``GT/s`` and its comma is bounded (``(ok)``, ``(downgraded)``): ``[^,]*`` ran to the
# end of a line without a comma from every ``LnkSta: Speed ..GT/s``.
_LNK = re.compile(r"\b(LnkCap|LnkSta):\s*(?:Port #[0-9]+,\s*)?Speed\s+([0-9]{1,3}(?:\.[0-9]{1,3})?)GT/s([^,]{0,64}),"
                  r"\s*Width\s+x([0-9]{1,3})\b(\s*\((?:ok|downgraded)\))?")
# lspci's own verdict after a LnkSta value, against the device's LnkCap: ``(ok)`` or ``(downgraded)``.
_MARK = re.compile(r"\((ok|downgraded)\)")
_SETPCI_ACS = re.compile(r"^\s*(" + BDF + r")\s+\(ecap 0*d @[0-9a-fA-F]+\)\s+@[0-9a-fA-F]+\s+([0-9a-fA-F]{4})\s*$")
_BUS = re.compile(r"\bBus: primary=[0-9a-fA-F]{2}, secondary=([0-9a-fA-F]{2}), subordinate=([0-9a-fA-F]{2})\b")
_PORT = re.compile(r"\bExpress \(v[0-9]\) (Root Port|Upstream Port|Downstream Port|Endpoint|Legacy Endpoint)\b")
_NVIDIA_GPU = re.compile(r"\b(?:3D|VGA compatible) controller(?: \[03[0-9a-fA-F]{2}\])?: NVIDIA\b")
_TREE = re.compile(r"-\[[0-9a-fA-F]{4}:[0-9a-fA-F]{2}\]-|[+\\]-[0-9a-fA-F]{2}\.[0-7]")


def acs_control_from_words(words: str) -> int:
    """``SrcValid+ TransBlk- ReqRedir+ ...`` -> the control word (unknown names ignored)."""
    value = 0
    for token in words.split():
        name, sign = token[:-1], token[-1:]
        if name in ACS_BITS and sign == "+":
            value |= 1 << ACS_BITS.index(name)
    return value


def header_device(line: str) -> str | None:
    """The device a header line (or a ``lspci ... -s BDF`` command line) starts, else None."""
    if _SETPCI_ACS.match(line):
        return None
    header = _HEADER.match(line)
    if header:
        first, path = header.group(1), header.group(2)
        if not path:
            return full_bdf(first)
        domain = full_bdf(first).split(":")[0]
        return f"{domain}:{path.rsplit('/', 1)[1].lower()}"
    lspci = _LSPCI_WORD.search(line)
    dash_s = None
    for dash_s in _DASH_S.finditer(line, lspci.end()) if lspci else ():
        pass  # the last one
    return full_bdf(dash_s.group(1)) if dash_s else None


def note_header(evidence: PastedEvidence, line: str, device: str) -> None:
    """A header naming an NVIDIA GPU (``1a:00.0 3D controller: NVIDIA Corporation GV100GL ...``): its bus id."""
    if _NVIDIA_GPU.search(line) and device not in evidence.nvidia_gpus:
        evidence.nvidia_gpus.append(device)


def scan_lspci(evidence: PastedEvidence, line: str, number: int, device: str | None,
               pending_link: dict[str, tuple[float, int]]) -> bool:
    """Read one line of lspci (or NCCL's ACS script) text into ``evidence``; whether it was one."""
    acs = _ACSCTL.search(line)
    if acs:
        evidence.add_kind("lspci -vvv")
        evidence.acs.append(PastedAcs(device, acs_control_from_words(acs.group(1)), number, shown(line)))
        return True
    cesta = _CESTA.search(line)
    if cesta:
        evidence.add_kind("lspci -vvv")
        set_bits = [b for b in LINK_ERROR_BITS if f"{b}+" in cesta.group(1).split()]
        if set_bits:
            evidence.link_errors_logged.append((device, set_bits, number, shown(line)))
        return True
    bus = _BUS.search(line)
    if bus and device is not None:
        evidence.add_kind("lspci -vvv")
        evidence.bus_ranges[device] = (int(bus.group(1), 16), int(bus.group(2), 16))
        return True
    port = _PORT.search(line)
    if port and device is not None:
        evidence.port_types[device] = port.group(1)
        return True
    lnk = _LNK.search(line)
    if lnk:
        evidence.add_kind("lspci -vvv")
        pending_link[lnk.group(1)] = (float(lnk.group(2)), int(lnk.group(4)))
        if lnk.group(1) == "LnkSta":
            cap = pending_link.get("LnkCap")
            state = LinkState(current_speed_gts=float(lnk.group(2)), current_width=int(lnk.group(4)),
                              max_speed_gts=cap[0] if cap else None, max_width=cap[1] if cap else None)
            # lspci's marks judge the link even where the paste has no LnkCap line (a fragment).
            speed_mark, width_mark = (_MARK.search(group or "") for group in (lnk.group(3), lnk.group(5)))
            # Width x0: no link trained at all (nothing in the slot, or the link is down), not a narrow one.
            (evidence.links_down if state.current_width == 0 else evidence.links).append(
                PastedLink(device, state, number, shown(line), speed_mark=speed_mark.group(1) if speed_mark else None,
                           width_mark=width_mark.group(1) if width_mark else None))
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
