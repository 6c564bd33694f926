"""TensorFlow log lines -> ``LogEvent``s: what each line says about the GPUs, read in linear time.

Each message is found by its own words wherever it sits on a line, whatever prefix it carries
(``I tensorflow/...cc:59]``, ``2017-06-28 16:04:54.002462: I ...``, absl's
``I0000 00:00:1712345678.123456  12345 gpu_device.cc:2019]``, or none). Only the first
``LINE_CAP_CHARS`` of a line are looked at (TF's device lines are a few hundred characters; a
2 MB line of other output is not read to its end), every pattern is anchored or bounded so that
no line costs more than a pass over it, and cheap substring tests pick the few patterns worth
trying. Which start-up a line belongs to is decided later (``tflog_runs``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.model import normalize_pci_bus_id
from gputopo.sources.pasted import LINE_CAP_CHARS  # the cut every reader of pasted text shares

# Event kinds
DENIED = "denied"  # "cannot enable peer access from ... i to ... j" (TF 0.x) / "Peer access not supported" (1.2-1.4)
ENABLE_FAILED = "enable-failed"  # "Unable to enable peer access between device ordinals i and j" (TF >= 1.4)
PEER_LIMIT = "peer-limit"  # CUDA_ERROR_TOO_MANY_PEERS outside a pair line (e.g. cuDevicePrimaryCtxRetain)
MATRIX = "matrix"  # "DMA: 0 1 2 3" or "Device interconnect ... edge matrix:" (+ its column header line)
ROW = "row"  # "0:   Y N N N"
VISIBLE = "visible"  # "Adding visible gpu devices: 0, 1"
CREATED = "created"  # "Creat(ed|ing) ... device ... -> ... device: N, name: ..., pci bus id: ..."
FOUND = "found"  # "Found device N with properties:" (+ detail lines: PROPS)
PROPS = "props"
XLA = "xla-device"  # XLA's "StreamExecutor device (N): NAME, Compute Capability X.Y" (TF >= 1.12)
START = "start"  # a line a TF process prints once, before it looks for GPUs (driver library, CPU guard)
IGNORED = "ignored"  # "Ignoring gpu device (device: 1, ...) with Cuda compute capability 2.0" (ROCm: "AMDGPU version")

ERA_LINE_TF0 = "tf0"
ERA_LINE_TF12 = "tf1.2"
ERA_LINE_TF15 = "tf1.5"
ERA_LINE_TF25 = "tf2.5"
# "Found device N" (gpu_device.cc) and XLA's device lines: TF 1.x-2.4 (the edge-matrix era) where
# nothing else in the start-up tells the era; TF 0.x printed "Found device" from gpu_init.cc.
ERA_LINE_FOUND = "found"

# The log prefix ends with "file.cc:NNN] "; absl's starts "I0000 00:00:<epoch> <tid> ".
_PREFIX_END_RE = re.compile(r"\.(?:cc|h|cpp|py):\d{1,6}\] ?")
_GPU_SOURCE_RE = re.compile(r"\bgpu_(?:device|init)\.cc:\d{1,6}\]")  # the files that print TF's peer matrices
_ABSL_RE = re.compile(r"\b[IWEF]\d{4} \d\d:\d\d:\d{1,12}\.\d{1,9} {1,12}\d{1,20} {1,12}[\w.\-]{1,120}\.cc:\d{1,6}\]")

_CANNOT_ENABLE_RE = re.compile(r"cannot enable peer access from device ordinal (\d{1,9}) to device ordinal (\d{1,9})", re.I)
_NOT_SUPPORTED_RE = re.compile(r"peer access not supported between device ordinals (\d{1,9}) and (\d{1,9})", re.I)
_ENABLE_FAILED_RE = re.compile(r"unable to enable peer access between device ordinals (\d{1,9}) and (\d{1,9})", re.I)
_CONTEXT_ORDINAL_RE = re.compile(r"(?:CUDA device ordinal |CUDA:)(\d{1,9})")
_TOO_MANY_PEERS_WORDS = ("too_many_peers", "peer mapping resources exhausted")
_DMA_RE = re.compile(r"\bDMA:((?:[ \t]+\d{1,9})*)[ \t]*$")
_ORDINALS_ONLY_RE = re.compile(r"[ \t]*(\d{1,9}(?:[ \t]+\d{1,9})*)[ \t]*$")
_ROW_RE = re.compile(r"[ \t]*(\d{1,9}):((?:[ \t]+[YN])*)[ \t]*$")
_VISIBLE_RE = re.compile(r"adding visible gpu devices:([\d, \t]*)", re.I)
_CREATED_RE = re.compile(r"Creat(ed|ing) (TensorFlow )?device\b")
_TF_ID_RE = re.compile(r"(?:gpu|GPU):(\d{1,9})")
_MB_RE = re.compile(r"\bwith (\d{1,12}) MB memory")
_DEVICE_FIELDS_RE = re.compile(r"[ \t(]*(?:physical GPU[ \t]*\(?)?[ \t]*device:[ \t]*(\d{1,9})")
_FOUND_RE = re.compile(r"Found device (\d{1,9}) with properties:", re.I)
_XLA_DEVICE_RE = re.compile(r"StreamExecutor device \((\d{1,9})\):[ \t]*([^,]{1,200}?),[ \t]*Compute Capability[ \t]*(\d{1,3}\.\d{1,3})")
# Printed once per process before the GPUs are found: the driver library opened (CUDA: libcuda.so,
# TF 1.x "successfully opened CUDA library libcuda.so.1 locally"; ROCm: libhip_hcc / libamdhip64) and
# the CPU feature guard. (libcudart, libcublas... are opened later by some versions: not markers.)
_START_RE = re.compile(r"opened (?:dynamic|CUDA) library (?:libcuda\.so|libhip_hcc|libamdhip64|nvcuda\.dll)"
                       r"|Your CPU supports instructions that this TensorFlow binary|This TensorFlow binary is optimized")
_IGNORED_RE = re.compile(r"Ignoring (?:visible )?gpu device \(device: (\d{1,9})")
_IGNORED_CC_RE = re.compile(r"compute capability (\d{1,3}\.\d{1,3})\.? The minimum required Cuda capability is (\d{1,3}\.\d{1,3})")
# ROCm builds' twins of the CUDA line: "with AMDGPU version : gfx1100. The supported AMDGPU versions are
# gfx1030, gfx900, ..." (TF 2.x) and "with AMDGPU ISA gfx801. The minimum required AMDGPU ISA is gfx803" (1.x).
_IGNORED_ROCM_RE = re.compile(r"with AMDGPU version ?: ?(gfx[\w:+\-]{1,40}?)\.? The supported AMDGPU versions are "
                              r"([\w:+\-]{1,40}(?:, ?[\w:+\-]{1,40}){0,40})")
_IGNORED_ISA_RE = re.compile(r"with AMDGPU ISA (gfx\w{1,12})\.? The minimum required AMDGPU ISA is (gfx\w{1,12})")
# A device's name and PCI bus id: "(device: 0, name: NAME, pci bus id: 0000:03:00.0, ...)" in Created,
# Ignoring and XLA lines; "name: NAME major: 6 ..." / "pciBusID: 0000:03:00.0" in Found device's properties.
NAME_RE = re.compile(r"\bname:[ \t]*([^,)]{1,200}?)[ \t]*(?=[,)])")
BUS_RE = re.compile(r"\bpci bus id:[ \t]*([0-9a-fA-F:.]{1,32})")
PROP_NAME_RE = re.compile(r"\bname:[ \t]*(.{1,200}?)[ \t]*(?=[ \t](?:major:|computeCapability:|pciBusID)|$)")
PROP_BUS_RE = re.compile(r"\bpciBusID:?[ \t]*([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])")


@dataclass
class LogEvent:
    """One line's statement about the GPUs."""

    kind: str
    line_no: int
    ordinals: list[int] = field(default_factory=list)  # the ordinals the line names (a pair: [from, to])
    values: list[bool] = field(default_factory=list)  # a matrix row's Y/N entries
    text: str = ""  # the message after the log prefix (device details, properties)
    era: str | None = None  # the log format the line shows
    absl: bool = False  # an absl-prefixed line (TF >= 2.16)
    too_many_peers: bool = False  # an ENABLE_FAILED line (or its wrapped tail) says CUDA_ERROR_TOO_MANY_PEERS
    tf_id: int | None = None  # CREATED: TensorFlow's own GPU number (/device:GPU:k)
    memory_mb: int | None = None  # CREATED: "with N MB memory"
    diagonal_is_self: bool = True  # MATRIX: DMA matrices print Y on the diagonal, edge matrices N
    header_missing: bool = False  # MATRIX: an edge matrix whose column header line is not there (yet)
    empty_header: bool = False  # MATRIX: its header line is there and lists no GPU (TF's visible GPU list was empty)
    cut: str | None = None  # CREATED: where the line is cut: "details" (before its device details), "number" (before its device number)
    process: str | None = None  # which process wrote the line, where its prefix says (MPI rank, thread id)
    reason: str | None = None  # IGNORED: why TF ignores the GPU (CUDA compute capability, ROCm AMDGPU version)
    gpu_source: bool = False  # ROW: the line's prefix is TF's GPU start-up code (gpu_device.cc, gpu_init.cc)


