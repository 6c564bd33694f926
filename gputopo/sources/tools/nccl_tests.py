"""nccl-tests output (``all_reduce_perf`` and the other ``*_perf``) -> Topology with the collective's
bus bandwidth per size (``Topology.collectives``).

Read by structure: ``#  Rank  N [Group G] Pid P on HOST device D [BUS] NAME`` lines (BUS as ``0x1b``
or ``0000:1b:00``), the column header (``size count type redop [root] time algbw busbw #wrong|error``,
twice: out-of-place then in-place), numeric rows under it, ``# Out of bounds values : N OK|FAILED``
and ``# Avg bus bandwidth : X``. Each header starts a run (several runs in one paste are kept in
order); the operation is named from a ``*_perf`` command line (also after root's ``#`` prompt) or
``Collective test concluded: X`` where the paste has one. Single host: GPU numbers are the devices
(CUDA ordinals); several hosts: the ranks, with their host. Without a device list, a command line run
without a launcher names its one process's GPUs by its options (``-g 2``: CUDA devices 0 and 1; ``-t``
threads times ``-g``), said in a ``nccl-tests-gpus-from-command`` note; the runs' GPUs stay unnamed.

Pasted text is read as it comes: the ``#`` comment markers may be lost (a paste outside a code block
becomes markdown headings), and a prefix printed before the header (a ``$ `` prompt, a ``host: ``
label) is taken off the rows too. A paste cut before its first row whose ``# Using devices`` block
names the GPUs gives the GPUs and no run; the missing rows are said (``nccl-tests-no-rows``). One
rank named by two processes in one device list (two ``Rank  0`` lines of different hosts or pids)
is jobs run apart, each alone (``nccl-tests-separate-jobs``): under ``mpirun``, nccl-tests built
without MPI. Cut
before its header too, it is recognised by that block, except beside ``NCCL INFO`` lines (then it is
an NCCL log's preamble, read by ``sources.tools.nccl_log``); so is a header without any row or device
line there (the log's lines interleave with the table's first lines): that reader says the cut.
Patterns look at a line's first ``LINE_CAP_CHARS``.
"""

from __future__ import annotations

import re

from gputopo.errors import InputError
from gputopo.model import CollectiveRow, CollectiveRun, Gpu, ReadingNote, Topology
from gputopo.notation import ascii_int
from gputopo.sources.pasted import MAX_GPUS, bus_id, capped, device_index, hex_bus_id, lines_of, number

KIND = "nccl-tests"
MAX_ROWS = 4096

# The ``#`` markers may be lost in a paste. The name runs to the end of the line (stripped in code:
# ``(.*?)\s*$`` tried ``\s*$`` at every length of it).
_RANK_RE = re.compile(
    r"(?:#\s*|\b)Rank\s+(\d+)(?:\s+Group\s+\d+)?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([0-9a-fA-Fx:.]+)\]\s+(.*)$"
)
_HEADER_RE = re.compile(r"(?:#\s*|\b)size\s+count\s+type\s+redop\s+(root\s+)?time\s+algbw\s+busbw\s+(#?wrong|error)\b")
_OP_RE = re.compile(r"\b(\w+)_perf(?:_mpi)?\b")
# A command after root's prompt ("# ./build/all_reduce_perf -b 8"): nccl-tests' own '#' lines never
# start with a *_perf command (variables and sudo may stand before it); a bare name must be followed
# by options or nothing, a comment's words ("# all_reduce_perf is slower") are no command.
_ROOT_COMMAND_RE = re.compile(r"^\s*#\s*(?:[A-Za-z_]\w*=\S*\s+)*(?:sudo\s+)?"
                              r"(?:\S*/(\w+)_perf(?:_mpi)?(?=\s|$)|(\w+)_perf(?:_mpi)?(?=\s+-|\s*$))")
