"""The words of what the TensorFlow log readers noticed (``ReadingNote``s of ``sources.tf.tflog*`` and
``tf_init``), for ``analysis.notes.reading_notes``:

- ``tf-log-cut``: every place a log is cut, in one note (each place in ``tf_cut_words``);
- ``tf-log-startups``: which of several start-ups (or, for NCCL's lines alone, processes) the view reads;
- ``tf-gpus-implied``: the log implies more GPUs than it names;
- ``tf-log-contradiction`` (warning): a "cannot peer" line against a matrix's Y;
- ``tf-peer-unknown``, ``tf-peer-walk-order``: pairs left unknown; pairs inferred from the order of the lines;
- ``tf-no-gpu-reason``: why TensorFlow saw no GPU (``scan --tf``);
- ``tf-no-visible-gpu``: an edge matrix over no GPU (TF's visible list was empty), the XLA devices left out;
- ``tf-log-nccl-only`` (``sources.tf.tflog_nccl``): a log of NCCL's lines alone (MirroredStrategy's all-reduce),
  its GPUs read from them;
- ``tf-log-windows``: the log's source paths show a Windows build, where GPUs peer only in the TCC driver model.

A TensorFlow view's notes are worded without the log's file name where the sentence can do without it
(the view's header names it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from gputopo.analysis.notes.reading_notes_tools import Words


def _plural(n: int, word: str) -> str:
    return f"{word}{'s' if n != 1 else ''}"


def tf_cut_words(place: dict[str, Any]) -> str:
    """One place a TensorFlow log is cut (``{"cut": kind, ...}``) in words."""
    kind = place["cut"]
    if kind == "created-line":
        line, tf_id = place["line"], place["tf_id"]
        what = f"the `Created device` line for GPU:{tf_id}" if tf_id is not None else "a `Created device` line"
        if place["before"] == "details":
            return f"line {line}: {what} is cut before its device details"
        return f"line {line}: {what} is cut short" if tf_id is not None else f"line {line}: {what} is cut before its device number"
    if kind == "bus-id":
        return f"line {place['line']}: the PCI bus id of GPU {place['gpu']} is cut short ({place['bus_id']!r})"
    if kind == "before-bus-id":
        return f"line {place['line']}: the `Created device` line for GPU {place['gpu']} is cut before its PCI bus id"
    if kind == "implausible-ordinal":
        return f"GPU ordinal {place['ordinal']} is not plausible and was ignored"
    if kind == "not-created":
        gpus = place["gpus"]
        return (f"TensorFlow listed GPU {', '.join(map(str, gpus))} but the log ends before it created "
                f"{'it' if len(gpus) == 1 else 'them'} (PCI bus ids and memory unknown)")
    if kind == "matrix-header":
        first, last = place["columns"]
        span = f"{first}-{last}" if first != last else str(first)
        return f"line {place['line']}: the peer matrix has no header line; columns read as ordinals {span}"
    if kind == "matrix-row":
        return f"the peer matrix row for GPU {place['gpu']} is cut short ({place['entries']} of {place['of']} entries)"
    if kind == "matrix-rows":
        return (f"line {place['line']}: the peer matrix has no rows for GPU {', '.join(map(str, place['gpus']))}; "
                "those entries are unknown unless other lines say")
    raise ValueError(f"unknown cut {kind!r}")


def _tf_log_cut(facts: dict[str, Any], gpus: list[int]) -> Words:
    cuts = facts["cuts"]
    places = f"{len(cuts)} {_plural(len(cuts), 'place')}"
    return ("info", f"{facts['source']} is cut short in {places}; what is there was read: "
            + "; ".join(tf_cut_words(place) for place in cuts), None)


def _tf_log_startups(facts: dict[str, Any], gpus: list[int]) -> Words:
    chosen, how = facts["chosen"], facts["how"]
    if how == "asked":
        using = f"using #{chosen} (--tf-run {chosen})"
    elif how == "last-complete":
        later = facts["startups"] - chosen
        skipped = f"; {'the one after it is' if later == 1 else f'the {later} after it are'} incomplete" if later else ""
        using = f"using the last complete one (#{chosen}{skipped})"
    elif how in ("most-peers", "most-gpus"):  # most-gpus: processes of NCCL lines alone (sources.tf.tflog_nccl)
        using = f"using #{chosen}, the one that {'names most GPUs' if how == 'most-gpus' else 'says most about which GPUs can peer'}"
    else:
        using = f"none is complete; using the last (#{chosen})"
    others = [f"#{o['number']} from line {o['first_line']} ({_startup_summary(o)})" for o in facts["others"]]
    return ("info", (f"the log holds {facts['startups']} TensorFlow start-ups; {using}, from line {facts['first_line']}; "
            f"the other{'s' if len(others) > 1 else ''}: {', '.join(others)}; pick another with --tf-run N"), None)


def _startup_summary(other: dict[str, Any]) -> str:
    count = other["gpu_count"]
    gpus = f"GPU{'s' if count != 1 else ''} {','.join(map(str, other['gpus']))}{'...' if count > 8 else ''}"
    peers = f"{other['peer_entries']} peer entries" if other["peer_entries"] else "nothing about peers"
    return f"{gpus}, {peers}{'' if other['complete'] else ', incomplete'}"


def _tf_gpus_implied(facts: dict[str, Any], gpus: list[int]) -> Words:
    named = facts["named"]
    names = f"it names {_plural(len(named), 'GPU')} {', '.join(map(str, named))}" if named else "it names none by number"
    return ("info", (f"the log implies at least {facts['count']} GPUs ({names}); the others are in a part of the log "
                     "that is not there"), None)


def _tf_log_contradiction(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("warning", (f"{facts['source']} line {facts['line']}: TensorFlow could not enable peer access "
            f"{facts['from']}->{facts['to']} although its matrix says Y; taken as no peer access"), None)


def _tf_peer_unknown(facts: dict[str, Any], gpus: list[int]) -> Words:
    missing, pairs = facts["missing"], facts["pairs"]
    why = (
        "the log looks cut short"
        if facts["cut"] or not missing
        else f"GPU {', '.join(map(str, missing))} {'is' if len(missing) == 1 else 'are'} not named on both sides of those lines (cut short?)"
    )
    shown = ", ".join(f"{a}-{b}" for a, b in pairs[:12]) + ("..." if len(pairs) > 12 else "")
    return "info", f"TensorFlow logs only the pairs that cannot peer, but {why}, so whether {shown} can peer is unknown", None


def _tf_peer_walk_order(facts: dict[str, Any], gpus: list[int]) -> Words:
    i, j = facts["last"]
    after = ("and the walk's end is in the log" if facts["complete"]
             else f"the log is cut after {i}->{j}, so pairs after it are unknown, and which pairs came before it "
                  "assumes TF walked the GPUs in number order (it does unless gpu_options.visible_device_list "
                  "reorders them)")
    return "info", (f"which pairs can peer is inferred from the order of TensorFlow's 'cannot peer' lines: it "
                    f"walks every ordered pair of its {facts['gpus']} GPUs source by source and logs only those "
                    f"that cannot peer, so the pairs it passed without a line could peer; {after}"), None


def _tf_no_gpu_reason(facts: dict[str, Any], gpus: list[int]) -> Words:
    return "info", f"TensorFlow said: {facts['said']}", None


def _tf_log_nccl_only(facts: dict[str, Any], gpus: list[int]) -> Words:
    devices = facts.get("devices") or []
    named = f"CUDA device{'s' if len(devices) != 1 else ''} {', '.join(map(str, devices))}" if devices else "no CUDA device"
    ranks = [f"nranks {facts['nranks']}"] if facts.get("nranks") else []
    ranks += [f"rings of {facts['ring']} ranks"] if facts.get("ring") else []
    return ("info", (f"the log holds no TensorFlow device line, only NCCL's (NCCL_DEBUG=INFO, as MirroredStrategy's "
                     f"NCCL all-reduce prints them): read as TensorFlow's process with at least {facts['count']} GPUs "
                     f"(its NCCL threads log on {named}{'; ' + ', '.join(ranks) + ': one GPU per rank' if ranks else ''}); "
                     "NCCL's lines do not say which GPUs can peer"),
            "for NCCL's own view (ranks, rings, each connection's transport) read the file with --from; for TensorFlow's, "
            "paste its start-up lines ('Created device ... -> device: N, ..., pci bus id: ...')")


def _tf_no_visible_gpu(facts: dict[str, Any], gpus: list[int]) -> Words:
    xla = facts.get("xla") or []
    seen = (f"; XLA's device lines name GPU {', '.join(map(str, xla))} of the CUDA platform, which TensorFlow did "
            "not use" if xla else "")
    return ("info", (f"TensorFlow's edge matrix lists no GPU: its visible GPU list was empty, so it used none{seen}"),
            "if TensorFlow should use the GPUs, check CUDA_VISIBLE_DEVICES and tf.config.set_visible_devices in the "
            "process that printed it")


def _tf_log_windows(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"the log's source paths (line {facts['line']}: a drive letter and backslashes before "
                     "`.cc:N]`) show a Windows build of TensorFlow: on Windows, CUDA lets two GPUs peer only where "
                     "both run the TCC driver model; GPUs in WDDM (display cards, most GeForce cards) report no peer "
                     "access, so TensorFlow stages their copies through host memory"),
            ("see each GPU's driver model in `nvidia-smi -q` ('Driver Model'); a card that supports TCC switches with "
             "`nvidia-smi -g N -dm 1` and a reboot (it then drives no display); for P2P on GeForce cards, train on Linux"))


TF_WORDINGS: dict[str, Callable[[dict[str, Any], list[int]], Words]] = {
    "tf-log-cut": _tf_log_cut,
    "tf-log-startups": _tf_log_startups,
    "tf-gpus-implied": _tf_gpus_implied,
    "tf-log-contradiction": _tf_log_contradiction,
    "tf-peer-unknown": _tf_peer_unknown,
    "tf-peer-walk-order": _tf_peer_walk_order,
    "tf-no-gpu-reason": _tf_no_gpu_reason,
    "tf-log-nccl-only": _tf_log_nccl_only,
    "tf-no-visible-gpu": _tf_no_visible_gpu,
    "tf-log-windows": _tf_log_windows,
}