# Prefixes that tell processes apart: mpirun's "[1,3]<stderr>:" (rank 3), glog/absl's thread id
# ("I0612 10:11:12.123456  12345 gpu_device.cc:1639]").
_RANK_RE = re.compile(r"^\s{0,8}\[\d{1,6},(\d{1,6})\]<std(?:out|err)>:")
_THREAD_RE = re.compile(r"^\s{0,8}[IWEF]\d{4} \d\d:\d\d:[\d.]{1,20} {1,12}(\d{1,20}) {1,12}[\w.\-]{1,120}\.cc:\d{1,6}\]")


def identity_of(event: LogEvent) -> tuple[str | None, str | None]:
    """``(name, PCI bus id)`` a device line says of its GPU (``(None, None)`` where it says neither):
    Created, Ignoring and XLA lines carry ``name: ..., pci bus id: ...``; Found device and its
    property lines ``name: ... major:`` and ``pciBusID``."""
    if event.kind in (FOUND, PROPS):
        name, bus = PROP_NAME_RE.search(event.text), PROP_BUS_RE.search(event.text)
    elif event.kind in (CREATED, IGNORED, XLA):
        name, bus = NAME_RE.search(event.text), BUS_RE.search(event.text)
    else:
        return None, None
    return ((name.group(1).strip() or None) if name else None), (normalize_pci_bus_id(bus.group(1)) if bus else None)


