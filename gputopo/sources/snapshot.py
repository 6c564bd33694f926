"""Saved topology snapshots (``gputopo scan --save``): JSON in the ``gputopo.topology/1`` schema.

A snapshot may come from anywhere (hand-edited, damaged, hostile), so reading one checks every
field and names the first wrong one in one ``InputError`` line (``box.json: gpus[3].index:
duplicate GPU index 2``): types and finite figures (``Topology.from_dict``), then what the values
may claim here (GPU indices and TF ordinals 0..4095, known P2P words, NVLink counts, CPU lists,
at most ``MAX_FINDINGS`` findings and as many reading notes).
"""

from __future__ import annotations

import json
import operator
import os
from typing import Any

from gputopo.errors import InputError
from gputopo.fileio import atomic_write_text
from gputopo.model.json_text import finite_or_null, gc_paused, strict_json_text  # noqa: F401 - re-exported
from gputopo.model import MAX_NVLINKS_PER_PAIR, P2P_STATUS_WORDS, PCIE_PATHS, Topology
from gputopo.notation import MAX_GPU_INDEX, MAX_GPUS, parse_cpu_list


def looks_like_snapshot(text: str) -> bool:
    return text.lstrip().startswith("{")


# `gputopo report` embeds the snapshot in its page as
# <script type="application/json" id="gputopo-snapshot">JSON with <, >, & written as \u003c ...</script>
REPORT_SNAPSHOT_ID = "gputopo-snapshot"
_REPORT_SNAPSHOT_OPEN = f'<script type="application/json" id="{REPORT_SNAPSHOT_ID}">'


def looks_like_report(text: str) -> bool:
    """An HTML page (a `gputopo report`, or another page given by mistake)."""
    head = text.lstrip()[:200].lower()
    return head.startswith("<!doctype html") or head.startswith("<html")


def report_snapshot_script(topology: Topology) -> str:
    """The ``<script>`` element that embeds the snapshot in a page; ``report_snapshot_text`` reads it.

    ``<``, ``>`` and ``&`` are written as JSON escapes, so no text from the topology (GPU names,
    paths) can close the element or start markup; ``json.loads`` reads them back unchanged."""
    body = topology.to_json_text(indent=1).rstrip("\n")
    body = body.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{REPORT_SNAPSHOT_ID}">{body}</script>'


def report_snapshot_text(text: str, source: str = "report") -> str:
    """The snapshot JSON embedded in a `gputopo report` page; an ``InputError`` if there is none."""
    # The first opening and the first ``</script>`` after it, each found once: a lazy ``.*?</script>``
    # pattern tried again from every opening, and a page of openings that never close took days.
    start = text.find(_REPORT_SNAPSHOT_OPEN)
    end = text.find("</script>", start + len(_REPORT_SNAPSHOT_OPEN)) if start >= 0 else -1
    if end < 0:
        raise InputError(
            f"{source} is an HTML page without an embedded gputopo snapshot "
            f"(expected a page written by `gputopo report`)"
        )
    return text[start + len(_REPORT_SNAPSHOT_OPEN) : end]


def parse_snapshot(text: str, source: str = "snapshot") -> Topology:
    """A Topology from snapshot JSON text; any problem is an ``InputError`` naming ``source`` and
    the field. NaN and Infinity parse as floats here and are refused with their field's name.
    Sizes are checked before anything is built (a 64 MiB file of GPUs is millions of objects)."""
    _refuse_absurd_sizes(text, source)
    with gc_paused():  # JSON makes no cycles: no collections while 165,600 links are made
        return _parse_checked(text, source)


def _parse_checked(text: str, source: str) -> Topology:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    except RecursionError:
        raise InputError(f"{source} is not a gputopo snapshot: its JSON is nested too deeply") from None
    except ValueError as exc:  # an integer of more than 4300 digits
        raise InputError(f"{source} is not a usable snapshot: {str(exc).split(';')[0]}") from None
    try:
        _check_counts(data)
        topology = Topology.from_dict(data, take=True)  # data is ours: read once, never used again
        _check_claims(topology)
    except ValueError as exc:
        raise InputError(f"{source}: {exc}") from None
    return topology


_P2P_WORDS = frozenset(P2P_STATUS_WORDS.values())
MAX_NICS = 4096
MAX_FINDINGS = 65536
# Figures a measurement may give: 1 PB/s and a thousand seconds are past any link (1e308 overflowed
# the search's integer arithmetic).
MAX_MEASURED_GBPS = 1e6
MAX_LATENCY_US = 1e9


