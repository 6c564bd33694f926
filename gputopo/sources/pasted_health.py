"""Evidence users paste, recognised line by line (``doctor --from FILE``), each kind by its own
reader (what each reads is in its docstring):

- ``pasted_lspci``: ``lspci -vvv`` (whole, grepped, with ``-PP`` paths, or indented in an IOMMU-group
  listing): device headers, ``ACSCtl:``, ``LnkCap:`` / ``LnkSta:``; NCCL's ACS script; ``lspci -tv``;
- ``pasted_kernel``: ``dmesg`` / journal lines (IOMMU faults, Xids, fallen off the bus, AER errors,
  the IOMMU's default domain) and kernel command lines (``/proc/cmdline``, dmesg's ``Command line:``,
  wrapped by a terminal or not);
- ``pasted_smi``: ``nvidia-smi nvlink -s`` / ``-e`` and ``nvidia-smi -q``'s Fabric section.

A paste quoted in markdown (``> ``) is read without its quote marks. Every value is data: kept as
read, never evaluated. Lines that match nothing are ignored. What the readers found is a
``PastedEvidence`` (``gputopo.sources.pasted_evidence``); ``gputopo.analysis.doctor_pasted`` judges it.
"""

from __future__ import annotations

import re

from gputopo.sources.pasted_evidence import (
    MAX_CMDLINE_CHARS,
    MAX_SHOWN_CHARS,
    PastedAcs,
    PastedEvidence,
    PastedLink,
    full_bdf,
    shown,
)
from gputopo.sources.pasted_kernel import KernelLogState, scan_kernel
from gputopo.sources.pasted_lspci import (
    acs_control_from_words,
    header_device,
    note_header,
    scan_lspci,
)
from gputopo.sources.pasted_smi import SmiState, scan_smi

__all__ = ["MAX_CMDLINE_CHARS", "MAX_SHOWN_CHARS", "PastedAcs", "PastedEvidence", "PastedLink",
           "acs_control_from_words", "full_bdf", "parse_pasted", "shown"]

_QUOTE = re.compile(r"^(?:>[ \t]?)+")


def parse_pasted(text: str) -> PastedEvidence:
    """Everything recognised in ``text`` (see the module docstring)."""
    evidence = PastedEvidence()
    device: str | None = None
    pending_link: dict[str, tuple[float, int]] = {}
    kernel, smi = KernelLogState(), SmiState()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _QUOTE.sub("", raw.rstrip("\r"))
        if kernel.cmdline_open:  # a command line wrapped by a terminal goes on before anything else
            scan_kernel(evidence, line, number, kernel)
            if kernel.cmdline_open:
                continue
        header = header_device(line)
        if header is not None:
            device, pending_link = header, {}
            note_header(evidence, line, device)
            continue
        if scan_lspci(evidence, line, number, device, pending_link) or scan_smi(evidence, line, number, smi):
            continue
        scan_kernel(evidence, line, number, kernel)
    return evidence