def process_of(line: str) -> str | None:
    """The process (MPI rank or thread) a line's prefix names, or None."""
    match = _RANK_RE.match(line)
    if match:
        return f"rank {match.group(1)}"
    match = _THREAD_RE.match(line)
    return f"thread {match.group(1)}" if match else None


def message_of(line: str) -> str:
    """The log message without its prefix (file.cc:N]), or the whole line stripped."""
    capped = line[:LINE_CAP_CHARS]
    end = 0
    for match in _PREFIX_END_RE.finditer(capped):
        end = match.end()
    return capped[end:].strip()


def scan_lines(text: str) -> list[LogEvent]:
    """Every GPU statement of a log, in line order (one pass; each line read at most once per pattern)."""
    events: list[LogEvent] = []
    found_lines_left = 0  # detail lines still expected after "Found device N with properties:"
    for line_no, line in enumerate(text.split("\n"), start=1):
        capped = line[:LINE_CAP_CHARS]
        if not capped.strip():
            continue
        end = 0
        for match in _PREFIX_END_RE.finditer(capped):
            end = match.end()
        message = capped[end:].strip()
        if end:
            found_lines_left = 0  # a new log message ends the "Found device" detail lines
        elif found_lines_left > 0:
            found_lines_left -= 1
            events.append(LogEvent(PROPS, line_no, text=message))
            continue
        event = _classify(capped, message, line_no, bool(end), events, whole=len(line) <= LINE_CAP_CHARS)
        if event is None:
            continue
        event.absl = "I0000 00:00:" in capped[:64] or bool(_ABSL_RE.search(capped[:300]))  # after any paste prefix
        event.process = process_of(capped[:200])
        events.append(event)
        if event.kind == FOUND:
            found_lines_left = 4
    return events


