"""TensorFlow device-initialisation logs (every era) -> ``TfView``; a TfView -> Topology.

People meet their GPU topology first as TensorFlow log lines, copied into issues half-cut and
mixed with other output. This reader takes what is there and never fails on a broken line: each
message is found by its own words wherever it sits on a line, whatever prefix it carries
(``I tensorflow/...cc:59]``, ``2017-06-28 16:04:54.002462: I ...``, absl's
``I0000 00:00:1712345678.123456  12345 gpu_device.cc:2019]``, or none). What cannot be read becomes
a ``Finding`` in ``TfView.notes`` (which ``tf_findings`` reports); only a text with no GPU line at
all is an ``InputError``.

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

Peer entries use the CUDA device ordinals the log prints (``device: N``), which are TensorFlow's
GPU numbers after ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER``. A device can always access its
own memory, so the diagonal of ``TfView.peer`` is ``True`` for every ordinal the log names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

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

ERA_TF0 = "tf0-gpu-init"
ERA_TF12 = "tf1.2-peer-access"
ERA_TF15 = "tf1.5-edge-matrix"
ERA_TF25 = "tf2-created-device"
ERA_TF_ABSL = "tf2.16-absl"
ERA_NO_GPU = "tf-no-gpu"  # TensorFlow ran and listed no GPU (``gputopo scan --tf``)
MAX_TF_ORDINAL = 1023  # larger "ordinals" come from damaged lines, not from machines
_ERA_ORDER = [ERA_TF0, ERA_TF12, ERA_TF15, ERA_TF25, ERA_TF_ABSL]

# The log prefix ends with "file.cc:NNN] "; absl's starts "I0000 00:00:<epoch> <tid> ".
_PREFIX_RE = re.compile(r"[\w/.\-]+\.(?:cc|h|cpp|py):\d+\]\s?")
_ABSL_RE = re.compile(r"\b[IWEF]\d{4} \d\d:\d\d:\d+\.\d+\s+\d+\s+[\w.\-]+\.cc:\d+\]")

_CANNOT_ENABLE_RE = re.compile(r"cannot enable peer access from device ordinal (\d+) to device ordinal (\d+)", re.I)
_NOT_SUPPORTED_RE = re.compile(r"Peer access not supported between device ordinals (\d+) and (\d+)", re.I)
_DMA_HEADER_RE = re.compile(r"\bDMA:((?:\s+\d+)*)\s*$")
_EDGE_MATRIX_RE = re.compile(r"Device interconnect StreamExecutor with strength 1 edge matrix", re.I)
_ORDINALS_ONLY_RE = re.compile(r"^\s*(\d+(?:\s+\d+)*)\s*$")
_ROW_RE = re.compile(r"^\s*(\d+):((?:\s+[YN])*)\s*$")
_VISIBLE_RE = re.compile(r"Adding visible gpu devices:\s*([\d,\s]*)", re.I)
# "Creating TensorFlow device (/gpu:0) -> (device: 0, ...)"            TF 0.x-1.4
# "Created TensorFlow device (/job:.../device:GPU:0 with 10413 MB memory) -> physical GPU (device: 0, ...)"
# "Created device /job:.../device:GPU:0 with 22298 MB memory:  -> device: 0, ..."   TF >= 2.5
_CREATED_RE = re.compile(
    r"Creat(?P<verb>ed|ing) (?P<tf>TensorFlow )?device\s*\(?\s*(?P<tfname>[^\s()]*?(?:gpu|GPU):(?P<tfid>\d+))?"
    r"(?:\s+with (?P<mb>\d+) MB memory)?\)?:?\s*->\s*(?:physical GPU\s*)?\(?(?P<rest>.*)$"
)
_CREATED_START_RE = re.compile(r"Creat(?:ed|ing) (?:TensorFlow )?device\b(?:.*?(?:gpu|GPU):(?P<tfid>\d+))?")
_DEVICE_FIELDS_RE = re.compile(r"^device:\s*(?P<ordinal>\d+)(?P<fields>.*)$")
_NAME_RE = re.compile(r"\bname:\s*(?P<name>[^,)]+?)\s*(?=[,)])")
_BUS_RE = re.compile(r"\bpci bus id:\s*(?P<bus>[0-9a-fA-F:.]+)")
_CC_RE = re.compile(r"\bcompute capability:\s*(?P<cc>\d+\.\d+)\b")
# TF 0.x-2.4 "Found device 0 with properties:" followed by name/pciBusID lines (or one line in 2.x).
_FOUND_RE = re.compile(r"Found device (\d+) with properties:(.*)$", re.I)
_PROP_NAME_RE = re.compile(r"\bname:\s*(?P<name>.+?)\s*(?=\s(?:major:|computeCapability:|pciBusID)|$)")
_PROP_BUS_RE = re.compile(r"\bpciBusID:?\s*(?P<bus>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")
_PROP_CC_RE = re.compile(r"(?:computeCapability:\s*(?P<cc>\d+\.\d+))|(?:major:\s*(?P<major>\d+)\s+minor:\s*(?P<minor>\d+))")


@dataclass
class _Matrix:
    ordinals: list[int]
    rows: dict[int, list[bool]] = field(default_factory=dict)
    line_no: int = 0
    diagonal_is_self: bool = True  # DMA matrices print Y on the diagonal, edge matrices N


def message_of(line: str) -> str:
    """The log message without its prefix (file.cc:N]), or the whole line stripped."""
    match = None
    for match in _PREFIX_RE.finditer(line):
        pass
    text = line[match.end() :] if match else line
    return text.strip()


def read_tf_log(path: str) -> TfView:
    """Read a TensorFlow log file ('-' = standard input) into TensorFlow's view of the GPUs."""
    text = read_text_input(path, what="TensorFlow log")
    return parse_tf_log(text, "standard input" if path == "-" else path)


