"""What an ``NCCL_DEBUG=INFO`` line says, for every reader that meets one: the NCCL log reader
(``tools.nccl_log``, NCCL's whole view) and the TensorFlow log reader (``tf.tflog_nccl``: a TF log
holding only the NCCL lines that MirroredStrategy's NCCL all-reduce printed).

A line is ``host:pid:tid [cudaDev] NCCL INFO <message>`` (any prefix before the last two words is
skipped: timestamps, log collectors, a paste's decoration; a WARN line has ``file.cc:line`` after
them). ``[cudaDev]`` is the logging thread's CUDA device: a GPU its process sees, numbered as the
process numbers it (TensorFlow's ``device: N``). The messages that name ranks:

- ``comm 0x.. rank R nranks N cudaDev D [nvmlDev M] [busId B]`` (Init START/COMPLETE; ``INIT_RE``);
  ``comm 0x.. rank R nRanks N nNodes K`` (``COMM_RE``); NCCL 2.3's ``rank R nranks N`` (``OLD_COMM_RE``);
- ``Channel CC/NN :    0   1   2   3`` (``RING_RE``): a ring, which lists every rank of its
  communicator once, so it names them all;
- ``Trees [c] d/d/d->R->u`` (``TREE_RANK_RE``): the logging thread's rank R;
- ``Channel CC[/x] : R[X] -> S[Y] [send|receive] via T`` (``CONN_RE``): a connection between ranks.

Every pattern is anchored or bounded: a line costs at most a few passes over its first
``LINE_CAP_CHARS``.
"""

from __future__ import annotations

import re

from gputopo.sources.pasted import device_index

LEVEL_RE = re.compile(r"NCCL (INFO|WARN) ?")
_HOST_RE = re.compile(r"[A-Za-z0-9_.<>\-]+")  # the host of host:pid:tid before " [cudaDev] NCCL INFO"
_SOURCE_LINE_RE = re.compile(r"[\w./\-]+\.(?:cc|cu|cpp|c|h):\d+")  # transport/p2p.cc:238 before NCCL WARN
_DEV_RE = re.compile(r"\[\d+\]")
# ``Init COMPLETE``: rank, nranks and cudaDev in every release; nvmlDev from 2.4 (not in 2.7-2.8), busId
# from 2.7: a 2.4-2.6 line names the rank's GPU by its CUDA and NVML numbers only.
INIT_RE = re.compile(r"comm 0x[0-9a-fA-F]+ rank (\d+) nranks (\d+) cudaDev (\d+)(?: nvmlDev (\d+))?(?: busId ([0-9a-fA-F]+))?")
COMM_RE = re.compile(r"comm 0x[0-9a-fA-F]+ rank (\d+) nRanks (\d+) nNodes (\d+)")
OLD_COMM_RE = re.compile(r"^(?:comm 0x[0-9a-fA-F]+ )?rank (\d+) nranks (\d+)\s*$")  # NCCL 2.3 and before
CONN_RE = re.compile(
    r"(?:Channel|Ring) (\d+)(?:/\d+)? : (\d+)(?:\[([0-9a-fA-F]+)\])? -> (\d+)(?:\[([0-9a-fA-F]+)\])?"
    r"(?: \[(?:send|receive)\])? via (.*\S)\s*$"  # (.*\S) backtracks once over trailing spaces; (.+?)\s*$ ran to the end at each character
)
RING_RE = re.compile(r"^Channel (\d+)/(\d+) :((?:\s+\d+)+)\s*$")
TREE_RANK_RE = re.compile(r"^Trees? \[?\d+(?!\d)\]?[ :]*[-\d/]*->(\d+)->")  # (?!\d): no digit is shared with [-\d/]*


def host_of(prefix: str) -> tuple[str | None, str | None]:
    """``(host, host:pid:tid)`` of a ``host:pid:tid [dev] `` prefix (its last two words; a WARN line has
    the source ``file.cc:line`` after them; a launcher's tag run into the word, mpirun's
    ``[1,0]<stderr>:host:pid:tid``, is not the host), else Nones. Linear."""
    words = prefix.split()
    if len(words) >= 3 and _SOURCE_LINE_RE.fullmatch(words[-1]):
        words = words[:-1]
    if len(words) < 2 or not _DEV_RE.fullmatch(words[-1]):
        return None, None
    *_, host, pid, tid = [""] * 3 + words[-2].rsplit(":", 3)
    if pid.isascii() and pid.isdigit() and tid.isascii() and tid.isdigit() and _HOST_RE.fullmatch(host):
        return host, f"{host}:{pid}:{tid}"
    return None, None


def thread_device(prefix: str) -> int | None:
    """The logging thread's CUDA device (``[cudaDev]``) where the prefix names its thread, else None."""
    _, thread = host_of(prefix)
    return device_index(prefix.split()[-1].strip("[]")) if thread is not None else None


def ring_ranks(message: str) -> list[int] | None:
    """The ranks a ring line (``Channel 00/08 :    0   1   2   3``) lists, in ring order; None for
    another message. Ranks past ``MAX_GPUS`` are misreads: the line is not taken."""
    match = RING_RE.match(message.strip())
    if match is None:
        return None
    ranks = [device_index(token) for token in match.group(3).split()]
    return None if not ranks or None in ranks else ranks  # type: ignore[return-value]


def ring_text(message: str) -> str | None:
    """A ring line as NCCL's view keeps it: ``Channel 00/08 : 0 1 2 3``; None for another message."""
    match = RING_RE.match(message.strip())
    return f"Channel {match.group(1)}/{match.group(2)} : {' '.join(match.group(3).split())}" if match else None

