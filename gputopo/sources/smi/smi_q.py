"""``nvidia-smi -q`` (``--query``, ``-a``) text -> Topology of the GPUs it lists, with what it says of each.

Found by structure, not by its banner (``==============NVSMI LOG==============`` is often not pasted):
a line ``GPU <PCI bus id>`` starts a GPU's block, and under it indented ``key : value`` lines and
section titles (``PCI``, ``GPU Link Info``) nest by indentation. Each value is read by its path of
titles, so ``FB Memory Usage / Total`` is the GPU's memory while the same words nested under
``nvidia-smi vgpu -q``'s ``vGPU ID`` are a vGPU's, never taken. Decoration is taken off: whatever
stands before ``GPU`` on the block's first line (``% ``, ``> ``, ``# ``) off every line of the
block that carries it, a markdown ``\\`` line break, trailing blanks, CRLF, tabs; grep's ``--``
between kept lines is skipped (and noted). Lines before any ``GPU`` line (``-d ... | tail``
fragments) belong to no GPU and are not read.

Read, per GPU, in the order listed (nvidia-smi lists GPUs in PCI bus order, which is NVML's index
order): ``index``; ``name`` (Product Name); ``pci_bus_id`` (the block's line, else ``PCI / Bus Id``,
normalised to ``dddd:bb:dd.f``); ``memory_total_bytes`` / ``memory_used_bytes`` (``FB Memory
Usage`` Total / Used, MiB; drivers since about R525 print ``Reserved`` apart, and their ``Used``
excludes it, as the ``nvidia-smi`` table's Memory-Usage does: taken as printed); the PCIe link
(``GPU Link Info``): ``PCIe Generation`` and ``Link Width``, ``Current`` and ``Max``; ``mig_mode``
(``MIG Mode / Current``); ``utilization_percent`` (``Utilization / Gpu``); ``processes`` (``None``:
none; a ``Process ID`` of type C or C+G: a compute process, with its name and ``Used GPU Memory``);
``performance_state`` (``Performance State``: ``P0`` .. ``P15`` as 0 .. 15; ``Unknown``, ``N/A`` or
no such line: None). One run of nvidia-smi prints the state beside the PCIe link, so the two were read
together: what the state says of the link's speed is analysis's (``analysis/expect/pstates.py``).

Max, not Device Max: newer drivers print ``Max``, ``Device Max`` and ``Host Max`` under ``PCIe
Generation``. NVIDIA's ``--help-query-gpu`` defines ``pcie.link.gen.max`` as "the maximum PCI-E link
generation possible with this GPU and system configuration. For example, if the GPU supports a
higher PCIe generation than the system supports then this reports the system PCIe generation";
``gpumax`` (Device Max) is the GPU's own limit and ``hostmax`` (Host Max) the root port's. ``Max``
is what NVML's ``nvmlDeviceGetMaxPcieLinkGeneration`` returns (the live probe's ``pcie_gen_max``),
and the best the link can train to on this host: a link at ``Max`` runs as fast as the slot allows
(an A100 with Device Max 4 under a Host Max 5 root port reads Max 4, and Gen4 is not "below max").

Not read: links (``-q`` says nothing about GPU pairs: the topology has none), ECC, clocks, power,
temperatures. ``Timestamp`` (``Mon Jun  3 10:00:00 2024``) is not read: it is the host's local time
with no time zone, and ``captured_at`` holds UTC only, so the topology says "not known" rather than
a time that may be hours off. Unknown stays ``None`` (``N/A``, ``[Not Supported]``, a section cut
away or never printed), never guessed.

What the reader notices is a ``ReadingNote`` of facts: ``vm-evidence`` (``Virtualization Mode :
Pass-Through`` or ``VGPU``: the GPU is seen from inside a virtual machine), ``smi-q-gpus-not-listed``
(``Attached GPUs`` says more than the text lists: ``-i``, or a cut paste; the GPUs are then numbered
``listed``, not NVML's way, since which indices they hold cannot be told), ``smi-q-unavailable``
(a value read as ``N/A``), ``smi-q-grep-gaps`` (``--`` lines: grep left lines out there),
``smi-q-gpu-repeated`` (a second block for a bus id already read: another output of the same GPU,
read into it, the first value kept), ``smi-q-no-bus-id`` (a ``GPU`` line whose bus id cannot be read).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from gputopo.errors import InputError
from gputopo.model import Gpu, GpuProcess, ReadingNote, Topology, normalize_pci_bus_id
from gputopo.model.reading_notes import VM_EVIDENCE
from gputopo.sources.pasted import MAX_GPUS, lines_of

KIND = "nvidia-smi -q"
SOURCE = "nvidia-smi-q"
MIB = 1024 * 1024
MAX_DEPTH = 8  # nvidia-smi nests 4 deep; deeper lines are no part of what is read
MAX_PROCESSES = 4096
_BUS = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7]"
# The first line of a GPU's block, after any decoration (up to 4 non-word characters).
_HEADER_RE = re.compile(r"^(?P<prefix>[ \t]*(?:[^\w\s][ \t]*){0,4})GPU (?P<bus>[0-9A-Fa-f]{0,8}:[0-9A-Fa-f:.]{1,12})[ \t]*$")
_SNIFF_RE = re.compile(rf"(?m)^[ \t]*(?:[^\w\s][ \t]*){{0,4}}GPU {_BUS}[ \t\\]*\r?\n[ \t]*(?:[^\w\s][ \t]*){{0,4}}(?<=[ \t])[A-Z][A-Za-z]")
_TOP_RE = re.compile(r"^[ \t]*(?:[^\w\s][ \t]*){0,4}(?P<key>Attached GPUs|Driver Version)[ \t]*:[ \t]*(?P<value>\S{1,40})")
_NUMBER_RE = re.compile(r"^([0-9]{1,9})[ \t]*(MiB|x|%)?$")
_PSTATE_RE = re.compile(r"^P([0-9]{1,2})$")
MAX_PSTATE = 15  # nvmlPstates_t: P0 (the most performance) .. P15 (the least); 32 is "unknown"
# The unit each figure is printed with: a value cut mid-line (``81`` of ``81559 MiB``) lacks it.
_UNITS = {"memory_total_bytes": "MiB", "memory_used_bytes": "MiB", "pcie_width_max": "x", "pcie_width_current": "x",
          "utilization_percent": "%", "pcie_gen_max": None, "pcie_gen_current": None}
# Values that say nothing: the field is unknown.
_UNAVAILABLE = frozenset({"n/a", "[n/a]", "not supported", "[not supported]", "unknown error", "[unknown error]",
                          "requested functionality has been deprecated", "insufficient permissions", "gpu is lost",
                          "[gpu is lost]", ""})
_VM_MODES = frozenset({"pass-through", "vgpu"})  # a guest's view; "Host VGPU" is the host, "None" bare metal
_LINK = ("pci", "gpu link info")
_FIELDS: dict[tuple[str, ...], str] = {
    ("product name",): "name",
    ("pci", "bus id"): "pci_bus_id",
    ("fb memory usage", "total"): "memory_total_bytes",
    ("fb memory usage", "used"): "memory_used_bytes",
    (*_LINK, "pcie generation", "max"): "pcie_gen_max",
    (*_LINK, "pcie generation", "current"): "pcie_gen_current",
    (*_LINK, "link width", "max"): "pcie_width_max",
    (*_LINK, "link width", "current"): "pcie_width_current",
    ("mig mode", "current"): "mig_mode",
    ("utilization", "gpu"): "utilization_percent",
    ("performance state",): "performance_state",
}
_NOTED_UNAVAILABLE = frozenset({"name", "memory_total_bytes", "pcie_gen_max", "pcie_gen_current",
                                "pcie_width_max", "pcie_width_current"})


def sniff(text: str) -> bool:
    """Whether the text holds a ``GPU <bus id>`` line with an indented ``-q`` line under it."""
    return "GPU " in text and _SNIFF_RE.search(text) is not None


@dataclass
class _Block:
    """The GPU being read and where its lines stand."""

    gpu: Gpu
    prefix: str
    indent: int  # the ``GPU`` line's own indentation: a line at or left of it ends the block
    stack: list[tuple[int, str]] = field(default_factory=list)  # (indent, lower-case title) of the open titles
    process: GpuProcess | None = None
    process_type: str | None = None


@dataclass
class _Reading:
    source: str
    gpus: list[Gpu] = field(default_factory=list)
    by_bus: dict[str, Gpu] = field(default_factory=dict)
    attached: int | None = None
    driver: str | None = None
    unavailable: dict[str, set[int]] = field(default_factory=dict)
    gaps: list[int] = field(default_factory=list)
    repeated: list[dict[str, Any]] = field(default_factory=list)
    no_bus_id: list[int] = field(default_factory=list)
    vm_line: dict[str, Any] | None = None
    block: _Block | None = None


def read(text: str, source: str) -> Topology:
    """The GPUs of the ``nvidia-smi -q`` output(s) in ``text`` and what it says of each."""
    state = _Reading(source)
    lines = lines_of(text)
    if lines and lines[-1].strip():
        lines = lines[:-1]  # no final line break: the last line may be cut mid-value (``NVIDIA H10``)
    for number, raw in enumerate(lines, 1):
        line = _without_md_break(raw.rstrip()).expandtabs(4)
        header = _HEADER_RE.match(line)
        if header:
            _start_block(state, header, number)
            continue
        if state.block is not None:
            if _block_line(state, state.block, line, number):
                continue
            _close(state, state.block)
            state.block = None
        top = _TOP_RE.match(line)
        if top and top.group("key") == "Attached GPUs" and state.attached is None and _ascii_digits(top.group("value")):
            state.attached = int(top.group("value")[:5])
        elif top and top.group("key") == "Driver Version" and state.driver is None:
            state.driver = top.group("value")
    if not state.gpus:
        raise InputError(f"{source}: `nvidia-smi -q` lines without a readable `GPU <bus id>` line above them")
    return _topology(state)


def _ascii_digits(text: str) -> bool:
    """Whether ``text`` is a figure in ASCII digits (``str.isdigit`` takes ``²``, which ``int`` refuses)."""
    return text.isascii() and text.isdigit()


def _without_md_break(line: str) -> str:
    """The line without a markdown hard break (`` \\`` at its end): never part of a value."""
    if line.endswith("\\") and line[:-1] != line[:-1].rstrip(" \t"):
        return line[:-1].rstrip(" \t")
    return line


def _start_block(state: _Reading, header: re.Match[str], number: int) -> None:
    if state.block is not None:
        _close(state, state.block)
    bus = normalize_pci_bus_id(header.group("bus"))
    prefix = header.group("prefix")
    indent = len(prefix) - len(prefix.lstrip(" ")) if not prefix.strip() else 0
    prefix = prefix if prefix.strip() else ""
    if bus is not None and bus in state.by_bus:
        gpu = state.by_bus[bus]
        state.repeated.append({"bus_id": bus, "line": number, "gpu": gpu.index})
        state.block = _Block(Gpu(index=gpu.index), prefix, indent)  # read apart, then filled in
        state.block.gpu.pci_bus_id = bus
        return
    if len(state.gpus) >= MAX_GPUS:
        raise InputError(f"{state.source}: more than {MAX_GPUS} GPU blocks; not a real capture")
    gpu = Gpu(index=len(state.gpus), pci_bus_id=bus)
    if bus is None:
        state.no_bus_id.append(number)
    else:
        state.by_bus[bus] = gpu
    state.gpus.append(gpu)
    state.block = _Block(gpu, prefix, indent)


def _block_line(state: _Reading, block: _Block, line: str, number: int) -> bool:
    """Read one line of the open block; False where the line ends it."""
    if block.prefix:
        if not line.startswith(block.prefix):
            return line.strip() == block.prefix.strip() or not line.strip()  # a blank line of the paste, or no part of it
        line = line[len(block.prefix):]
    body = line.lstrip(" ")
    if not body:
        return True
    if body == "--":  # grep -A/-B between the groups it kept
        state.gaps.append(number)
        return True
    indent = len(line) - len(body)
    if indent <= block.indent:
        return False
    parts = _key_value(body)
    if parts is None:
        return True
    while block.stack and block.stack[-1][0] >= indent:
        block.stack.pop()
    path = (*(title for _, title in block.stack), parts[0].strip().lower())
    if len(block.stack) < MAX_DEPTH:
        block.stack.append((indent, path[-1]))
    if parts[1] is not None:
        _value(state, block, path, parts[1].strip(), number)
    return True


def _key_value(body: str) -> tuple[str, str | None] | None:
    """A line's ``key : value``, or its ``key`` alone (a title): the key starts with an ASCII letter,
    holds no colon and is at most 81 characters before its blanks; None for any other line. One
    split, no regex: a lazy key followed by blanks backtracked in the key's length times the line's
    (a paste of lines of blanks read 20 times slower than a real one)."""
    head, colon, value = body.partition(":")
    key = head.rstrip(" \t")
    if not key or len(key) > 81 or not (key[0].isascii() and key[0].isalpha()):
        return None
    return key, (value if colon else None)


def _value(state: _Reading, block: _Block, path: tuple[str, ...], value: str, number: int) -> None:
    name = _FIELDS.get(path)
    if name is not None:
        _set(state, block.gpu, name, value)
    elif path == ("gpu virtualization mode", "virtualization mode"):
        if value.lower() in _VM_MODES and state.vm_line is None:
            state.vm_line = {"source": state.source, "line": number, "text": f"Virtualization Mode : {value}"[:60]}
    elif path[0] == "processes":
        _process(block, path, value)


def _set(state: _Reading, gpu: Gpu, name: str, value: str) -> None:
    if value.lower() in _UNAVAILABLE:
        if name in _NOTED_UNAVAILABLE and value:
            state.unavailable.setdefault(name, set()).add(gpu.index)
        return
    if getattr(gpu, name) is not None:
        return  # the first value kept (a repeated section)
    if name == "name":
        gpu.name = value[:200]
    elif name == "pci_bus_id":
        gpu.pci_bus_id = normalize_pci_bus_id(value)
    elif name == "mig_mode":
        gpu.mig_mode = {"enabled": True, "disabled": False}.get(value.lower())
    elif name == "performance_state":
        state = _PSTATE_RE.match(value)
        gpu.performance_state = int(state.group(1)) if state and int(state.group(1)) <= MAX_PSTATE else None
    elif (number := _NUMBER_RE.match(value)) is not None and number.group(2) == _UNITS.get(name, ""):
        figure = int(number.group(1))
        setattr(gpu, name, figure * MIB if name.startswith("memory_") else figure)


def _process(block: _Block, path: tuple[str, ...], value: str) -> None:
    gpu = block.gpu
    if path == ("processes",):
        if value.lower() == "none" and gpu.processes is None:
            gpu.processes = []
        return
    if path[-1] == "process id":
        block.process, block.process_type = None, None
        if _ascii_digits(value) and len(value) <= 10 and len(gpu.processes or []) < MAX_PROCESSES:
            block.process = GpuProcess(pid=int(value))
            if gpu.processes is None:
                gpu.processes = []
        return
    if block.process is None:
        return
    if path[-1] == "type":
        block.process_type = value.upper()
        if gpu.processes is None:
            gpu.processes = []
        if "C" in block.process_type and block.process not in gpu.processes:
            gpu.processes.append(block.process)
    elif path[-1] in ("name", "process name"):
        block.process.name = value[:256] or None
    elif path[-1] == "used gpu memory" and (number := _NUMBER_RE.match(value)) is not None and number.group(2) == "MiB":
        block.process.used_memory_bytes = int(number.group(1)) * MIB


def _close(state: _Reading, block: _Block) -> None:
    """A repeated GPU's block, read apart, fills in what the first left unknown."""
    first = state.by_bus.get(block.gpu.pci_bus_id or "")
    if first is None or first is block.gpu:
        return
    for name in (*_FIELDS.values(), "processes"):
        if getattr(first, name) is None and getattr(block.gpu, name) is not None:
            setattr(first, name, getattr(block.gpu, name))