def parse_tf_log(text: str, source: str) -> TfView:
    """TensorFlow's view of the GPUs from a log; ``InputError`` only when no GPU line is there.

    What could not be read (cut lines, missing matrix rows) is listed in ``TfView.notes``.
    """
    if "\x00" in text:
        raise InputError(f"TensorFlow log {source} is binary, not text")
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    notes: list[Finding] = []
    eras: set[str] = set()
    devices: dict[int, TfDevice] = {}
    denied: dict[tuple[int, int], int] = {}  # (i, j) -> line number of the "cannot peer" line
    matrices: list[_Matrix] = []
    visible: list[int] | None = None
    open_matrix: _Matrix | None = None
    expect_edge_header = False
    found_device: int | None = None  # "Found device N with properties:" whose detail lines follow
    found_lines_left = 0

    for line_no, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        if _ABSL_RE.search(line):
            eras.add(ERA_TF_ABSL)
        message = message_of(line)
        if _PREFIX_RE.search(line):
            found_lines_left = 0  # a new log message ends the "Found device" detail lines

        match = _CANNOT_ENABLE_RE.search(line)
        if match:
            eras.add(ERA_TF0)
            denied[(int(match.group(1)), int(match.group(2)))] = line_no
            continue
        match = _NOT_SUPPORTED_RE.search(line)
        if match:
            eras.add(ERA_TF12)
            denied[(int(match.group(1)), int(match.group(2)))] = line_no
            continue
        match = _DMA_HEADER_RE.search(message)
        if match:
            ordinals = [int(t) for t in match.group(1).split()]
            if "gpu_init.cc" in line:
                eras.add(ERA_TF0)
            open_matrix = _Matrix(ordinals=ordinals, line_no=line_no, diagonal_is_self=True)
            matrices.append(open_matrix)
            expect_edge_header = False
            continue
        if _EDGE_MATRIX_RE.search(line):
            eras.add(ERA_TF15)
            open_matrix = _Matrix(ordinals=[], line_no=line_no, diagonal_is_self=False)
            matrices.append(open_matrix)
            expect_edge_header = True
            continue
        if open_matrix is not None:
            if expect_edge_header:
                match = _ORDINALS_ONLY_RE.match(message)
                if match:
                    open_matrix.ordinals = [int(t) for t in match.group(1).split()]
                    expect_edge_header = False
                    continue
            match = _ROW_RE.match(message)
            if match:
                expect_edge_header = False
                row_ordinal = int(match.group(1))
                if row_ordinal not in open_matrix.rows:
                    open_matrix.rows[row_ordinal] = [v == "Y" for v in match.group(2).split()]
                    if open_matrix.ordinals and len(open_matrix.rows) == len(open_matrix.ordinals):
                        open_matrix = None
                continue
        match = _VISIBLE_RE.search(line)
        if match:
            eras.add(ERA_TF15)
            numbers = re.findall(r"\d+", match.group(1))
            visible = sorted({int(n) for n in numbers})
            continue
        match = _CREATED_RE.search(line)
        if match:
            _read_created(match, line_no, source, devices, notes, eras)
            continue
        match = _CREATED_START_RE.search(line)
        if match:  # cut before "->": only TF's own GPU number, if that much, is left
            tfid = match.group("tfid")
            if tfid is not None:
                devices.setdefault(int(tfid), TfDevice(ordinal=int(tfid)))
            what = f"the `Created device` line for GPU:{tfid}" if tfid else "a `Created device` line"
            notes.append(_cut_note(source, line_no, f"{what} is cut before its device details"))
            continue
        match = _FOUND_RE.search(line)
        if match:
            found_device = int(match.group(1))
            devices.setdefault(found_device, TfDevice(ordinal=found_device))
            found_lines_left = 4
            _read_properties(devices[found_device], match.group(2))
            continue
        if found_device is not None and found_lines_left > 0:
            found_lines_left -= 1
            _read_properties(devices[found_device], message)

    ordinals: set[int] = set(devices)
    ordinals.update(o for pair in denied for o in pair)
    for matrix in matrices:
        ordinals.update(matrix.ordinals)
        ordinals.update(matrix.rows)
    if visible:
        ordinals.update(visible)
    too_large = sorted(o for o in ordinals if o > MAX_TF_ORDINAL)
    if too_large:  # a damaged number; a square matrix that big would only waste memory
        notes.append(Finding("info", "tf-log-cut", f"GPU ordinal {too_large[0]} is not plausible and was ignored"))
        ordinals -= set(too_large)
        devices = {o: d for o, d in devices.items() if o <= MAX_TF_ORDINAL}
        denied = {pair: n for pair, n in denied.items() if max(pair) <= MAX_TF_ORDINAL}
        visible = [o for o in visible or [] if o <= MAX_TF_ORDINAL] if visible is not None else None
        for matrix in matrices:
            matrix.rows = {o: v for o, v in matrix.rows.items() if o <= MAX_TF_ORDINAL}
    if not ordinals:
        raise InputError(
            f"TensorFlow log {source} has no GPU lines: expected lines such as "
            "'Created device ... -> device: 0, name: ..., pci bus id: ...' or "
            "'cannot enable peer access from device ordinal 0 to device ordinal 2'"
        )

    size = max(ordinals) + 1
    peer: list[list[bool | None]] = [[None] * size for _ in range(size)]
    for o in ordinals:
        peer[o][o] = True
    for matrix in matrices:
        _apply_matrix(matrix, peer, source, notes)
    for (i, j), line_no in sorted(denied.items()):
        if peer[i][j] is True and i != j:
            notes.append(
                Finding(
                    "warning",
                    "tf-log-contradiction",
                    f"{source} line {line_no}: TensorFlow could not enable peer access {i}->{j} although "
                    "its matrix says Y; taken as no peer access",
                    gpus=sorted({i, j}),
                )
            )
        if i != j:
            peer[i][j] = False
    for o in ordinals:
        devices.setdefault(o, TfDevice(ordinal=o))

    # One finding for all the cut places: findings are told apart by code and GPUs, and a list
    # of places reads better than a dozen near-identical lines.
    cut = [n for n in notes if n.code == "tf-log-cut"]
    if cut:
        notes = [n for n in notes if n.code != "tf-log-cut"]
        notes.insert(
            0,
            Finding(
                "info",
                "tf-log-cut",
                f"{source} is cut short in {len(cut)} place{'s' if len(cut) > 1 else ''}; what is there "
                "was read: " + "; ".join(n.message for n in cut),
            ),
        )
    view = TfView(
        devices=[devices[o] for o in sorted(devices)],
        peer=peer,
        era=max(eras, key=_ERA_ORDER.index) if eras else None,
        source=source,
        visible_ordinals=visible,
        notes=notes,
    )
    return view