def _classify(line: str, message: str, line_no: int, prefixed: bool, events: list[LogEvent], whole: bool) -> LogEvent | None:
    """The event one line makes, or None; may complete the previous event (a wrapped line).
    ``whole``: the line was not capped (a matrix header or row must be read to its end)."""
    lower = line.lower()
    if "peer" in lower:
        event = _peer_event(line, lower, line_no, prefixed, events)
        if event is not False:
            return event  # type: ignore[return-value]
    if "DMA:" in message:
        match = _DMA_RE.search(message)
        if match:
            return LogEvent(MATRIX, line_no, ordinals=[int(t) for t in match.group(1).split()],
                            era=ERA_LINE_TF0 if "gpu_init.cc" in line else ERA_LINE_TF12 if "gpu_device.cc" in line else None)
    if "edge matrix" in message and "interconnect" in message:
        return LogEvent(MATRIX, line_no, era=ERA_LINE_TF15, diagonal_is_self=False, header_missing=True)
    last = events[-1] if events else None
    if whole and last is not None and last.kind == MATRIX and last.header_missing and not last.ordinals:
        match = _ORDINALS_ONLY_RE.match(message)
        if match:  # the edge matrix's column header line, "     0 1 2 3"
            last.ordinals = [int(t) for t in match.group(1).split()]
            last.header_missing = False
            return None
    if not message and prefixed and last is not None and last.kind == MATRIX and last.header_missing and not last.ordinals \
            and _GPU_SOURCE_RE.search(line):  # the header "     " over no GPU: TF's visible list was empty
        last.header_missing, last.empty_header = False, True
        return None
    if whole and ":" in message[:12]:
        match = _ROW_RE.match(message)
        if match:
            return LogEvent(ROW, line_no, ordinals=[int(match.group(1))], values=[v == "Y" for v in match.group(2).split()],
                            gpu_source=prefixed and _GPU_SOURCE_RE.search(line[: len(line) - len(message)]) is not None)
    if "visible gpu devices" in lower:
        match = _VISIBLE_RE.search(line)
        if match:
            numbers = sorted({int(n) for n in re.findall(r"\d{1,9}", match.group(1))})
            return LogEvent(VISIBLE, line_no, ordinals=numbers, era=ERA_LINE_TF15)
    if "Creat" in message:
        match = _CREATED_RE.search(message)
        if match:
            return _created_event(message, match, line_no)
    if "Found device" in message or "found device" in lower:
        match = _FOUND_RE.search(message)
        if match:
            era = ERA_LINE_TF0 if "gpu_init.cc" in line else ERA_LINE_FOUND
            return LogEvent(FOUND, line_no, ordinals=[int(match.group(1))], text=message[match.end() :], era=era)
    if "StreamExecutor device (" in message:
        match = _XLA_DEVICE_RE.search(message)
        if match:
            return LogEvent(XLA, line_no, ordinals=[int(match.group(1))], era=ERA_LINE_FOUND,
                            text=f"name: {match.group(2).strip()}, compute capability: {match.group(3)})")
    if ("library" in message or "TensorFlow binary" in message) and _START_RE.search(message):
        return LogEvent(START, line_no)
    if "Ignoring" in message:
        match = _IGNORED_RE.search(message)
        if match:
            return LogEvent(IGNORED, line_no, ordinals=[int(match.group(1))], text=message[match.end() :],
                            reason=_ignored_reason(message))
    return None


