"""ACS control words read with ``setpci``, as NCCL's troubleshooting guide has users read them
(docs.nvidia.com/deeplearning/nccl/user-guide/docs/troubleshooting.html, "PCI Access Control
Services"): ``setpci -v -s ${BDF} ECAP_ACS+0x6.w`` in a loop over every device, or a fixed offset
(``setpci -s $d f2a.w``). Each read prints the 16-bit control word, four hex digits (``001d``):

- after a ``setpci ... <register>.w`` read (no ``=``: a write sets, it does not show) anywhere
  before it in the paste, a line of four hex digits alone is a control word; the device is the one
  the line names (``41:00.0 001d``, ``41:00.0: 001d``), the device named on the line before (a loop
  that echoes ``$d`` first), the single device the command names, else not known;
- ``ACSCtl: 0x001d`` (a control word written in hex where lspci prints names).

``setpci -v`` output with the capability (``0000:03:00.0 (ecap 000d @2a0) @2a6 0000``) is
``pasted_lspci``'s. A write (``ECAP_ACS+6.w=0000``) is no reading: the state after it is not shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from gputopo.sources.evidence.pasted_evidence import BDF, PastedAcs, PastedEvidence, full_bdf, shown

_READ = re.compile(r"\bsetpci\b[^=|>]{0,200}?\s(?:ECAP_ACS\+(?:0x)?[0-9a-fA-F]{1,3}|(?:0x)?[0-9a-fA-F]{2,3})\.w\b(?!\s*=)")
_DASH_S = re.compile(r"\s-s\s*[\"']?(" + BDF + r")\b")
_WORD = re.compile(r"^\s*(?:(" + BDF + r"):?\s+)?([0-9a-fA-F]{4})\s*$")
_BDF_ALONE = re.compile(r"^\s*(" + BDF + r")\s*:?\s*$")
_ACSCTL_HEX = re.compile(r"ACSCtl:?\s*(?:0x)([0-9a-fA-F]{1,4})\b")


@dataclass
class SetpciState:
    reading: bool = False  # a setpci read of a .w register came before
    command_device: str | None = None  # the one device that command names, if it names one
    named_before: str | None = None  # a device named alone on the line before


def scan_setpci(evidence: PastedEvidence, line: str, number: int, state: SetpciState) -> bool:
    """Read one line into ``evidence.acs``; whether it was a setpci read or its answer."""
    named_before, state.named_before = state.named_before, None
    if "setpci" in line:
        read = _READ.search(line)
        if read is None:
            return False
        state.reading = True
        dash_s = _DASH_S.search(line)
        state.command_device = full_bdf(dash_s.group(1)) if dash_s else None
        evidence.add_kind("setpci ACS read")
        return True
    hexctl = _ACSCTL_HEX.search(line)
    if hexctl:
        evidence.add_kind("ACSCtl word")
        evidence.acs.append(PastedAcs(None, int(hexctl.group(1), 16), number, shown(line)))
        return True
    if not state.reading:
        return False
    word = _WORD.match(line)
    if word:
        device = full_bdf(word.group(1)) if word.group(1) else named_before or state.command_device
        evidence.acs.append(PastedAcs(device, int(word.group(2), 16), number, shown(line)))
        return True
    alone = _BDF_ALONE.match(line)
    if alone:
        state.named_before = full_bdf(alone.group(1))
        return True
    return False