def _check_counts(data: Any) -> None:
    """The sizes of a snapshot's lists, before anything is built from them: at most 4096 GPUs, one
    link per pair, ``MAX_NICS`` NICs (2.5 million duplicate GPUs took 1.2 GB before a refusal)."""
    if not isinstance(data, dict):
        return
    gpus = data.get("gpus")
    n = len(gpus) if isinstance(gpus, list) else 0
    nics = data.get("nics")
    limits = {"gpus": MAX_GPU_INDEX + 1, "links": n * (n - 1) // 2, "nics": MAX_NICS,
              "nic_links": n * min(len(nics) if isinstance(nics, list) else 0, MAX_NICS), "diagnostics": MAX_FINDINGS,
              "findings": MAX_FINDINGS, "reading_notes": MAX_FINDINGS}
    for key, most in limits.items():
        value = data.get(key)
        if key in ("links", "nic_links") and not isinstance(gpus, list):
            continue  # the type check names gpus
        if isinstance(value, list) and len(value) > most:
            raise ValueError(f"{key}: {len(value)} entries, more than the {most} this snapshot can have"
                             + (f" ({n} GPUs)" if key in ("links", "nic_links") else ""))
    tf = data.get("tf")
    for key in ("reading_notes", "notes"):  # notes: an older snapshot's (findings then)
        value = tf.get(key) if isinstance(tf, dict) else None
        if isinstance(value, list) and len(value) > MAX_FINDINGS:
            raise ValueError(f"tf.{key}: {len(value)} entries, more than the {MAX_FINDINGS} this snapshot can have")


def _check_number(value: int | None, where: str, largest: int | None = None) -> None:
    if value is not None and value < 0:
        raise ValueError(f"{where}: must not be negative, got {value}")
    if value is not None and largest is not None and value > largest:
        raise ValueError(f"{where}: {value} is above the largest allowed, {largest}")


def _check_measured(measured: Any, where: str) -> None:
    for name in ("a_to_b_gbps", "b_to_a_gbps", "bidirectional_gbps", "via_host_gbps", "latency_us"):
        value = getattr(measured, name)
        largest = MAX_LATENCY_US if name == "latency_us" else MAX_MEASURED_GBPS
        if value is not None and not 0 <= value <= largest:
            raise ValueError(f"{where}.{name}: {value:g} is outside 0..{largest:g}")
    _check_number(measured.size_bytes, f"{where}.size_bytes", 2**50)
    _check_number(measured.repeats, f"{where}.repeats", 2**31)


TEXT_GPU_BOUND = 16 * MAX_GPUS  # "index" keys in the text past which it is not even parsed


def _refuse_absurd_sizes(text: str, source: str) -> None:
    """More GPUs than gputopo numbers (``MAX_GPUS``): refused before the text is parsed, from an
    upper bound read without parsing (every GPU object has an ``"index"`` key; no other object of
    the schema has one), so a file of millions of GPUs costs neither the time nor the memory of
    parsing it; only far past the bound (``_check_counts`` checks every list exactly once parsed,
    and says it in its words)."""
    keys = text.count('"index"')
    if keys > TEXT_GPU_BOUND:
        raise InputError(f"{source}: {keys} \"index\" keys, more GPUs than gputopo reads ({MAX_GPUS}, "
                         f"indices 0..{MAX_GPU_INDEX})")


def _check_claims(topo: Topology) -> None:
    """What a well-typed snapshot's values may say; a ``ValueError`` names the first wrong field."""
    for k, gpu in enumerate(topo.gpus):
        _check_number(gpu.index, f"gpus[{k}].index", MAX_GPU_INDEX)
        for name, value in vars(gpu).items():
            if isinstance(value, int) and not isinstance(value, bool):
                _check_number(value, f"gpus[{k}].{name}")
        try:
            parse_cpu_list(gpu.cpu_affinity)
        except ValueError as exc:
            raise ValueError(f"gpus[{k}].cpu_affinity: {exc}") from None
    paths = {None, *PCIE_PATHS}
    if not _links_plausible(topo, paths):
        _name_wrong_link(topo.links, paths)
    known = set(topo.gpu_indices)
    for k, nic_link in enumerate(topo.nic_links):
        if nic_link.gpu not in known:
            raise ValueError(f"nic_links[{k}].gpu: GPU {nic_link.gpu} is not in gpus")
    for k, finding in enumerate(topo.diagnostics):
        for j, gpu_index in enumerate(finding.gpus):
            _check_number(gpu_index, f"diagnostics[{k}].gpus[{j}]", MAX_GPU_INDEX)
    _check_note_gpus(topo.reading_notes, "reading_notes")
    if topo.tf is not None:
        _check_note_gpus(topo.tf.reading_notes, "tf.reading_notes")
        _check_tf_claims(topo)


