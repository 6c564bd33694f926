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
_LSMOD_GREP = re.compile(r"^(?P<prompt>.{0,120}?)\blsmod\s*\|\s*(?P<grep>e?grep)\b(?P<args>.{0,200})$")
# grep's short options that leave its output as lsmod's rows, one per matching line: ignore case, the regex
# dialect, no file names, no error messages. Any other (-v, -q, -c, -l, -w, -x, -n, -f, -A ...) and an empty
# output no longer says that no row named the module.
_GREP_FLAGS = frozenset("iyEPFGsh")
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


def _grep_matches_peer_module(args: str, egrep: bool) -> bool:
    """Whether ``grep``'s arguments would print a row of a peer-memory module (so its empty output says
    the module is not loaded): a plain grep of lsmod's output (options kept to ``_GREP_FLAGS``, ``-e``,
    ``--regexp=``, ``--ignore-case`` and ``--color``; one pattern operand, no file, no further pipe or
    redirection) whose pattern, or one of its alternatives, is a word a module name contains (``^`` kept,
    case kept unless ``-i``). Anything else: False (an empty output then says nothing)."""
    try:
        lexer = shlex.shlex(args, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return False
    patterns: list[str] = []
    operand, flags, want_pattern = False, set("E" if egrep else ""), False
    for word in words:
        if want_pattern:
            patterns.append(word)
            want_pattern = False
        elif word and all(c in "|&;<>()" for c in word):
            return False  # piped on, redirected, or another command
        elif word.startswith("--"):
            if word.startswith("--regexp="):
                patterns.append(word[len("--regexp="):])
            elif word == "--ignore-case":
                flags.add("i")
            elif not word.startswith(("--color", "--colour")):
                return False
        elif word.startswith("-") and len(word) > 1:
            letters, _, rest = word[1:].partition("e")
            if not set(letters) <= _GREP_FLAGS:
                return False
            flags.update(letters)
            if "e" in word[1:]:
                if rest:
                    patterns.append(rest)
                else:
                    want_pattern = True
        elif patterns or operand:
            return False  # a file operand: grep reads it, not lsmod's output
        else:
            patterns.append(word)
            operand = True
    if want_pattern or not patterns:
        return False
    fold = (lambda t: t.lower()) if flags & {"i", "y"} else (lambda t: t)
    if "F" in flags:
        alternatives = [p for pattern in patterns for p in pattern.split("\n")]
    elif flags & {"E", "P"}:
        alternatives = [p for pattern in patterns for p in re.split(r"(?<!\\)\|", pattern)]
    else:
        alternatives = [p for pattern in patterns for p in pattern.split("\\|")]
    for alternative in alternatives:
        anchored = "F" not in flags and alternative.startswith("^")
        word = alternative[1:] if anchored else alternative
        if not word or not re.fullmatch(r"[A-Za-z0-9_]+", word):
            continue  # a regex, an end anchor ($: a row ends with its counts): not judged
        for module in PEER_MODULES:
            if (fold(module).startswith(fold(word)) if anchored else fold(word) in fold(module)):
                return True
    return False


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
    if command and _grep_matches_peer_module(command.group("args"), command.group("grep") == "egrep"):
        evidence.add_kind("lsmod")
        grep.said, grep.prompt, grep.seen = Said(number, shown(line)), command.group("prompt").strip(), False
        return True
    lsmod = _LSMOD.match(line)
    if lsmod:
        evidence.add_kind("lsmod")
        evidence.facts.peermem_loaded = Said(number, shown(line))
        return True
    return False
