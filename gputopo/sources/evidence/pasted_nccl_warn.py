"""NCCL's warnings about shared memory and GPUDirect RDMA, alone or in a log, for doctor:

- ``Call to posix_fallocate failed : No space left on device`` (``include/shm.h`` of NCCL 2.7-2.11,
  ``shmutils.cc`` later) and ``Error while creating shared memory segment <name> (size N)``:
  NCCL could not create a segment in ``/dev/shm``; and a crash with SIGBUS (``Bus error``) whose
  backtrace has a frame of NCCL's shared-memory code (``ncclShmOpen``, ``shmOpen``): the segment was
  mapped but ``/dev/shm`` could not back its pages (gdb, a core's backtrace, a signal handler's dump);
- ``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'`` (and ``GDR ... not supported`` /
  ``... disabled``): NCCL stages network traffic through host memory;
- an ``lsmod`` line of ``nvidia_peermem`` / ``nv_peer_mem``: the peer-memory module is loaded; and
  ``lsmod | grep <pattern>`` where the pattern would match one of them (``peermem``, ``nvidia``,
  ``-e nv_peer_mem``) and its output, up to a blank line, the next prompt or the end of the paste,
  holds no such row: the module is not loaded (``grep`` printed nothing for it);
- ``Could not find real path of /sys/class/pci_bus/...`` (``include/topo.h`` of NCCL 2.4): NCCL's
  topology detection could not resolve a GPU's (or NIC's) PCI device under ``/sys``.
- ``NET/IB : Using [0]mlx5_0:1/IB ...``: NCCL takes the IB/RoCE transport between nodes (whether
  with GPUDirect RDMA, its own line says).

Lines of an NCCL log that say more (rings, channels, ``P2P is disabled between connected GPUs``)
are ``sources.tools.nccl_log``'s, read as ``scan --from`` reads them.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

from gputopo.sources.evidence.pasted_evidence import PastedEvidence, shown
from gputopo.sources.evidence.pasted_facts import Said, ShmFailure

_SIZE = re.compile(r"\(size ([0-9]{1,15})\)")
_GDR = re.compile(r"\bGDR\b")
_NET_IB_USING = re.compile(r"NET/IB ?: Using \[\d{1,3}\]")
_LSMOD = re.compile(r"^\s*(nvidia_peermem|nv_peer_mem)\s+[0-9]{1,12}\s+[0-9]{1,6}")
_LSMOD_GREP = re.compile(r"^(?P<prompt>.{0,120}?)\blsmod\s*\|\s*e?grep\b(?P<args>.{0,200})$")
_MODULE_ROW = re.compile(r"^\s*[A-Za-z0-9_]{1,64}\s+[0-9]{1,12}\s+[0-9]{1,6}\b")
PEER_MODULES = ("nvidia_peermem", "nv_peer_mem")
_SIGBUS = re.compile(r"\bSIGBUS\b|\bBus error\b")  # (case kept: AER's lines say "PCIe Bus Error")
_SHM_FRAME = re.compile(r"\b(?:nccl)?[Ss]hm(?:Open|Setup|Map|Allocate)\b|\bncclShm[A-Z]\w{0,40}")


@dataclass
class ShmCrash:
    """A crash of NCCL's shared-memory code seen in a paste: the signal, and the frame naming it."""

    signal: Said | None = None
    frame: Said | None = None


@dataclass
class LsmodGrep:
    """An ``lsmod | grep`` whose pattern would match a peer-memory module, its output being read."""

    said: Said | None = None
    prompt: str = ""  # what stands before ``lsmod`` on its line (a shell prompt), stripped
    seen: bool = False  # a peer-memory module's row was in its output


def _grep_patterns(args: str) -> list[str] | None:
    """The patterns of ``grep``'s arguments (options dropped, ``a|b`` split); None: not a plain grep."""
    try:
        words = shlex.split(args)
    except ValueError:
        return None
    if "|" in words or ">" in words:
        return None
    return [p.strip("^$") for w in words if not w.startswith("-") for p in re.split(r"\\?\|", w) if p.strip("^$")]