def _read_created(
    match: re.Match[str],
    line_no: int,
    source: str,
    devices: dict[int, TfDevice],
    notes: list[Finding],
    eras: set[str],
) -> None:
    """One ``Creat(ed|ing) ... device`` line: fill the device it names, note what is cut off."""
    if match.group("verb") == "ed" and not match.group("tf"):
        eras.add(ERA_TF25)  # "Created device ... with N MB memory:  -> device: N"
    elif match.group("mb") or "physical GPU" in match.group(0):
        eras.add(ERA_TF15)  # "Creat(ing|ed) TensorFlow device (... with N MB memory) -> physical GPU (...)"
    else:
        eras.add(ERA_TF0)  # "Creating TensorFlow device (/gpu:0) -> (device: 0, ...)"
    rest = match.group("rest")
    fields = _DEVICE_FIELDS_RE.match(rest.strip())
    if fields is None:
        tfid = match.group("tfid")
        if tfid is None:
            notes.append(_cut_note(source, line_no, "a `Created device` line is cut before its device number"))
            return
        ordinal = int(tfid)  # cut before "device: N": TF's own GPU number is the best we have
        detail = ""
        notes.append(_cut_note(source, line_no, f"the `Created device` line for GPU:{ordinal} is cut short"))
    else:
        ordinal = int(fields.group("ordinal"))
        detail = fields.group("fields")
    device = devices.setdefault(ordinal, TfDevice(ordinal=ordinal))
    if match.group("mb"):
        device.memory_mb = int(match.group("mb"))
    name = _NAME_RE.search(detail)
    if name:
        device.name = name.group("name").strip()
    bus = _BUS_RE.search(detail)
    if bus:
        normalized = normalize_pci_bus_id(bus.group("bus"))
        if normalized:
            device.pci_bus_id = normalized
        else:
            notes.append(_cut_note(source, line_no, f"the PCI bus id of GPU {ordinal} is cut short ({bus.group('bus')!r})"))
    cc = _CC_RE.search(detail)
    if cc:
        device.compute_capability = cc.group("cc")
    if fields is not None and not bus:  # every era prints the bus id after the name: the line is cut
        notes.append(_cut_note(source, line_no, f"the `Created device` line for GPU {ordinal} is cut before its PCI bus id"))


