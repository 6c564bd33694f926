"""One TensorFlow start-up's events -> ``TfView``: devices, the peer matrix, what is inferred or cut.

``tflog`` splits a log into start-ups and calls ``view_of_startup`` on the one it reads. Steps:
collect what the lines say (``_collect``), drop ordinals no machine has (``_drop_implausible``), then
build the peer matrix by ordinal: matrices, pairs TF tried to enable (they can peer), pairs it
says cannot peer, and the inference TF 0.x-1.4's "cannot peer" lines allow.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from gputopo.errors import InputError
from gputopo.model import ReadingNote, TfDevice, TfView, normalize_pci_bus_id
from gputopo.sources.tf.tflog_lines import (
    BUS_RE,
    CREATED,
    DENIED,
    ENABLE_FAILED,
    ERA_LINE_FOUND,
    ERA_LINE_TF0,
    ERA_LINE_TF12,
    ERA_LINE_TF15,
    ERA_LINE_TF25,
    FOUND,
    IGNORED,
    MATRIX,
    NAME_RE,
    PEER_LIMIT,
    PROP_BUS_RE,
    PROP_NAME_RE,
    PROPS,
    ROW,
    VISIBLE,
    XLA,
    LogEvent,
)
from gputopo.sources.tf.tflog_matrix import TF_LOG_CUT, PeerMatrix, apply_matrix
from gputopo.sources.tf.tflog_order import infer_from_walk_order
from gputopo.sources.tf.tflog_runs import StartUp

ERA_TF0 = "tf0-gpu-init"
ERA_TF12 = "tf1.2-peer-access"
ERA_TF15 = "tf1.5-edge-matrix"
ERA_TF25 = "tf2-created-device"
ERA_TF_ABSL = "tf2.16-absl"
ERA_CUDA_PEER_LIMIT = "cuda-peer-limit"  # only CUDA_ERROR_TOO_MANY_PEERS lines: the TF version does not show
ERA_NO_GPU = "tf-no-gpu"  # TensorFlow ran and listed no GPU (``gputopo scan --tf``)
# Larger "ordinals" come from damaged lines, not from machines (the largest single hosts have a few
# dozen GPUs); the peer matrix is sized by the largest ordinal, so this also bounds its size.
MAX_TF_ORDINAL = 127
_ERA_ORDER = [ERA_CUDA_PEER_LIMIT, ERA_TF0, ERA_TF12, ERA_TF15, ERA_TF25, ERA_TF_ABSL]
_LINE_ERAS = {ERA_LINE_TF0: ERA_TF0, ERA_LINE_TF12: ERA_TF12, ERA_LINE_TF15: ERA_TF15, ERA_LINE_TF25: ERA_TF25}

_CC_RE = re.compile(r"\bcompute capability:[ \t]*(\d{1,3}\.\d{1,3})\b")
# TF 0.x-2.4 "Found device 0 with properties:" followed by name/pciBusID lines (or one line in 2.x).
_PROP_CC_RE = re.compile(r"(?:computeCapability:[ \t]*(\d{1,3}\.\d{1,3}))|(?:major:[ \t]*(\d{1,3})[ \t]+minor:[ \t]*(\d{1,3}))")


@dataclass
class _Facts:
    """What one start-up's lines say, before the peer matrix is built."""

    notes: list[ReadingNote] = field(default_factory=list)
    eras: set[str] = field(default_factory=set)
    weak_eras: set[str] = field(default_factory=set)  # from lines several eras print alike
    devices: dict[int, TfDevice] = field(default_factory=dict)
    denied: dict[tuple[int, int], int] = field(default_factory=dict)  # (i, j) -> line of the "cannot peer" line
    enable_failed: list[list[int]] = field(default_factory=list)
    too_many_peers: list[int] | None = None
    matrices: list[PeerMatrix] = field(default_factory=list)
    visible: list[int] | None = None
    none_visible: bool = False  # an edge matrix over no GPU: TensorFlow listed none (its visible list was empty)
    xla: set[int] = field(default_factory=set)  # ordinals XLA's StreamExecutor device lines name
    other_lines: set[int] = field(default_factory=set)  # ordinals a line other than XLA's names

    def named(self) -> set[int]:
        named = set(self.devices) | {o for pair in self.denied for o in pair}
        named |= {o for pair in self.enable_failed for o in pair} | set(self.too_many_peers or []) | set(self.visible or [])
        for matrix in self.matrices:
            named |= matrix.named()
        return named


