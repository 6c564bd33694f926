"""TensorFlow device-initialisation logs (every era) -> ``TfView``; a TfView -> Topology.

People meet their GPU topology first as TensorFlow log lines, copied into issues half-cut and
mixed with other output. This reader takes what is there and never fails on a broken line
(``tflog_lines`` finds each message by its own words, in linear time); a file with several
start-ups is split (``tflog_runs``) and one is read: the last complete one, or ``run=N``. What
cannot be read becomes a ``Finding`` in ``TfView.notes`` (which ``tf_findings`` reports); only a
text with no GPU line at all is an ``InputError``.

Eras (newest last):

- TF 0.x/1.0 (``gpu_init.cc``): ``cannot enable peer access from device ordinal i to device
  ordinal j``; ``DMA: 0 1 2 3`` then rows ``0:   Y Y N N``; ``Creating TensorFlow device (/gpu:0)
  -> (device: 0, name: ..., pci bus id: ...)``.
- TF 1.2-1.4 (``gpu_device.cc``): ``Peer access not supported between device ordinals i and j``.
- TF 1.5-2.4: ``Device interconnect StreamExecutor with strength 1 edge matrix:``, a header line
  ``0 1 2 3``, rows ``0:   N Y N N`` (an edge matrix: the diagonal is N), ``Adding visible gpu
  devices: 0, 1``, ``Created TensorFlow device (/job:.../device:GPU:0 with N MB memory) -> physical
  GPU (device: 0, name: ..., pci bus id: ..., compute capability: ...)``.
- TF >= 2.5: ``Created device /job:.../device:GPU:0 with N MB memory:  -> device: 0, ...``; since
  about TF 2.16 absl prefixes, and the edge matrix only at ``TF_CPP_MAX_VLOG_LEVEL=1``.
- Any era on a box with more than 9 GPUs: ``Unable to enable peer access between device ordinals
  i and j ... CUDA_ERROR_TOO_MANY_PEERS`` (a GPU can map at most 8 peers). TF tries to enable only
  pairs CUDA says can peer, so the pair *can* peer; it is recorded in ``TfView.enable_failed``.

TF 0.x-1.4 loop over every ordered pair and log only the pairs that cannot peer. When a log has
those lines and no matrix, and they name every GPU as a source and as a target, the pairs it does
not name could peer: ``peer`` says True for them and ``TfView.peer_inferred`` is set.

Peer entries use the CUDA device ordinals the log prints (``device: N``), which are TensorFlow's
GPU numbers after ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER``. A device can always access its
own memory, so the diagonal of ``TfView.peer`` is ``True`` for every ordinal the log names.
"""

from __future__ import annotations

import re

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.model import (
    P2P_OK,
    Finding,
    Gpu,
    TfDevice,
    TfView,
    Topology,
    make_link,
    normalize_pci_bus_id,
)
from gputopo.sources.tflog_lines import (
    CREATED,
    DENIED,
    ENABLE_FAILED,
    ERA_LINE_TF0,
    ERA_LINE_TF12,
    ERA_LINE_TF15,
    ERA_LINE_TF25,
    FOUND,
    IGNORED,
    MATRIX,
    PEER_LIMIT,
    PROPS,
    ROW,
    VISIBLE,
    LogEvent,
    message_of,
    scan_lines,
)
from gputopo.sources.tflog_matrix import PeerMatrix, apply_matrix
from gputopo.sources.tflog_runs import StartUp, chosen_startup, split_startups

__all__ = ["message_of", "parse_tf_log", "read_tf_log", "topology_from_tf_view", "peer_state", "peer_word"]

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