def _check_note_gpus(notes: list[Any], where: str) -> None:
    """A reading note's GPUs are GPU indices (or TF ordinals): 0..4095. Its facts are plain JSON,
    nested at most ``model.from_json.MAX_PLAIN_DEPTH`` deep (checked when built)."""
    for k, note in enumerate(notes):
        for j, gpu_index in enumerate(note.gpus):
            _check_number(gpu_index, f"{where}[{k}].gpus[{j}]", MAX_GPU_INDEX)


_P2P_FIELD_NAMES = ("p2p_read", "p2p_write", "p2p_atomics", "p2p_nvlink")


def _links_plausible(topo: Topology, paths: set[str | None]) -> bool:
    """The links' checks once per kind of link (``Topology.link_table``: a 576-GPU domain has
    165,600 links and a handful of kinds): True where every link passes; else ``_name_wrong_link``
    finds the first that does not."""
    try:
        table = topo.link_table()
    except TypeError:  # an unhashable word
        return False
    words = {None, *_P2P_WORDS}
    for link in table.examples:
        if not 0 <= link.nvlink_count <= MAX_NVLINKS_PER_PAIR or link.pcie_path not in paths:
            return False
        if not all(getattr(link, name) in words for name in _P2P_FIELD_NAMES):
            return False
    return not any(map(operator.attrgetter("measured"), topo.links))  # measured links: checked one by one


def _name_wrong_link(links: list[Any], paths: set[str | None]) -> None:
    """The first link whose values are not plausible, named in a ``ValueError``."""
    for k, link in enumerate(links):
        if not 0 <= link.nvlink_count <= MAX_NVLINKS_PER_PAIR:
            _check_number(link.nvlink_count, f"links[{k}].nvlink_count", MAX_NVLINKS_PER_PAIR)
        if link.measured is not None:
            _check_measured(link.measured, f"links[{k}].measured")
        if link.pcie_path not in paths:
            raise ValueError(f"links[{k}].pcie_path: unknown PCIe path word {link.pcie_path[:40]!r}")
        for name in _P2P_FIELD_NAMES:
            word = getattr(link, name)
            if word is not None and word not in _P2P_WORDS:
                raise ValueError(
                    f"links[{k}].{name}: unknown P2P word {word[:40]!r} (expected {', '.join(P2P_STATUS_WORDS.values())})"
                )


def _check_tf_claims(topo: Topology) -> None:
    tf = topo.tf
    assert tf is not None
    for k, device in enumerate(tf.devices):
        _check_number(device.ordinal, f"tf.devices[{k}].ordinal", MAX_GPU_INDEX)
        _check_number(device.nvml_index, f"tf.devices[{k}].nvml_index", MAX_GPU_INDEX)
        _check_number(device.memory_mb, f"tf.devices[{k}].memory_mb")
    for k, ordinal in enumerate(tf.visible_ordinals or []):
        _check_number(ordinal, f"tf.visible_ordinals[{k}]", MAX_GPU_INDEX)
    if len(tf.peer) > MAX_GPU_INDEX + 1:
        raise ValueError(f"tf.peer: {len(tf.peer)} rows, more than {MAX_GPU_INDEX + 1} TF ordinals")
    for k, row in enumerate(tf.peer):
        if len(row) != len(tf.peer):
            raise ValueError(f"tf.peer[{k}]: {len(row)} entries in a matrix of {len(tf.peer)} rows")


def snapshot_json(topology: Topology) -> str:
    """The snapshot as strict JSON: a non-finite figure (a failed measurement) is written as null,
    so the file reads back (NaN and Infinity are refused on reading)."""
    return topology.to_json_text()


def save_snapshot(topology: Topology, path: str | os.PathLike[str]) -> None:
    """Write the snapshot atomically: a crash leaves the old file or the new one, never half of one."""
    atomic_write_text(path, snapshot_json(topology))
