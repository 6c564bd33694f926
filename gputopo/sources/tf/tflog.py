"""TensorFlow device-initialisation logs (every era) -> ``TfView``; a TfView -> Topology.

People meet their GPU topology first as TensorFlow log lines, copied into issues half-cut and
mixed with other output. This reader takes what is there and never fails on a broken line
(``tflog_lines`` finds each message by its own words, in linear time); a file with several
start-ups is split (``tflog_runs``) and one is read: the one that says most about peers, or ``run=N``. What
cannot be read becomes a ``ReadingNote`` in ``TfView.reading_notes`` (facts, which ``tf_findings``
words); a log of NCCL's lines alone (``NCCL_DEBUG=INFO``, MirroredStrategy's all-reduce) is read by what
they say of the process's GPUs (``tflog_nccl``); only a text naming no GPU at all is an ``InputError``.

Eras (newest last):

- TF 0.x/1.0 (``gpu_init.cc``): ``cannot enable peer access from device ordinal i to device
  ordinal j``; ``DMA: 0 1 2 3`` then rows ``0:   Y Y N N``; ``Creating TensorFlow device (/gpu:0)
  -> (device: 0, name: ..., pci bus id: ...)``.
- TF 1.2-1.4 (``gpu_device.cc``): ``Peer access not supported between device ordinals i and j``.
- TF 1.5-2.4: ``Device interconnect StreamExecutor with strength 1 edge matrix:``, a header line
  ``0 1 2 3`` (TF's visible GPUs: a header over none says TF used no GPU, and XLA's devices in that
  start-up are the platform's, not TF's), rows ``0:   N Y N N`` (an edge matrix: the diagonal is N), ``Adding visible gpu
  devices: 0, 1``, ``Created TensorFlow device (/job:.../device:GPU:0 with N MB memory) -> physical
  GPU (device: 0, name: ..., pci bus id: ..., compute capability: ...)``.
- TF >= 2.5: ``Created device /job:.../device:GPU:0 with N MB memory:  -> device: 0, ...``; since
  about TF 2.16 absl prefixes, and the edge matrix only at ``TF_CPP_MAX_VLOG_LEVEL=1``.
- TF 1.12-2.x with XLA: ``StreamExecutor device (N): NAME, Compute Capability X.Y``; ROCm builds print
  the same lines as CUDA ones (``Found device N`` with ``AMDGPU ISA: gfx906``), and their own twin of
  ``Ignoring visible gpu device (...) with Cuda compute capability X.Y``: ``with AMDGPU version : gfx1100.
  The supported AMDGPU versions are ...`` (TF 1.x: ``with AMDGPU ISA gfx801``), read alike.
- Any era on a box with more than 9 GPUs: ``Unable to enable peer access between device ordinals
  i and j ... CUDA_ERROR_TOO_MANY_PEERS`` (a GPU can map at most 8 peers). TF tries to enable only
  pairs CUDA says can peer, so the pair *can* peer; it is recorded in ``TfView.enable_failed``.

TF 0.x-1.4 loop over every ordered pair and log only the pairs that cannot peer. When a log has
those lines and no matrix, and they name every GPU as a source and as a target, the pairs it does
not name could peer: ``peer`` says True for them and ``TfView.peer_inferred`` is set.

How many GPUs TF had is what the log implies (``TfView.gpu_count``: any ordinal named, ``GPU:7`` or
``Found device 7`` or a peer line's 7 => at least 8), kept apart from the ordinals it names
(``devices``), never fewer than them, and a lower bound (``gpu_count_at_least``) wherever more.

Peer entries use the CUDA device ordinals the log prints (``device: N``), which are TensorFlow's
GPU numbers after ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER``. A device can always access its
own memory, so the diagonal of ``TfView.peer`` is ``True`` for every ordinal the log names.
"""

from __future__ import annotations

import re

