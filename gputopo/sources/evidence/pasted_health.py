"""Evidence users paste, recognised line by line (``doctor --from FILE``), each kind by its own
reader (what each reads is in its docstring):

- ``pasted_lspci``: ``lspci -vvv`` (whole, grepped, with ``-PP`` paths, or indented in an IOMMU-group
  listing): device headers, ``ACSCtl:``, ``LnkCap:`` / ``LnkSta:``; NCCL's ACS script; ``lspci -tv``;
- ``pasted_kernel``: ``dmesg`` / journal lines (IOMMU faults, Xids, fallen off the bus, AER errors,
  the IOMMU's default domain) and kernel command lines (``/proc/cmdline``, dmesg's ``Command line:``,
  wrapped by a terminal or not);
- ``pasted_smi``: ``nvidia-smi nvlink -s`` / ``-e`` and ``nvidia-smi -q``'s Fabric section;
- ``pasted_more``: environment and ``docker run`` lines, ``setpci`` ACS reads, CUDA errors and
  peer answers, NCCL's shared-memory and GPUDirect RDMA warnings, short nvidia-smi / nvtop /
  Fabric Manager answers, GRUB and ``/dev/shm`` lines (its docstring names each module).

A paste quoted in markdown (``> ``) is read without its quote marks, and without the rest of a
ticket's dressing (``pasted_text``: fences, bold, shell prompts, a ``host: `` prefix on every line). Every value is data: kept as
read, never evaluated. Lines that match nothing are ignored. What the readers found is a
``PastedEvidence`` (``gputopo.sources.evidence.pasted_evidence``); ``gputopo.analysis.causes.doctor`` and its cause modules judge it.
"""

from __future__ import annotations

import re

from gputopo.sources.evidence.pasted_evidence import (
    MAX_CMDLINE_CHARS,
    MAX_SHOWN_CHARS,
    PastedAcs,
    PastedEvidence,
    PastedLink,
    full_bdf,
    shown,
)
from gputopo.sources.evidence.pasted_kernel import KernelLogState, scan_kernel
from gputopo.sources.evidence.pasted_more import MoreState, finish_more, scan_more
from gputopo.sources.evidence.pasted_lspci import (
    acs_control_from_words,
    header_device,
    note_header,
    scan_lspci,
)
from gputopo.sources.evidence.pasted_smi import SmiState, scan_smi
from gputopo.sources.evidence.pasted_text import plain_lines, unprefixed

__all__ = ["MAX_CMDLINE_CHARS", "MAX_SHOWN_CHARS", "PastedAcs", "PastedEvidence", "PastedLink",
           "acs_control_from_words", "full_bdf", "parse_pasted", "plain_pasted", "shown"]

_QUOTE = re.compile(r"^(?:>[ \t]?)+")


def parse_pasted(text: str) -> PastedEvidence:
    """Everything recognised in ``text`` (see the module docstring)."""
    return plain_pasted(text)[0]


def plain_pasted(text: str) -> tuple[PastedEvidence, str]:
    """What ``text`` says, and the text as read: without a ticket's dressing, and without a prefix
    on every line where that reading recognises more kinds (``pasted_text``)."""
    lines = plain_lines(text)
    evidence = _parse_lines(lines)
    stripped = unprefixed(lines)
    if stripped is not None:
        other = _parse_lines(stripped)
        if len(other.kinds) > len(evidence.kinds):
            return other, "\n".join(stripped)
    return evidence, "\n".join(lines)


def _parse_lines(lines: list[str]) -> PastedEvidence:
    evidence = PastedEvidence()
    device: str | None = None
    pending_link: dict[str, tuple[float, int]] = {}
    kernel, smi, more = KernelLogState(), SmiState(), MoreState()
    for number, raw in enumerate(lines, start=1):
        line = _QUOTE.sub("", raw)
        if kernel.cmdline_open:  # a command line wrapped by a terminal goes on before anything else
            scan_kernel(evidence, line, number, kernel)
            if kernel.cmdline_open:
                continue
        if scan_more(evidence, line, number, more):
            continue
        header = header_device(line)
        if header is not None:
            device, pending_link = header, {}
            note_header(evidence, line, device)
            continue
        if scan_lspci(evidence, line, number, device, pending_link) or scan_smi(evidence, line, number, smi):
            continue
        scan_kernel(evidence, line, number, kernel)
    finish_more(evidence, more)
    return evidence