def _ignored_reason(message: str) -> str:
    """Why TF ignores a GPU, in the same shape for CUDA's compute capability and ROCm's AMDGPU version."""
    cc = _IGNORED_CC_RE.search(message)
    if cc:
        return f"compute capability {cc.group(1)} (TensorFlow needs {cc.group(2)})"
    rocm = _IGNORED_ROCM_RE.search(message)
    if rocm:
        return f"AMDGPU version {rocm.group(1)} (TensorFlow supports {rocm.group(2)})"
    isa = _IGNORED_ISA_RE.search(message)
    if isa:
        return f"AMDGPU ISA {isa.group(1)} (TensorFlow needs {isa.group(2)})"
    return "TensorFlow ignores it"


def _peer_event(line: str, lower: str, line_no: int, prefixed: bool, events: list[LogEvent]) -> LogEvent | None | bool:
    """A peer-access line's event; None when it only completes the previous line; False: not a peer line."""
    match = _CANNOT_ENABLE_RE.search(line)
    if match:
        return LogEvent(DENIED, line_no, ordinals=[int(match.group(1)), int(match.group(2))], era=ERA_LINE_TF0)
    match = _NOT_SUPPORTED_RE.search(line)
    if match:
        return LogEvent(DENIED, line_no, ordinals=[int(match.group(1)), int(match.group(2))], era=ERA_LINE_TF12)
    too_many = any(word in lower for word in _TOO_MANY_PEERS_WORDS)
    match = _ENABLE_FAILED_RE.search(line)
    if match:
        return LogEvent(ENABLE_FAILED, line_no, ordinals=[int(match.group(1)), int(match.group(2))], too_many_peers=too_many)
    if not too_many:
        return False
    last = events[-1] if events else None
    if not prefixed and last is not None and last.kind == ENABLE_FAILED and not last.too_many_peers:
        last.too_many_peers = True  # the tail of a wrapped "Unable to enable peer access ..." line
        return None
    context = _CONTEXT_ORDINAL_RE.search(line)
    return LogEvent(PEER_LIMIT, line_no, ordinals=[int(context.group(1))] if context else [])


def _created_event(message: str, match: re.Match[str], line_no: int) -> LogEvent:
    """``Creating TensorFlow device (/gpu:0) -> (device: 0, ...)`` (TF 0.x-1.4), ``Created TensorFlow
    device (/job:.../device:GPU:0 with N MB memory) -> physical GPU (device: 0, ...)`` (1.5-2.4),
    ``Created device /job:.../device:GPU:0 with N MB memory:  -> device: 0, ...`` (>= 2.5)."""
    after = message[match.end() :]
    arrow = after.find("->")
    head = after if arrow < 0 else after[:arrow]
    tf_id = _TF_ID_RE.search(head)
    mb = _MB_RE.search(head)
    if match.group(1) == "ed" and not match.group(2):
        era = ERA_LINE_TF25
    elif mb or "physical GPU" in after:
        era = ERA_LINE_TF15
    else:
        era = ERA_LINE_TF0
    event = LogEvent(CREATED, line_no, era=era, tf_id=int(tf_id.group(1)) if tf_id else None)
    event.memory_mb = int(mb.group(1)) if mb else None
    if arrow < 0:
        event.cut = "details"
        return event
    rest = after[arrow + 2 :]
    fields = _DEVICE_FIELDS_RE.match(rest)
    if fields is None:
        event.cut = "number"
        return event
    event.ordinals = [int(fields.group(1))]
    event.text = rest[fields.end() :]
    return event