def _topology(state: _Reading) -> Topology:
    if state.block is not None:
        _close(state, state.block)
    topo = Topology(gpus=state.gpus, source=SOURCE, source_detail=state.source,
                    label=f"{len(state.gpus)} GPU{'s' if len(state.gpus) != 1 else ''} (nvidia-smi -q)",
                    driver_version=state.driver)
    listed = len(state.gpus)
    notes = topo.reading_notes
    if state.attached is not None and state.attached > listed:
        topo.gpu_numbering = "listed"
        notes.append(ReadingNote("smi-q-gpus-not-listed", {"source": state.source, "attached": state.attached,
                                                           "listed": listed}))
    if state.vm_line is not None:
        notes.append(ReadingNote(VM_EVIDENCE, state.vm_line))
    if state.unavailable:
        gpus = sorted(set().union(*state.unavailable.values()))
        notes.append(ReadingNote("smi-q-unavailable", {"source": state.source, "fields": sorted(state.unavailable)}, gpus))
    if state.gaps:
        notes.append(ReadingNote("smi-q-grep-gaps", {"source": state.source, "lines": state.gaps[:20],
                                                     "count": len(state.gaps)}))
    for repeat in state.repeated[:20]:
        notes.append(ReadingNote("smi-q-gpu-repeated", {"source": state.source, "bus_id": repeat["bus_id"],
                                                        "line": repeat["line"]}, [repeat["gpu"]]))
    if state.no_bus_id:
        notes.append(ReadingNote("smi-q-no-bus-id", {"source": state.source, "lines": state.no_bus_id[:20]},
                                 [g.index for g in state.gpus if g.pci_bus_id is None]))
    return topo


def with_gathered_q(topology: Topology, text: str, label: str) -> Topology:
    """A ``gather`` archive's topology with its ``nvidia-smi -q`` (``label``) merged in as a view of
    the same host: names, bus ids, memory and PCIe links from ``-q``, the links from ``topo -m``
    (first, so its answers win a disagreement). Text that is no ``-q`` output leaves it as it was."""
    if not sniff(text):
        return topology
    from gputopo.sources.merge import merge_views

    return merge_views([topology, read(text, label)], [topology.source_detail or topology.source, label])
