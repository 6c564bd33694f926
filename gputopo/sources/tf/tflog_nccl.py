"""A TensorFlow log that holds NCCL's lines and no TF device line -> ``TfView``.

MirroredStrategy's all-reduce on GPUs is NCCL's, and with ``NCCL_DEBUG=INFO`` it prints
``host:pid:tid [cudaDev] NCCL INFO ...`` lines; an issue often quotes only those (a stall, a hang).
They still show TensorFlow's process and its GPUs (``sources.nccl_lines``): each thread logs on its
CUDA device (``[cudaDev]``: the process's own numbering, TF's ``device: N``), an Init line names its
rank's CUDA device and PCI bus id, and ``nranks`` and the rings (``Channel 00/08 :    0   1   2   3``,
which list every rank of the communicator) say how many ranks there are, one GPU each (NCCL refuses
two ranks of one communicator on one GPU).

Each process (``host:pid`` of the prefix) is one start-up; the view reads the one that names most
GPUs (among equals the last), or ``run=N``. Its GPUs are the CUDA devices its lines name; how many
TF had is at least the largest of them plus one (CUDA numbers a process's devices from 0), at least
its own ranks, and, where the log shows one process on one node (MirroredStrategy: one process, one
rank per GPU), at least ``nranks`` and the ranks its rings list. Always a lower bound
(``gpu_count_at_least``): TF may hold GPUs NCCL was not given, and the excerpt is cut. NCCL's lines
do not say what TF's peer matrix would (its connections say which transport NCCL chose; the NCCL
reader reads those with ``--from``): every pair stays unknown. The ``tf-log-nccl-only`` note says
where the GPUs come from. One pass over the lines, each looked at in its first ``LINE_CAP_CHARS``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.errors import InputError
from gputopo.model import ReadingNote, TfDevice, TfView
from gputopo.sources.nccl_lines import COMM_RE, CONN_RE, INIT_RE, LEVEL_RE, OLD_COMM_RE, TREE_RANK_RE, host_of, ring_ranks, thread_device
from gputopo.sources.pasted import MAX_GPUS, capped, device_index, nccl_bus_id, undecorated_lines
from gputopo.sources.tf.tflog_startup import MAX_TF_ORDINAL

_MAX_PROCESSES = 256  # more "processes" than any one log shows: the rest are misreads, not kept


@dataclass
class _Process:
    """What one process's NCCL lines say of its GPUs."""

    first_line: int
    devices: set[int] = field(default_factory=set)  # CUDA devices its threads log on, or its Init lines name
    bus: dict[int, str] = field(default_factory=dict)  # CUDA device -> PCI bus id (Init lines)
    ranks: set[int] = field(default_factory=set)  # the ranks its threads log for


@dataclass
class _Lines:
    """What a text's NCCL lines say: each process's GPUs, and the job's ranks."""

    processes: dict[str | None, _Process] = field(default_factory=dict)
    nranks: int = 0  # the most ``nranks`` a line says (at most MAX_GPUS)
    ring: set[int] = field(default_factory=set)  # the ranks the rings list
    nodes: int = 0  # the most ``nNodes`` a line says
    hosts: set[str] = field(default_factory=set)


def nccl_view(text: str, source: str, run: int | None = None) -> TfView | None:
    """TensorFlow's view from a log's NCCL lines; None where they name no GPU and no rank.
    ``InputError`` where ``run`` names a process the log does not hold."""
    lines = _read(text)
    processes = [p for p in lines.processes.values() if p.devices or p.ranks]
    if not processes and not (lines.ring or lines.nranks):
        return None
    if not processes:  # ranks and rings without a thread prefix: one process, no CUDA device named
        processes = [_Process(first_line=min(p.first_line for p in lines.processes.values()))]
    processes.sort(key=lambda p: p.first_line)
    if run is None:
        index = max(range(len(processes)), key=lambda k: (len(processes[k].devices), k))
    elif 1 <= run <= len(processes):
        index = run - 1
    else:
        held = "one process" if len(processes) == 1 else f"{len(processes)} processes (1-{len(processes)})"
        raise InputError(f"--tf-run {run}: {source} holds NCCL lines of {held} and no TensorFlow start-up")
    view = _view(processes[index], lines, len(processes) == 1, source)
    view.startups, view.startup = len(processes), index + 1
    if len(processes) > 1:
        view.reading_notes.insert(0, _processes_note(processes, index, run))
    return view