def _read_properties(device: TfDevice, text: str) -> None:
    """Name, PCI bus id and compute capability from ``Found device N with properties:`` lines."""
    name = _PROP_NAME_RE.search(text)
    if name and device.name is None:
        device.name = name.group("name").strip()
    bus = _PROP_BUS_RE.search(text)
    if bus and device.pci_bus_id is None:
        device.pci_bus_id = normalize_pci_bus_id(bus.group("bus"))
    cc = _PROP_CC_RE.search(text)
    if cc and device.compute_capability is None:
        device.compute_capability = cc.group("cc") or f"{cc.group('major')}.{cc.group('minor')}"


def _cut_note(source: str, line_no: int, what: str) -> Finding:
    return Finding("info", "tf-log-cut", f"line {line_no}: {what}")


def _apply_matrix(matrix: _Matrix, peer: list[list[bool | None]], source: str, notes: list[Finding]) -> None:
    """Copy a DMA / edge matrix into ``peer`` and note rows or cells that are missing."""
    ordinals = matrix.ordinals or sorted(matrix.rows)
    if not matrix.ordinals and matrix.rows:
        width = max(len(values) for values in matrix.rows.values())
        ordinals = list(range(width))
        notes.append(
            Finding(
                "info",
                "tf-log-cut",
                f"line {matrix.line_no}: the peer matrix has no header line; "
                f"columns read as ordinals 0-{width - 1}",
            )
        )
    for row_ordinal, values in matrix.rows.items():
        if row_ordinal >= len(peer):
            continue
        for column, value in zip(ordinals, values):
            if column >= len(peer) or column == row_ordinal:
                continue  # the diagonal: DMA says Y, edge matrices N; a device always reaches itself
            peer[row_ordinal][column] = value
        if len(values) < len(ordinals):
            notes.append(
                Finding(
                    "info",
                    "tf-log-cut",
                    f"the peer matrix row for GPU {row_ordinal} is cut short "
                    f"({len(values)} of {len(ordinals)} entries)",
                )
            )
    missing = [o for o in ordinals if o not in matrix.rows]
    if missing:
        notes.append(
            Finding(
                "info",
                "tf-log-cut",
                f"line {matrix.line_no}: the peer matrix has no rows for GPU "
                f"{', '.join(map(str, missing))}; those entries are unknown unless other lines say",
            )
        )


def topology_from_tf_view(view: TfView) -> Topology:
    """A Topology from TensorFlow's view alone: GPUs are TF ordinals, links say only who can peer.

    Links are of type ``UNKNOWN`` (a TF log never says how GPUs are wired), with P2P read/write
    ``ok`` where TF peers both ways, ``NS`` where it cannot in either direction, ``None`` where the
    log is silent. ``recommend`` can still keep fast-exchange work within peer groups.
    """
    ordinals = sorted({d.ordinal for d in view.devices} | set(range(len(view.peer))))
    by_ordinal = {d.ordinal: d for d in view.devices}
    gpus = []
    for o in ordinals:
        device = by_ordinal.get(o)
        gpus.append(
            Gpu(
                index=o,
                name=device.name if device else None,
                pci_bus_id=device.pci_bus_id if device else None,
                memory_total_bytes=device.memory_mb * 1024 * 1024 if device and device.memory_mb else None,
                compute_capability=device.compute_capability if device else None,
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