def view_of_startup(startup: StartUp, source: str, lines: list[str] | None = None) -> TfView:
    """One start-up's events -> TfView (``InputError`` when no plausible ordinal is left); ``lines``:
    the log's lines, for what the order of its "cannot peer" lines says (``tflog_order``)."""
    facts = _collect(startup)
    if facts.none_visible:
        _keep_tf_devices_only(facts)
    named = _drop_implausible(facts)
    if not named and not facts.none_visible:
        raise InputError(f"TensorFlow log {source} names no plausible GPU ordinal")
    size = max(named, default=-1) + 1
    peer: list[list[bool | None]] = [[None] * size for _ in range(size)]
    for o in named:
        peer[o][o] = True
    for matrix in facts.matrices:
        apply_matrix(matrix, peer, facts.notes)
    for i, j in facts.enable_failed:  # TF tries to enable only pairs CUDA says can peer
        if i != j and peer[i][j] is None:
            peer[i][j] = True
    _apply_denied(facts.denied, peer, source, facts.notes)
    for o in named:
        facts.devices.setdefault(o, TfDevice(ordinal=o))
    _note_devices_not_created(startup, facts)
    walk = (lambda: None) if lines is None else (lambda: infer_from_walk_order(startup.events, lines, named, peer))
    inferred = _infer_unnamed_pairs(facts.denied, facts.matrices, facts.notes, sorted(named), peer, walk)
    count, at_least = _gpu_count(startup, facts)
    if at_least and count > len(facts.devices):
        facts.notes.append(ReadingNote("tf-gpus-implied", {"count": count, "named": sorted(facts.devices)}))
    return TfView(
        gpu_count=count,
        gpu_count_at_least=at_least,
        devices=[facts.devices[o] for o in sorted(facts.devices)],
        peer=peer,
        era=max(facts.eras, key=_ERA_ORDER.index) if facts.eras else None,
        source=source,
        visible_ordinals=facts.visible,
        reading_notes=_merge_cut_notes(facts.notes, source),
        peer_inferred=inferred,
        enable_failed=facts.enable_failed,
        too_many_peers=facts.too_many_peers,
    )


def _gpu_count(startup: StartUp, facts: _Facts) -> tuple[int, bool]:
    """``(how many GPUs TensorFlow's process had in this start-up, whether that is a lower bound)``.

    TF numbers its GPUs densely from 0 (``/device:GPU:k``), and so does CUDA among the devices a
    process sees: any ordinal a line names (``Found device N``, XLA's ``StreamExecutor device (N)``,
    a ``Created`` line's ``device: N``, a peer line or a matrix naming N, a GPU TF ignores) proves at
    least N+1. ``Adding visible gpu devices`` (with the GPUs TF ignores, which it leaves out of that
    list) and a whole peer matrix list them all: exact. A process whose GPUs are not numbered from 0
    (``gpu_options.visible_device_list``: an MPI rank using CUDA device 3 as its ``GPU:0``, a 1x1
    matrix of ordinal 7) has the GPUs TF numbers or lists, not its largest ordinal plus one."""
    ignored = {o for o, d in facts.devices.items() if d.ignored}
    tf_ids = {e.tf_id for e in startup.events if e.kind == CREATED and e.tf_id is not None and e.tf_id <= MAX_TF_ORDINAL}
    lists = [set(m.columns()) for m in facts.matrices if m.rows and set(m.columns()) <= set(m.rows)]
    if facts.visible is not None:
        lists.append(set(facts.visible) | ignored)
    remapped = any(e.kind == CREATED and e.tf_id is not None and e.ordinals and e.ordinals[0] != e.tf_id
                   for e in startup.events) or any(listed and max(listed) + 1 > len(listed) for listed in lists)
    counts = [max(tf_ids) + 1] if tf_ids else []
    counts += [len(listed) for listed in lists] + [len(m.columns()) for m in facts.matrices]
    if not remapped:  # every ordinal named: the devices, and every pair and matrix's GPUs
        counts.append(max(facts.named() | ignored, default=-1) + 1)
    count = max(counts, default=0)
    exact = any(len(listed) == count for listed in lists)
    exact = exact or (startup.complete and (not tf_ids or tf_ids == set(range(max(tf_ids) + 1))) and count <= len(facts.devices))
    return count, not exact