def _read(text: str) -> _Lines:
    lines = _Lines()
    for line_no, line in enumerate(undecorated_lines(text), start=1):
        line = capped(line)
        if "NCCL " not in line or (m := LEVEL_RE.search(line)) is None or m.group(1) != "INFO":
            continue
        prefix, msg = line[: m.start()], line[m.end() :].strip()
        host, thread = host_of(prefix)
        key = thread.rsplit(":", 1)[0] if thread is not None else None  # host:pid
        if host and not host.startswith("<") and len(lines.hosts) < _MAX_PROCESSES:
            lines.hosts.add(host)
        if key not in lines.processes and len(lines.processes) >= _MAX_PROCESSES:
            continue
        process = lines.processes.setdefault(key, _Process(first_line=line_no))
        if (dev := thread_device(prefix)) is not None and dev <= MAX_TF_ORDINAL:
            process.devices.add(dev)
        _message(lines, process, msg)
    return lines


def _message(lines: _Lines, process: _Process, msg: str) -> None:
    if (init := INIT_RE.search(msg)) is not None:
        lines.nranks = max(lines.nranks, min(int(init.group(2)[:9]), MAX_GPUS))
        rank, device = device_index(init.group(1)), device_index(init.group(3))
        if rank is not None:
            process.ranks.add(rank)
        if device is not None and device <= MAX_TF_ORDINAL:
            process.devices.add(device)
            if (bus := nccl_bus_id(init.group(5))) is not None:
                process.bus.setdefault(device, bus)
    elif (comm := COMM_RE.search(msg) or OLD_COMM_RE.match(msg)) is not None:
        lines.nranks = max(lines.nranks, min(int(comm.group(2)[:9]), MAX_GPUS))
        if comm.re is COMM_RE:
            lines.nodes = max(lines.nodes, min(int(comm.group(3)[:9]), MAX_GPUS))
    elif (ring := ring_ranks(msg)) is not None:
        if len(lines.ring) < MAX_GPUS:
            lines.ring.update(ring)
    elif (tree := TREE_RANK_RE.match(msg)) is not None:
        if (rank := device_index(tree.group(1))) is not None:
            process.ranks.add(rank)
    elif (conn := CONN_RE.search(msg)) is not None:  # the thread logs for the sender (the receiver of a [receive])
        rank = device_index(conn.group(4) if "[receive]" in conn.group(0) else conn.group(2))
        if rank is not None:
            process.ranks.add(rank)


def _view(process: _Process, lines: _Lines, one_process: bool, source: str) -> TfView:
    counts = [max(process.devices, default=-1) + 1, len(process.ranks)]
    if one_process and lines.nodes <= 1 and len(lines.hosts) <= 1:  # the job's ranks are this process's GPUs
        counts += [lines.nranks, len(lines.ring), max(lines.ring | process.ranks, default=-1) + 1]
    count = max(c for c in counts if c <= MAX_TF_ORDINAL + 1)  # a larger nranks is a misread line, as a larger ordinal
    devices = [TfDevice(ordinal=d, pci_bus_id=process.bus.get(d)) for d in sorted(process.devices)]
    size = max(process.devices, default=-1) + 1
    peer: list[list[bool | None]] = [[None] * size for _ in range(size)]
    for d in process.devices:
        peer[d][d] = True
    notes = [ReadingNote("tf-log-nccl-only", {"source": source, "count": count, "devices": sorted(process.devices),
                                              "nranks": lines.nranks or None, "ring": len(lines.ring) or None},
                         sorted(process.devices))]
    if count > len(devices):
        notes.append(ReadingNote("tf-gpus-implied", {"count": count, "named": sorted(process.devices)}))
    return TfView(devices=devices, peer=peer, era=None, source=source, reading_notes=notes,
                  gpu_count=count, gpu_count_at_least=True)


def _processes_note(processes: list[_Process], index: int, run: int | None) -> ReadingNote:
    """Which process the view reads, as ``tf-log-startups`` says it of TF's own start-ups."""
    how = "asked" if run is not None else "none-complete" if index == len(processes) - 1 else "most-gpus"
    others = [{"number": k + 1, "first_line": p.first_line, "gpus": sorted(p.devices)[:8], "gpu_count": len(p.devices),
               "peer_entries": 0, "complete": False} for k, p in enumerate(processes) if k != index][:6]
    return ReadingNote("tf-log-startups", {"startups": len(processes), "chosen": index + 1, "how": how,
                                           "first_line": processes[index].first_line, "others": others})