from typing import Any

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.model import P2P_OK, Gpu, ReadingNote, TfView, Topology, make_link
from gputopo.sources.tf.tflog_lines import CREATED, MATRIX, PEER_LIMIT, message_of, scan_lines
from gputopo.sources.tf.tflog_nccl import nccl_view
from gputopo.sources.tf.tflog_runs import StartUp, chosen_startup, last_complete, peer_entries, split_startups
from gputopo.sources.tf.tflog_startup import (
    ERA_CUDA_PEER_LIMIT,
    ERA_NO_GPU,
    ERA_TF0,
    ERA_TF12,
    ERA_TF15,
    ERA_TF25,
    ERA_TF_ABSL,
    MAX_TF_ORDINAL,
    view_of_startup,
)

__all__ = [
    "ERA_CUDA_PEER_LIMIT", "ERA_NO_GPU", "ERA_TF0", "ERA_TF12", "ERA_TF15", "ERA_TF25", "ERA_TF_ABSL", "MAX_TF_ORDINAL",
    "message_of", "parse_tf_log", "read_tf_log", "topology_from_tf_view", "peer_state", "peer_word",
]

def read_tf_log(path: str, run: int | None = None) -> TfView:
    """Read a TensorFlow log file ('-' = standard input) into TensorFlow's view of the GPUs.

    ``run``: which start-up to read (from 1) when the log holds several; default the one that says
    most about peers (among equals the last complete one)."""
    text = read_text_input(path, what="TensorFlow log")
    return parse_tf_log(text, "standard input" if path == "-" else path, run=run)


def parse_tf_log(text: str, source: str, run: int | None = None) -> TfView:
    """TensorFlow's view of the GPUs from a log; ``InputError`` only when no GPU line is there, or
    ``run`` names a start-up the log does not hold.

    What could not be read (cut lines, missing matrix rows) is noted in ``TfView.reading_notes``.
    """
    if "\x00" in text:
        raise InputError(f"TensorFlow log {source} is binary, not text")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    events = scan_lines(text)
    startups = [s for s in split_startups(events) if _names_any_gpu(s)]
    if not startups:
        nccl = "NCCL INFO" in text or "NCCL WARN" in text
        view = nccl_view(text, source, run) if nccl else None  # MirroredStrategy's NCCL lines alone
        if view is not None:
            return view
        raise InputError(
            f"TensorFlow log {source} has no GPU lines: expected lines such as "
            "'Created device ... -> device: 0, name: ..., pci bus id: ...' or "
            "'cannot enable peer access from device ordinal 0 to device ordinal 2'"
            + ("; its NCCL lines (NCCL_DEBUG=INFO, as MirroredStrategy's NCCL all-reduce prints them) name no "
               "GPU and no rank: NCCL's settings and versions are read with --from" if nccl else "")
        )
    if run is None:
        index = chosen_startup(startups)
    elif 1 <= run <= len(startups):
        index = run - 1
    else:
        held = "one TensorFlow start-up" if len(startups) == 1 else f"{len(startups)} TensorFlow start-ups (1-{len(startups)})"
        raise InputError(f"--tf-run {run}: {source} holds {held}")
    view = view_of_startup(startups[index], source, text.split("\n"))
    view.startups, view.startup = len(startups), index + 1
    if len(startups) > 1:
        view.reading_notes.insert(0, _startups_note(startups, index, run))
    windows = _WINDOWS_SOURCE_RE.search(text)
    if windows is not None:  # TF's own source paths: a Windows build (c:\...\gpu_device.cc:832])
        view.reading_notes.append(ReadingNote("tf-log-windows", {"line": text.count("\n", 0, windows.start()) + 1}))
    return view


# A log line's source file as a Windows build of TensorFlow prints it: a drive letter, backslashes, ``.cc:N]``.
_WINDOWS_SOURCE_RE = re.compile(r"(?<![\w:\\])[A-Za-z]:\\[\w.\-]{1,120}(?:\\[\w.\-]{1,120}){1,40}\.cc:\d{1,6}\]")