def grep_output(evidence: PastedEvidence, line: str, grep: LsmodGrep) -> None:
    """A line after a pending grep (every line, before any reader takes it): a row of its output, or
    the line that ends it: where that is a blank line or the next prompt and no peer-memory row was
    printed, the module is not loaded; any other line ends it saying nothing (the output was cut)."""
    if _MODULE_ROW.match(line):
        grep.seen = grep.seen or bool(_LSMOD.match(line))
        return
    text = line.strip()
    if not text or (grep.prompt and text.startswith(grep.prompt)) or _LSMOD_GREP.match(text):
        finish_nccl_warn(evidence, grep)
    grep.said = None


def finish_nccl_warn(evidence: PastedEvidence, grep: LsmodGrep, crash: ShmCrash | None = None) -> None:
    """The output of a pending grep has ended (the paste, a blank line, the next prompt); at the
    paste's end, a SIGBUS with a frame of NCCL's shared-memory code is a shared-memory failure."""
    if grep.said is not None and not grep.seen:
        evidence.facts.peermem_absent = evidence.facts.peermem_absent or grep.said
    grep.said = None
    if crash is not None and crash.signal is not None and crash.frame is not None:
        evidence.add_kind("NCCL shared-memory error")
        evidence.facts.keep(evidence.facts.shm_failures,
                            ShmFailure(crash.frame.line, crash.frame.text, None, sigbus=True))


def scan_shm_crash(line: str, number: int, crash: ShmCrash) -> bool:
    """A crash's signal or a frame of NCCL's shared-memory code (judged together at the paste's end)."""
    if crash.signal is None and _SIGBUS.search(line):
        crash.signal = Said(number, shown(line))
    frame = _SHM_FRAME.search(line) if crash.frame is None else None
    if frame:
        crash.frame = Said(number, shown(line))
    return bool(frame)


def scan_nccl_warn(evidence: PastedEvidence, line: str, number: int, grep: LsmodGrep) -> bool:
    """Read one line into ``evidence.facts``; whether it was one of these."""
    lower = line.lower()
    if ("posix_fallocate" in lower and "no space left" in lower) or "error while creating shared memory segment" in lower:
        size = _SIZE.search(line)
        evidence.add_kind("NCCL shared-memory error")
        evidence.facts.keep(evidence.facts.shm_failures,
                            ShmFailure(number, shown(line), int(size.group(1)) if size else None))
        return True
    if ("gpu direct rdma" in lower or _GDR.search(line)) and ("disabled" in lower or "not supported" in lower):
        evidence.add_kind("NCCL GPUDirect RDMA")
        evidence.facts.keep(evidence.facts.gdr_disabled, Said(number, shown(line)))
        return True
    if "could not find real path of /sys/" in lower:
        evidence.add_kind("NCCL sysfs path")
        evidence.facts.keep(evidence.facts.sysfs_unresolved, Said(number, shown(line)))
        return True
    if _NET_IB_USING.search(line):
        evidence.add_kind("NCCL NET/IB")
        evidence.facts.net_ib_used = evidence.facts.net_ib_used or Said(number, shown(line))
        return True
    command = _LSMOD_GREP.match(line.rstrip())
    patterns = _grep_patterns(command.group("args")) if command else None
    if patterns and any(p.lower() in m for p in patterns for m in PEER_MODULES):
        evidence.add_kind("lsmod")
        grep.said, grep.prompt, grep.seen = Said(number, shown(line)), command.group("prompt").strip(), False
        return True
    lsmod = _LSMOD.match(line)
    if lsmod:
        evidence.add_kind("lsmod")
        evidence.facts.peermem_loaded = Said(number, shown(line))
        return True
    return False