def _collect(startup: StartUp) -> _Facts:
    """Walk the start-up's events in line order."""
    facts = _Facts()
    found: TfDevice | None = None  # the "Found device N" whose detail lines follow
    for event in startup.events:
        if event.era == ERA_LINE_FOUND:
            facts.weak_eras.add(ERA_TF15)
        elif event.era:
            facts.eras.add(_LINE_ERAS[event.era])
        if event.absl:
            facts.eras.add(ERA_TF_ABSL)
        kind, ordinals = event.kind, event.ordinals
        if kind != XLA:
            facts.other_lines.update(ordinals)
        if kind == DENIED:
            facts.denied.setdefault((ordinals[0], ordinals[1]), event.line_no)
        elif kind in (ENABLE_FAILED, PEER_LIMIT):
            if kind == ENABLE_FAILED and ordinals not in facts.enable_failed:
                facts.enable_failed.append(list(ordinals))
            if event.too_many_peers or kind == PEER_LIMIT:
                facts.too_many_peers = sorted(set(facts.too_many_peers or []) | set(ordinals[:1]))
        elif kind == MATRIX and event.empty_header:
            facts.none_visible = True
        elif kind == MATRIX:
            facts.matrices.append(PeerMatrix(list(ordinals), event.line_no, diagonal_is_self=event.diagonal_is_self))
        elif kind == ROW and facts.matrices:
            facts.matrices[-1].add_row(ordinals[0], event.values)
        elif kind == VISIBLE:
            facts.visible = list(ordinals)
        elif kind == CREATED:
            _read_created(event, facts.devices, facts.notes)
        elif kind == FOUND:
            found = facts.devices.setdefault(ordinals[0], TfDevice(ordinal=ordinals[0]))
            _read_properties(found, event.text)
        elif kind == XLA:
            facts.xla.add(ordinals[0])
            xla = facts.devices.setdefault(ordinals[0], TfDevice(ordinal=ordinals[0]))
            _read_created_details(xla, event.text)
        elif kind == PROPS and found is not None:
            _read_properties(found, event.text)
        elif kind == IGNORED:  # CUDA's and ROCm's lines alike: "(device: N, name: ..., pci bus id: ...) with ..."
            ignored = facts.devices.setdefault(ordinals[0], TfDevice(ordinal=ordinals[0]))
            ignored.ignored = event.reason
            said = TfDevice(ordinal=ordinals[0])  # its name is cut at a comma: "Found device" says more
            _read_created_details(said, event.text)
            ignored.name = ignored.name or said.name
            ignored.pci_bus_id = ignored.pci_bus_id or said.pci_bus_id
            ignored.compute_capability = ignored.compute_capability or said.compute_capability
    if not facts.eras and facts.too_many_peers is not None:
        facts.eras.add(ERA_CUDA_PEER_LIMIT)
    if not facts.eras:
        facts.eras = facts.weak_eras
    return facts