def _startups_note(startups: list[StartUp], index: int, run: int | None) -> ReadingNote:
    """Which of several start-ups the view reads (``chosen``, from 1), why (``how``: ``asked`` with
    --tf-run, ``last-complete``, ``most-peers``, ``none-complete``), and the first six others."""
    chosen = startups[index]
    if run is not None:
        how = "asked"
    elif index == last_complete(startups) and all(peer_entries(s) <= peer_entries(chosen) for s in startups[index + 1 :]):
        how = "last-complete"
    elif peer_entries(chosen):
        how = "most-peers"
    else:
        how = "none-complete"
    others = [_summary(k + 1, s) for k, s in enumerate(startups) if k != index][:6]
    return ReadingNote("tf-log-startups", {"startups": len(startups), "chosen": index + 1, "how": how,
                                           "first_line": chosen.first_line, "others": others})


def _summary(number: int, startup: StartUp) -> dict[str, Any]:
    """One other start-up: where it starts, the GPUs it names (the first eight, and how many), how
    many peer entries it has, whether it is complete."""
    named = sorted(startup.names() | startup.created)
    return {"number": number, "first_line": startup.first_line, "gpus": named[:8], "gpu_count": len(named),
            "peer_entries": peer_entries(startup), "complete": startup.complete}


def _names_any_gpu(startup: StartUp) -> bool:
    return any(e.ordinals or e.kind in (PEER_LIMIT, MATRIX, CREATED) for e in startup.events)


def topology_from_tf_view(view: TfView) -> Topology:
    """A Topology from TensorFlow's view alone: GPUs are TF ordinals, links say only who can peer.

    Links are of type ``UNKNOWN`` (a TF log never says how GPUs are wired), with ``p2p_read``
    ``ok`` where TF peers both ways, ``NS`` where it cannot in either direction, ``None`` where the
    log is silent; ``p2p_write`` stays None (TF reports peer access, never write capability).
    ``recommend`` can still keep fast-exchange work within peer groups. A GPU's memory is left
    unknown: the log gives what TF allocated, not what the GPU has.
    """
    used = [d for d in view.devices if not d.ignored]  # a GPU TF ignores is no GPU to train on
    ordinals = sorted(d.ordinal for d in used)
    by_ordinal = {d.ordinal: d for d in used}
    gpus = []
    for o in ordinals:
        device = by_ordinal[o]
        gpus.append(
            Gpu(
                index=o,
                name=device.name,
                pci_bus_id=device.pci_bus_id,
                compute_capability=device.compute_capability,
            )
        )
    links = []
    for pos, a in enumerate(ordinals):
        for b in ordinals[pos + 1 :]:
            word = peer_word(view, a, b)
            links.append(make_link(a, b, "UNKNOWN", p2p_read=word, nvswitch=None))
    return Topology(
        gpus=gpus,
        links=links,
        source="tf-log",
        source_detail=view.source,
        label=f"TensorFlow's view from {view.source or 'a log'} (which GPUs can peer; no link types)",
        tf=view,
    )


def peer_state(view: TfView, a: int, b: int) -> bool | None:
    """Whether TF ordinals ``a`` and ``b`` peer: False if either direction failed, True if every
    direction the log states succeeded, None if the log is silent on both."""
    values = []
    for i, j in ((a, b), (b, a)):
        if i < len(view.peer) and j < len(view.peer[i]):
            values.append(view.peer[i][j])
    known = [v for v in values if v is not None]
    if not known:
        return None
    return all(known)


def peer_word(view: TfView, a: int, b: int) -> str | None:
    """The P2P status word for a pair as TF saw it: ``ok``, ``NS`` or ``None``."""
    state = peer_state(view, a, b)
    if state is None:
        return None
    return P2P_OK if state else "NS"