_NAME_RE = re.compile(r"\bname:[ \t]*([^,)]{1,200}?)[ \t]*(?=[,)])")
_BUS_RE = re.compile(r"\bpci bus id:[ \t]*([0-9a-fA-F:.]{1,32})")
_CC_RE = re.compile(r"\bcompute capability:[ \t]*(\d{1,3}\.\d{1,3})\b")
# TF 0.x-2.4 "Found device 0 with properties:" followed by name/pciBusID lines (or one line in 2.x).
_PROP_NAME_RE = re.compile(r"\bname:[ \t]*(.{1,200}?)[ \t]*(?=[ \t](?:major:|computeCapability:|pciBusID)|$)")
_PROP_BUS_RE = re.compile(r"\bpciBusID:?[ \t]*([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_PROP_CC_RE = re.compile(r"(?:computeCapability:[ \t]*(\d{1,3}\.\d{1,3}))|(?:major:[ \t]*(\d{1,3})[ \t]+minor:[ \t]*(\d{1,3}))")


def read_tf_log(path: str, run: int | None = None) -> TfView:
    """Read a TensorFlow log file ('-' = standard input) into TensorFlow's view of the GPUs.

    ``run``: which start-up to read (from 1) when the log holds several; default the last complete one."""
    text = read_text_input(path, what="TensorFlow log")
    return parse_tf_log(text, "standard input" if path == "-" else path, run=run)


def parse_tf_log(text: str, source: str, run: int | None = None) -> TfView:
    """TensorFlow's view of the GPUs from a log; ``InputError`` only when no GPU line is there, or
    ``run`` names a start-up the log does not hold.

    What could not be read (cut lines, missing matrix rows) is listed in ``TfView.notes``.
    """
    if "\x00" in text:
        raise InputError(f"TensorFlow log {source} is binary, not text")
    events = scan_lines(text.replace("\r\n", "\n").replace("\r", "\n"))
    startups = [s for s in split_startups(events) if _names_any_gpu(s)]
    if not startups:
        raise InputError(
            f"TensorFlow log {source} has no GPU lines: expected lines such as "
            "'Created device ... -> device: 0, name: ..., pci bus id: ...' or "
            "'cannot enable peer access from device ordinal 0 to device ordinal 2'"
        )
    if run is None:
        index = chosen_startup(startups)
    elif 1 <= run <= len(startups):
        index = run - 1
    else:
        held = "one TensorFlow start-up" if len(startups) == 1 else f"{len(startups)} TensorFlow start-ups (1-{len(startups)})"
        raise InputError(f"--tf-run {run}: {source} holds {held}")
    view = _view_of(startups[index], source)
    view.startups, view.startup = len(startups), index + 1
    if len(startups) > 1:
        view.notes.insert(0, _startups_note(startups, index, run))
    return view


def _startups_note(startups: list[StartUp], index: int, run: int | None) -> Finding:
    """Which of several start-ups the view reads, and how to pick another."""
    if run is not None:
        using = f"using #{run} (--tf-run {run})"
    elif startups[index].complete:
        later = len(startups) - 1 - index
        skipped = f"; {'the one after it is' if later == 1 else f'the {later} after it are'} incomplete" if later else ""
        using = f"using the last complete one (#{index + 1}{skipped})"
    else:
        using = f"none is complete; using the last (#{index + 1})"
    first = startups[index].first_line
    return Finding(
        "info",
        "tf-log-startups",
        f"the log holds {len(startups)} TensorFlow start-ups; {using}, from line {first}; pick another with --tf-run N",
    )


def _names_any_gpu(startup: StartUp) -> bool:
    return any(e.ordinals or e.kind in (PEER_LIMIT, MATRIX, CREATED) for e in startup.events)


def _view_of(startup: StartUp, source: str) -> TfView:
    """One start-up's events -> TfView."""
    notes: list[Finding] = []
    eras: set[str] = set()
    devices: dict[int, TfDevice] = {}
    denied: dict[tuple[int, int], int] = {}  # (i, j) -> line number of the "cannot peer" line
    enable_failed: list[list[int]] = []
    too_many_peers: list[int] | None = None
    matrices: list[PeerMatrix] = []
    visible: list[int] | None = None
    found: TfDevice | None = None  # the "Found device N" whose detail lines follow

    for event in startup.events:
        if event.era:
            eras.add(_LINE_ERAS[event.era])
        if event.absl:
            eras.add(ERA_TF_ABSL)
        kind, ordinals = event.kind, event.ordinals
        if kind == DENIED:
            denied.setdefault((ordinals[0], ordinals[1]), event.line_no)
        elif kind in (ENABLE_FAILED, PEER_LIMIT):
            if kind == ENABLE_FAILED and ordinals not in enable_failed:
                enable_failed.append(list(ordinals))
            if event.too_many_peers or kind == PEER_LIMIT:
                too_many_peers = sorted(set(too_many_peers or []) | set(ordinals[:1]))
        elif kind == MATRIX:
            matrices.append(PeerMatrix(list(ordinals), event.line_no, diagonal_is_self=event.diagonal_is_self))
        elif kind == ROW and matrices:
            matrices[-1].add_row(ordinals[0], event.values)
        elif kind == VISIBLE:
            visible = list(ordinals)
        elif kind == CREATED:
            _read_created(event, devices, notes)
        elif kind == FOUND:
            found = devices.setdefault(ordinals[0], TfDevice(ordinal=ordinals[0]))
            _read_properties(found, event.text)
        elif kind == PROPS and found is not None:
            _read_properties(found, event.text)
        elif kind == IGNORED:
            devices.setdefault(ordinals[0], TfDevice(ordinal=ordinals[0])).ignored = event.text
    if not eras and too_many_peers is not None:
        eras.add(ERA_CUDA_PEER_LIMIT)

    named: set[int] = set(devices) | {o for pair in denied for o in pair} | {o for pair in enable_failed for o in pair}
    named |= set(too_many_peers or []) | set(visible or [])
    for matrix in matrices:
        named |= matrix.named()
    too_large = sorted(o for o in named if o > MAX_TF_ORDINAL)
    if too_large:  # a damaged number; a square matrix that big would only waste memory and time
        notes.append(_cut_note(f"GPU ordinal {too_large[0]} is not plausible and was ignored"))
        named -= set(too_large)
        devices = {o: d for o, d in devices.items() if o <= MAX_TF_ORDINAL}
        denied = {pair: n for pair, n in denied.items() if max(pair) <= MAX_TF_ORDINAL}
        enable_failed = [pair for pair in enable_failed if max(pair) <= MAX_TF_ORDINAL]
        too_many_peers = [o for o in too_many_peers if o <= MAX_TF_ORDINAL] if too_many_peers is not None else None
        visible = [o for o in visible if o <= MAX_TF_ORDINAL] if visible is not None else None
        for matrix in matrices:
            matrix.ordinals = [o for o in matrix.ordinals if o <= MAX_TF_ORDINAL]
            matrix.rows = {o: v for o, v in matrix.rows.items() if o <= MAX_TF_ORDINAL}
    if not named:
        raise InputError(f"TensorFlow log {source} names no plausible GPU ordinal")

    size = max(named) + 1
    peer: list[list[bool | None]] = [[None] * size for _ in range(size)]
    for o in named:
        peer[o][o] = True
    for matrix in matrices:
        apply_matrix(matrix, peer, notes)
    for i, j in enable_failed:  # TF tries to enable only pairs CUDA says can peer
        if i != j and peer[i][j] is None:
            peer[i][j] = True
    _apply_denied(denied, peer, source, notes)
    for o in named:
        devices.setdefault(o, TfDevice(ordinal=o))
    _note_devices_not_created(startup, devices, visible, matrices, notes)
    inferred = _infer_unnamed_pairs(denied, matrices, notes, sorted(named), peer)
    return TfView(
        devices=[devices[o] for o in sorted(devices)],
        peer=peer,
        era=max(eras, key=_ERA_ORDER.index) if eras else None,
        source=source,
        visible_ordinals=visible,
        notes=_merge_cut_notes(notes, source),
        peer_inferred=inferred,
        enable_failed=enable_failed,
        too_many_peers=too_many_peers,
    )


def _apply_denied(denied: dict[tuple[int, int], int], peer: list[list[bool | None]], source: str, notes: list[Finding]) -> None:
    for (i, j), line_no in sorted(denied.items()):
        if i == j:
            continue
        if peer[i][j] is True:
            notes.append(
                Finding(
                    "warning",
                    "tf-log-contradiction",
                    f"{source} line {line_no}: TensorFlow could not enable peer access {i}->{j} although "
                    "its matrix says Y; taken as no peer access",
                    gpus=sorted({i, j}),
                )
            )
        peer[i][j] = False


def _infer_unnamed_pairs(
    denied: dict[tuple[int, int], int],
    matrices: list[PeerMatrix],
    notes: list[Finding],
    ordinals: list[int],
    peer: list[list[bool | None]],
) -> bool:
    """TF 0.x-1.4 log a line for each ordered pair that cannot peer: with no matrix, when those lines
    name every GPU as a source and as a target and nothing looks cut, the unnamed pairs could peer.
    Sets them True and returns whether any was; otherwise notes what stays unknown."""
    if not denied or matrices:
        return False
    unnamed = [(a, b) for pos, a in enumerate(ordinals) for b in ordinals[pos + 1 :] if peer[a][b] is None and peer[b][a] is None]
    if not unnamed:
        return False
    sources, targets = {i for i, _ in denied}, {j for _, j in denied}
    cut = any(n.code == "tf-log-cut" for n in notes)
    if set(ordinals) <= sources and set(ordinals) <= targets and not cut:
        for a, b in unnamed:
            peer[a][b] = peer[b][a] = True
        return True
    missing = sorted((set(ordinals) - sources) | (set(ordinals) - targets))
    why = (
        "the log looks cut short"
        if cut or not missing
        else f"GPU {', '.join(map(str, missing))} {'is' if len(missing) == 1 else 'are'} not named on both sides of those lines (cut short?)"
    )
    notes.append(
        Finding(
            "info",
            "tf-peer-unknown",
            "TensorFlow logs only the pairs that cannot peer, but " + why + ", so whether "
            + ", ".join(f"{a}-{b}" for a, b in unnamed[:12]) + ("..." if len(unnamed) > 12 else "")
            + " can peer is unknown",
            gpus=sorted({o for pair in unnamed for o in pair}),
        )
    )
    return False


def _note_devices_not_created(
    startup: StartUp, devices: dict[int, TfDevice], visible: list[int] | None, matrices: list[PeerMatrix], notes: list[Finding]
) -> None:
    """The log ends (or the excerpt stops) before TF created every GPU it listed."""
    created = startup.created
    listed = set(visible or []) | {o for m in matrices for o in m.columns()} | set(startup.found)
    listed -= {o for o, d in devices.items() if d.ignored}
    if not created or not listed:
        return
    missing = sorted(listed - created)
    if missing:
        notes.append(
            _cut_note(
                f"TensorFlow listed GPU {', '.join(map(str, missing))} but the log ends before it created "
                f"{'it' if len(missing) == 1 else 'them'} (PCI bus ids and memory unknown)"
            )
        )


def _merge_cut_notes(notes: list[Finding], source: str) -> list[Finding]:
    """One finding for all the cut places: findings are told apart by code and GPUs, and a list of
    places reads better than a dozen near-identical lines."""
    cut = [n for n in notes if n.code == "tf-log-cut"]
    if not cut:
        return notes
    rest = [n for n in notes if n.code != "tf-log-cut"]
    places = f"{len(cut)} place{'s' if len(cut) > 1 else ''}"
    merged = Finding("info", "tf-log-cut", f"{source} is cut short in {places}; what is there was read: " + "; ".join(n.message for n in cut))
    return [merged, *rest]


def _read_created(event: LogEvent, devices: dict[int, TfDevice], notes: list[Finding]) -> None:
    """One ``Creat(ed|ing) ... device`` line: fill the device it names, note what is cut off."""
    where = f"line {event.line_no}"
    if event.cut:
        notes.append(_cut_note(f"{where}: {event.cut}"))
    ordinal = event.ordinals[0] if event.ordinals else event.tf_id  # cut before "device: N": TF's own number
    if ordinal is None:
        return
    device = devices.setdefault(ordinal, TfDevice(ordinal=ordinal))
    if event.memory_mb is not None:
        device.memory_mb = event.memory_mb
    if not event.ordinals:
        return
    device.tf_id = event.tf_id
    detail = event.text
    name = _NAME_RE.search(detail)
    if name:
        device.name = name.group(1).strip()
    bus = _BUS_RE.search(detail)
    if bus:
        normalized = normalize_pci_bus_id(bus.group(1))
        if normalized:
            device.pci_bus_id = normalized
        else:
            notes.append(_cut_note(f"{where}: the PCI bus id of GPU {ordinal} is cut short ({bus.group(1)!r})"))
    else:  # every era prints the bus id after the name: the line is cut
        notes.append(_cut_note(f"{where}: the `Created device` line for GPU {ordinal} is cut before its PCI bus id"))
    cc = _CC_RE.search(detail)
    if cc:
        device.compute_capability = cc.group(1)


def _read_properties(device: TfDevice, text: str) -> None:
    """Name, PCI bus id and compute capability from ``Found device N with properties:`` lines."""
    name = _PROP_NAME_RE.search(text)
    if name and device.name is None:
        device.name = name.group(1).strip()
    bus = _PROP_BUS_RE.search(text)
    if bus and device.pci_bus_id is None:
        device.pci_bus_id = normalize_pci_bus_id(bus.group(1))
    cc = _PROP_CC_RE.search(text)
    if cc and device.compute_capability is None:
        device.compute_capability = cc.group(1) or f"{cc.group(2)}.{cc.group(3)}"


def _cut_note(what: str) -> Finding:
    return Finding("info", "tf-log-cut", what)


def topology_from_tf_view(view: TfView) -> Topology:
    """A Topology from TensorFlow's view alone: GPUs are TF ordinals, links say only who can peer.

    Links are of type ``UNKNOWN`` (a TF log never says how GPUs are wired), with P2P read/write
    ``ok`` where TF peers both ways, ``NS`` where it cannot in either direction, ``None`` where the
    log is silent. ``recommend`` can still keep fast-exchange work within peer groups.
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
                memory_total_bytes=device.memory_mb * 1024 * 1024 if device.memory_mb else None,
                compute_capability=device.compute_capability,
            )
        )
    links = []
    for pos, a in enumerate(ordinals):
        for b in ordinals[pos + 1 :]:
            word = peer_word(view, a, b)
            links.append(make_link(a, b, "UNKNOWN", p2p_read=word, p2p_write=word))
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