def _keep_tf_devices_only(facts: _Facts) -> None:
    """TF's edge matrix lists no GPU (its header over TF's visible GPUs is empty): TF used none. XLA's
    ``StreamExecutor device (N)`` lines name the CUDA platform's devices, not TF's: they leave the
    devices, said in a ``tf-no-visible-gpu`` note; a device another line names (Created, a peer line) stays."""
    if facts.visible is None:
        facts.visible = []
    xla_only = sorted(o for o, d in facts.devices.items() if o in facts.xla and o not in facts.other_lines)
    for o in xla_only:
        del facts.devices[o]
    facts.notes.append(ReadingNote("tf-no-visible-gpu", {"xla": xla_only[:MAX_TF_ORDINAL + 1]}))


def _drop_implausible(facts: _Facts) -> set[int]:
    """Ordinals above ``MAX_TF_ORDINAL`` come from damaged lines: dropped with a note (a square
    matrix that big would only waste memory and time). Returns the ordinals left."""
    named = facts.named()
    too_large = sorted(o for o in named if o > MAX_TF_ORDINAL)
    if not too_large:
        return named

    def keep(ordinals: list[int]) -> bool:
        return max(ordinals, default=0) <= MAX_TF_ORDINAL

    facts.notes.append(_cut_note({"cut": "implausible-ordinal", "ordinal": too_large[0]}))
    facts.devices = {o: d for o, d in facts.devices.items() if o <= MAX_TF_ORDINAL}
    facts.denied = {pair: n for pair, n in facts.denied.items() if keep(list(pair))}
    facts.enable_failed = [pair for pair in facts.enable_failed if keep(pair)]
    if facts.too_many_peers is not None:
        facts.too_many_peers = [o for o in facts.too_many_peers if o <= MAX_TF_ORDINAL]
    if facts.visible is not None:
        facts.visible = [o for o in facts.visible if o <= MAX_TF_ORDINAL]
    for matrix in facts.matrices:
        matrix.ordinals = [o for o in matrix.ordinals if o <= MAX_TF_ORDINAL]
        matrix.rows = {o: v for o, v in matrix.rows.items() if o <= MAX_TF_ORDINAL}
    return named - set(too_large)


def _apply_denied(denied: dict[tuple[int, int], int], peer: list[list[bool | None]], source: str,
                  notes: list[ReadingNote]) -> None:
    for (i, j), line_no in sorted(denied.items()):
        if i == j:
            continue
        if peer[i][j] is True:  # the matrix said Y: taken as no peer access
            notes.append(ReadingNote("tf-log-contradiction", {"source": source, "line": line_no, "from": i, "to": j},
                                     sorted({i, j})))
        peer[i][j] = False


def _infer_unnamed_pairs(
    denied: dict[tuple[int, int], int],
    matrices: list[PeerMatrix],
    notes: list[ReadingNote],
    ordinals: list[int],
    peer: list[list[bool | None]],
    walk: Callable[[], dict[str, Any] | None],
) -> bool:
    """TF 0.x-1.4 log a line for each ordered pair that cannot peer: with no matrix, when those lines
    name every GPU as a source and as a target and nothing looks cut, the unnamed pairs could peer.
    Otherwise ``walk`` (``tflog_order``: what the lines' order proves, setting those pairs) is asked,
    and what stays unknown is noted, then the walk's inference, named as one. Returns whether any
    pair was inferred."""
    if not denied or matrices:
        return False
    unnamed = [(a, b) for pos, a in enumerate(ordinals) for b in ordinals[pos + 1 :] if peer[a][b] is None and peer[b][a] is None]
    sources, targets = {i for i, _ in denied}, {j for _, j in denied}
    cut = any(n.code == TF_LOG_CUT for n in notes)
    if unnamed and set(ordinals) <= sources and set(ordinals) <= targets and not cut:
        for a, b in unnamed:
            peer[a][b] = peer[b][a] = True
        return True
    walked = walk()
    left = [[a, b] for a, b in unnamed if peer[a][b] is None and peer[b][a] is None]
    if left:
        missing = sorted((set(ordinals) - sources) | (set(ordinals) - targets))  # not named on both sides
        cut = cut or (walked is not None and not walked["complete"])
        notes.append(ReadingNote("tf-peer-unknown", {"cut": cut, "missing": missing, "pairs": left},
                                 sorted({o for pair in left for o in pair})))
    if walked is not None:
        notes.append(ReadingNote("tf-peer-walk-order", walked, ordinals))
    return walked is not None