# nccl-tests' own options for how many GPUs one process drives: threads x GPUs per thread, CUDA devices
# 0..t*g-1 of a process (``-g 2``, ``--ngpus 2``, ``-t 2``, ``--nthreads=2``).
_GPUS_OPTION_RE = re.compile(r"(?:^|\s)(-g|--ngpus|-t|--nthreads)(?:=|\s+)(\d{1,4})(?=[\s*`']|$)")  # a paste's bold or quote may close it
_LAUNCHERS = ("mpirun", "mpiexec", "srun", "horovodrun", "torchrun", "orterun", "-np ")
_OOB_RE = re.compile(r"Out of bounds values\s*:\s*(\d+)")
_AVG_RE = re.compile(r"Avg bus bandwidth\s*:\s*([0-9.eE+-]+)")


def sniff(text: str) -> bool:
    """Whether the text holds an nccl-tests table (its column header) or its ``Using devices`` lines."""
    if "busbw" in text and _HEADER_RE.search(text) is not None:  # (the header's word first: a cheap no)
        # A header without a row or a device line among NCCL_DEBUG lines (the log interleaves with the
        # table's first lines, and the paste ends there) is the NCCL log's: that reader says the cut.
        return not ("NCCL INFO" in text and header_without_rows(text))
    # Cut before the header: its device list alone. Beside NCCL_DEBUG lines it is the preamble of an
    # NCCL log, which that reader reads (ranks numbered its way: two numberings of one run would not join).
    return "Using devices" in text and "NCCL INFO" not in text and "NCCL WARN" not in text and any(
        _RANK_RE.search(capped(line)) for line in _lines_after(text, "Using devices"))


def device_line(line: str) -> tuple[int, str, int, str | None, str] | None:
    """A ``#  Rank R [Group G] Pid P on HOST device D [BUS] NAME`` line of ``Using devices`` as
    (rank, host, CUDA device, bus id, GPU name), for the NCCL log reader (the preamble of a log it reads)."""
    if (m := _RANK_RE.search(capped(line))) is None:
        return None
    rank, device = device_index(m.group(1)), device_index(m.group(4))
    if rank is None or device is None:
        return None
    return rank, m.group(3)[:100], device, _bus(m.group(5)), m.group(6).strip()[:200]


def header_without_rows(text: str) -> bool:
    """Whether the text's nccl-tests column header has no row under it and no ``Rank N ... device``
    line names a GPU (the table cut before its first row, its device list not pasted)."""
    try:
        read(text, "text")
    except InputError:
        return True
    return False


def _lines_after(text: str, words: str, count: int = 4) -> list[str]:
    """The ``count`` lines after the first line holding ``words``."""
    at = text.find(words)
    return text[at:].split("\n", count + 1)[1 : count + 1] if at >= 0 else []