def _note_devices_not_created(startup: StartUp, facts: _Facts) -> None:
    """The log ends (or the excerpt stops) before TF created every GPU it listed."""
    created = startup.created
    listed = set(facts.visible or []) | {o for m in facts.matrices for o in m.columns()} | set(startup.found)
    listed -= {o for o, d in facts.devices.items() if d.ignored}
    if not created or not listed:
        return
    missing = sorted(listed - created)
    if missing:
        facts.notes.append(_cut_note({"cut": "not-created", "gpus": missing}))


def _merge_cut_notes(notes: list[ReadingNote], source: str) -> list[ReadingNote]:
    """One note for all the cut places, first: findings are told apart by code and GPUs, and a list
    of places reads better than a dozen near-identical lines."""
    cut = [n for n in notes if n.code == TF_LOG_CUT]
    if not cut:
        return notes
    rest = [n for n in notes if n.code != TF_LOG_CUT]
    return [ReadingNote(TF_LOG_CUT, {"source": source, "cuts": [n.facts for n in cut]}), *rest]


def _read_created(event: LogEvent, devices: dict[int, TfDevice], notes: list[ReadingNote]) -> None:
    """One ``Creat(ed|ing) ... device`` line: fill the device it names, note what is cut off."""
    if event.cut:
        notes.append(_cut_note({"cut": "created-line", "line": event.line_no, "before": event.cut, "tf_id": event.tf_id}))
    ordinal = event.ordinals[0] if event.ordinals else event.tf_id  # cut before "device: N": TF's own number
    if ordinal is None:
        return
    device = devices.setdefault(ordinal, TfDevice(ordinal=ordinal))
    if event.memory_mb is not None:
        device.memory_mb = event.memory_mb
    if not event.ordinals:
        return
    device.tf_id = event.tf_id
    _read_created_details(device, event.text, notes, event.line_no, ordinal)


def _read_created_details(device: TfDevice, detail: str, notes: list[ReadingNote] | None = None, line_no: int = 0,
                          ordinal: int = 0) -> None:
    """Name, PCI bus id (a cut one noted where ``notes`` is given) and compute capability."""
    name = NAME_RE.search(detail)
    if name and name.group(1).strip():  # ROCm may print "name: , pci bus id: ...": no name
        device.name = name.group(1).strip()
    bus = BUS_RE.search(detail)
    if bus:
        normalized = normalize_pci_bus_id(bus.group(1))
        if normalized:
            device.pci_bus_id = normalized
        elif notes is not None:
            notes.append(_cut_note({"cut": "bus-id", "line": line_no, "gpu": ordinal, "bus_id": bus.group(1)}))
    elif notes is not None:  # every era prints the bus id after the name: the line is cut
        notes.append(_cut_note({"cut": "before-bus-id", "line": line_no, "gpu": ordinal}))
    cc = _CC_RE.search(detail)
    if cc and device.compute_capability is None:
        device.compute_capability = cc.group(1)


def _read_properties(device: TfDevice, text: str) -> None:
    """Name, PCI bus id and compute capability from ``Found device N with properties:`` lines."""
    name = PROP_NAME_RE.search(text)
    if name and device.name is None:
        device.name = name.group(1).strip()
    bus = PROP_BUS_RE.search(text)
    if bus and device.pci_bus_id is None:
        device.pci_bus_id = normalize_pci_bus_id(bus.group(1))
    cc = _PROP_CC_RE.search(text)
    if cc and device.compute_capability is None:
        device.compute_capability = cc.group(1) or f"{cc.group(2)}.{cc.group(3)}"


def _cut_note(place: dict[str, Any]) -> ReadingNote:
    """One place the log is cut (``{"cut": kind, ...}``); ``_merge_cut_notes`` gathers them."""
    return ReadingNote(TF_LOG_CUT, place)