def read(text: str, source: str) -> Topology:
    """Every nccl-tests run in ``text``, and the devices they name."""
    devices: dict[int, tuple[str, int, str | None, str]] = {}  # rank -> host, device, bus, name
    block: dict[int, tuple[str, str]] = {}  # rank -> (host, pid) named since the last column header
    alone: list[tuple[str, str]] = []  # processes that named a rank another process of the block named too
    runs: list[CollectiveRun] = []
    operation: str | None = None
    lines = lines_of(text)
    i = 0
    headers = 0
    command: tuple[int, str] | None = None  # the last *_perf command line's GPUs and their options, one process
    commanded: list[tuple[CollectiveRun, int, str]] = []  # each run whose command line names its GPUs
    while i < len(lines):
        line = capped(lines[i])
        if (m := _RANK_RE.search(line)) and (rank := device_index(m.group(1))) is not None:
            device = device_index(m.group(4))
            process = (m.group(3)[:100], m.group(2)[:20])
            if device is not None and len(devices) < MAX_GPUS:
                entry = (process[0], device, _bus(m.group(5)), m.group(6).strip()[:200])
                if block.setdefault(rank, process) != process:  # one rank, two processes: jobs run apart
                    alone.extend(p for p in (block[rank], process) if p not in alone)
                    rank = max(devices) + 1  # kept as a GPU of its own, not written over the other
                devices[rank] = entry
        elif m := _HEADER_RE.search(line):
            headers += 1
            block = {}
            run = CollectiveRun(operation=operation or "unknown", origin=source)
            prefix = line[: m.start()].strip()  # a prompt or host label printed before the table
            i = _rows(lines, i + 1, run, has_root=m.group(1) is not None, prefix=prefix)
            runs.append(run)
            if command is not None and run.rows:
                commanded.append((run, *command))
            continue
        elif (m := _OOB_RE.search(line)) and runs:
            runs[-1].out_of_bounds = int(m.group(1))
        elif (m := _AVG_RE.search(line)) and runs:
            runs[-1].avg_busbw_gbps = number(m.group(1))
        elif "concluded:" in line and (m := _OP_RE.search(line)) and runs:
            runs[-1].operation = m.group(1)
        elif "_perf" in line and (m := _ROOT_COMMAND_RE.match(line)):
            operation = m.group(1) or m.group(2)
            command = _command_gpus(line) or command
        elif "_perf" in line and (m := _OP_RE.search(line)) and not line.lstrip().startswith("#"):
            operation = m.group(1)
            command = _command_gpus(line) or command
        i += 1
    runs = [run for run in runs if run.rows]
    if not runs and not devices:
        raise InputError(f"{source}: an nccl-tests header without any row, and no `Using devices` line")
    topo = _topology(devices, runs, source)
    if not devices and commanded:  # no device list: the command line says how many GPUs the process drove
        _devices_of_command(topo, commanded, source)
    if alone:
        topo.label = f"nccl-tests: {len(alone)} processes, each its own job"
        topo.reading_notes.append(ReadingNote("nccl-tests-separate-jobs", {
            "source": source, "processes": [list(p) for p in alone[:16]]}))
    if not runs:  # cut before the first row: the devices are all it says
        topo.reading_notes.append(ReadingNote("nccl-tests-no-rows", {"source": source, "header": headers > 0}))
    return topo


def _command_gpus(line: str) -> tuple[int, str] | None:
    """``(GPUs, options)`` a ``*_perf`` command line gives its one process (``-g 2`` -> CUDA devices 0 and 1;
    ``-t 2 -g 2`` -> 0-3); None where it names neither option, or runs under a launcher (``mpirun -np 4``:
    how many processes on which hosts is not the command's to say)."""
    if any(word in line for word in _LAUNCHERS):
        return None
    found = {("g" if "g" in name else "t"): (name, int(value)) for name, value in _GPUS_OPTION_RE.findall(line)}
    if not found:
        return None
    threads, gpus = found.get("t", ("", 1))[1], found.get("g", ("", 1))[1]
    if not 1 <= threads * gpus <= MAX_GPUS:
        return None
    return threads * gpus, " ".join(f"{name} {value}" for name, value in (found.get("t", ("", 0)), found.get("g", ("", 0))) if name)


def _devices_of_command(topo: Topology, commanded: list[tuple[CollectiveRun, int, str]], source: str) -> None:
    """The GPUs command lines' options name, where the output lists none: CUDA devices 0..n-1 of the
    process (nccl-tests drives device ``t*g + i``) for the run that drove most, nothing else known of them;
    said in a note. The runs' own GPUs stay unnamed: which devices each run had under its
    CUDA_VISIBLE_DEVICES, and whether the table is one host's, is not in the output (no busbw is judged)."""
    _, count, options = max(commanded, key=lambda c: c[1])
    topo.gpus = [Gpu(index=k) for k in range(count)]
    topo.label = f"nccl-tests on {count} GPUs ({options} on its command line)"
    topo.reading_notes.append(ReadingNote("nccl-tests-gpus-from-command",
                                          {"source": source, "gpu_count": count, "options": options}))


def _bus(token: str) -> str | None:
    if token.lower().startswith("0x"):  # the bus number alone (see ``_topology``)
        try:
            number = int(token, 16)
        except ValueError:
            return None
        # Bus 0 is the root bus, whose device 0 is the host bridge: a GPU there (a VM's, AWS p3's at
        # 00:1e.0) is at a device number the text does not give.
        return bus_id(0, number) if number else None
    parts = token.split(":")
    return hex_bus_id(*parts) if len(parts) == 3 else None


def _rows(lines: list[str], start: int, run: CollectiveRun, has_root: bool, prefix: str = "") -> int:
    i = start
    while i < len(lines) and len(run.rows) < MAX_ROWS:
        line = lines[i].lstrip()
        if prefix and line.startswith(prefix):  # the header's prompt or host label, on every line
            line = line[len(prefix) :]
        tokens = line.split()
        if tokens and tokens[0] in ("#", "(B)") and not run.rows:  # the (B) (elements) units line
            i += 1
            continue
        if not tokens or ascii_int(tokens[0], 20) is None:
            break
        row = _row(tokens, has_root)
        if row is None:
            break
        run.rows.append(row)
        i += 1
    return i


def _row(tokens: list[str], has_root: bool) -> CollectiveRow | None:
    """One size: size count type redop [root] then (time algbw busbw wrong) out-of-place and in-place."""
    head = 5 if has_root else 4
    if len(tokens) < head + 4:
        return None
    size = ascii_int(tokens[0], 20)
    if size is None:
        return None
    figures = tokens[head:]
    out, inplace = figures[:4], figures[4:8]
    row = CollectiveRow(size_bytes=size, count=ascii_int(tokens[1], 20),
                        dtype=tokens[2][:20], redop=tokens[3][:20],
                        root=int(tokens[4]) if has_root and re.fullmatch(r"-?\d+", tokens[4]) else None)
    row.out_time_us, row.out_algbw_gbps, row.out_busbw_gbps = (number(t) for t in out[:3])
    row.out_wrong = _wrong(out[3])
    if len(inplace) == 4:
        row.in_time_us, row.in_algbw_gbps, row.in_busbw_gbps = (number(t) for t in inplace[:3])
        row.in_wrong = _wrong(inplace[3])
    return row


def _wrong(token: str) -> int | None:
    """``#wrong`` as a count; an older ``error`` column (a float) counts as 0 when it is 0, else 1."""
    if ascii_int(token, 20) is not None:
        return ascii_int(token, 20)
    value = number(token)
    return None if value is None else (0 if value == 0 else 1)


def _topology(devices: dict[int, tuple[str, int, str | None, str]], runs: list[CollectiveRun], source: str) -> Topology:
    hosts = {host for host, _, _, _ in devices.values()}
    one_host = len(hosts) <= 1
    # ``[0x1b]`` is the bus number alone (CUDA's pciBusID), read as 0000:1b:00.0: device 0, as GPUs
    # sit on most hosts. Where two GPUs of one host print the same number (a VM's GPUs, all on bus 0
    # at devices 1b..1e), their bus ids are not in the text: none is claimed for them.
    seen: dict[tuple[str, str], set[int]] = {}
    for host, device, bus, _ in devices.values():
        if bus is not None:
            seen.setdefault((host, bus), set()).add(device)
    shared = {key for key, on in seen.items() if len(on) > 1}
    gpus: dict[int, Gpu] = {}
    for rank, (host, device, bus, name) in sorted(devices.items()):
        bus = None if (host, bus) in shared else bus
        index = device if one_host else rank
        if index < MAX_GPUS and index not in gpus:
            gpus[index] = Gpu(index=index, name=name or None, pci_bus_id=bus, host=None if one_host else host)
    for run in runs:
        run.gpus = sorted(gpus)
        run.nranks = len(devices) or None
    topo = Topology(gpus=sorted(gpus.values(), key=lambda g: g.index), collectives=runs, source="nccl-tests",
                    source_detail=source, label=f"nccl-tests on {len(devices) or 'unnamed'} ranks")
    return topo
