"""A TensorFlow log's events -> its start-ups (one per process start, in order of first line).

One file often holds several start-ups: a README with two runs, a job that restarted, two workers
writing one log, Horovod or MPI ranks whose lines interleave. Each start-up is TF's device
initialisation sequence: ``Found device`` lines, the peer-access lines or matrix (``DMA:`` /
edge matrix), ``Adding visible gpu devices``, then one ``Created ... device`` line per GPU. A line
starts a new start-up when it cannot belong to the current one:

- ``Found device N`` when N was already found, or after the matrix, visible list or devices;
- ``Adding visible gpu devices`` a second time, or after the matrix, or naming fewer GPUs than
  were already created;
- a peer matrix when the start-up has one already, or when its column header leaves out a GPU the
  start-up already created (another rank's matrix);
- a ``cannot peer`` line repeating a pair, or after the matrix or the devices;
- ``Created ... device`` for a TF GPU or CUDA device this start-up already created. Interleaved
  ranks print their matrix before their devices, so such a line goes to the latest start-up that
  names its device and has not created it yet, and starts a new one only where none does;
- a device line (``Found device``, its property lines, XLA's ``StreamExecutor device``, ``Created``,
  ``Ignoring ... gpu device``) naming an ordinal the start-up already knows as another GPU: another
  model name (one name a prefix of the other is the same name: ``Found device`` prints more of it)
  or another PCI bus id. One process numbers each GPU once, so that is another process, and where the
  two differ, another machine: a README of two machines, two logs pasted one after the other. Such
  start-ups are never merged; a ``Created`` line goes to no start-up that knows its ordinal as
  another GPU. Lines that name no model or bus id (a visible list, a matrix) cannot tell: where
  they come before the first line that does, they stay with the earlier start-up;
- a line a process prints once before it looks for GPUs (the driver library opened: ``libcuda.so``,
  ROCm's ``libhip_hcc``/``libamdhip64``; the CPU feature guard) after GPU lines.

Where line prefixes name the process (mpirun's ``[1,3]<stderr>:``, glog/absl thread ids), each
process's lines are split on their own. The default start-up (``chosen_startup``) is the one that
says most about peers (``peer_entries``), among equals the last complete one.

The same log twice (one machine started twice: a restarted job) holds two start-ups of the same
GPUs: each GPU is found or created twice, so the second begins anew; the view reads one of them, as
any other restart. A repeated ``Ignoring ... gpu device`` line is no restart (TF 0.x printed it once
per session).

A start-up is *complete* when it created every GPU it names (less those TF ignores) and its
matrix has every row.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.sources.tf.tflog_lines import (
    CREATED,
    DENIED,
    ENABLE_FAILED,
    FOUND,
    IGNORED,
    MATRIX,
    PROPS,
    ROW,
    START,
    VISIBLE,
    XLA,
    LogEvent,
    identity_of,
)

_LOOK_BACK_STARTUPS = 16  # interleaved ranks: how far back a Created line may find its start-up


@dataclass
class StartUp:
    """The events of one TensorFlow start-up, and what they name."""

    events: list[LogEvent] = field(default_factory=list)
    found: set[int] = field(default_factory=set)
    xla: set[int] = field(default_factory=set)  # XLA's StreamExecutor devices
    visible: set[int] | None = None
    matrix_columns: set[int] = field(default_factory=set)
    matrix_rows: set[int] = field(default_factory=set)
    has_matrix: bool = False
    denied: set[tuple[int, int]] = field(default_factory=set)
    enable_failed: set[tuple[int, int]] = field(default_factory=set)
    created: set[int] = field(default_factory=set)
    created_tf_ids: set[int] = field(default_factory=set)
    ignored: set[int] = field(default_factory=set)
    identity: dict[int, tuple[str | None, str | None]] = field(default_factory=dict)  # ordinal -> (name, bus id)
    last_found: int | None = None  # the "Found device N" whose property lines follow

    @property
    def first_line(self) -> int:
        return self.events[0].line_no if self.events else 0

    def names(self) -> set[int]:
        """The CUDA ordinals this start-up says exist (before any device is created)."""
        named = set(self.found) | self.xla | self.matrix_columns | self.matrix_rows
        named |= self.visible or set()
        named |= {o for pair in self.denied for o in pair}
        return named

    @property
    def complete(self) -> bool:
        if not self.created:
            return False
        if self.has_matrix and self.matrix_columns and not self.matrix_columns <= self.matrix_rows:
            return False
        return self.names() - self.ignored <= self.created

    def knows_otherwise(self, event: LogEvent) -> bool:
        """Whether a device line names an ordinal this start-up knows as another GPU (another model
        name or PCI bus id)."""
        ordinal = event.ordinals[0] if event.ordinals else (self.last_found if event.kind == PROPS else None)
        known = self.identity.get(ordinal) if ordinal is not None else None
        if known is None:
            return False
        (name, bus), (known_name, known_bus) = identity_of(event), known
        if bus and known_bus and bus != known_bus:
            return True
        if name and known_name:
            a, b = name.casefold(), known_name.casefold()
            return not (a.startswith(b) or b.startswith(a))
        return False

    def _learn(self, event: LogEvent) -> None:
        ordinal = event.ordinals[0] if event.ordinals else (self.last_found if event.kind == PROPS else None)
        name, bus = identity_of(event)
        if ordinal is None or (name is None and bus is None):
            return
        known_name, known_bus = self.identity.get(ordinal, (None, None))
        self.identity[ordinal] = (known_name or name, known_bus or bus)

    def add(self, event: LogEvent) -> None:
        self.events.append(event)
        kind, ordinals = event.kind, event.ordinals
        self._learn(event)
        if kind == FOUND:
            self.found.update(ordinals)
            self.last_found = ordinals[0]
        elif kind == XLA:
            self.xla.update(ordinals)
        elif kind == VISIBLE:
            self.visible = set(ordinals)
        elif kind == MATRIX:
            self.has_matrix = True
            self.matrix_columns.update(ordinals)
        elif kind == ROW:
            self.matrix_rows.update(ordinals)
        elif kind == DENIED:
            self.denied.add((ordinals[0], ordinals[1]))
        elif kind == ENABLE_FAILED:
            self.enable_failed.add((ordinals[0], ordinals[1]))
        elif kind == CREATED:
            self.created.update(ordinals)
            if event.tf_id is not None:
                self.created_tf_ids.add(event.tf_id)
        elif kind == IGNORED:
            self.ignored.update(ordinals)


def split_startups(events: list[LogEvent]) -> list[StartUp]:
    """The log's start-ups in order of their first line (an empty list for no events). Where line
    prefixes name the process (MPI ranks, thread ids) and several write one file, each process's
    lines are split on their own (a line with no prefix goes with the line before it)."""
    keys = {e.process for e in events} - {None}
    if len(keys) < 2:
        return _split(events)
    streams: dict[str | None, list[LogEvent]] = {}
    key = None
    for event in events:
        key = event.process or key
        streams.setdefault(key, []).append(event)
    startups = [startup for stream in streams.values() for startup in _split(stream)]
    return sorted(startups, key=lambda s: s.first_line)


def _split(events: list[LogEvent]) -> list[StartUp]:
    startups: list[StartUp] = []
    found_owner: StartUp | None = None  # where "Found device" detail lines go
    matrix_owner: StartUp | None = None  # where matrix rows go
    for event in events:
        if event.kind == START:  # a new process: what follows is its start-up
            if startups and startups[-1].events:
                startups.append(StartUp())
                found_owner = matrix_owner = None
            continue
        if event.kind == PROPS:
            if found_owner is not None and found_owner.knows_otherwise(event):
                found_owner = _split_off_found(found_owner, startups)  # its name or bus id says: another GPU
            if found_owner is not None:
                found_owner.add(event)
            continue
        if event.kind == ROW:
            owner = matrix_owner
            if owner is None or (event.ordinals[0] in owner.matrix_rows):
                if event.ordinals[0] != 0 and owner is None and not _rows_of_a_cut_matrix(event):
                    continue  # a stray "N: Y" line with no matrix begun: not a matrix row
                # A headerless matrix with no title line either: its first row begins it.
                owner = _startup_for(startups, LogEvent(MATRIX, event.line_no, diagonal_is_self=False, header_missing=True))
                owner.add(LogEvent(MATRIX, event.line_no, diagonal_is_self=False, header_missing=True))
                matrix_owner = owner
            owner.add(event)
            continue
        if event.kind == CREATED:
            target = _startup_for_created(startups, event)
        else:
            target = _startup_for(startups, event)
        target.add(event)
        if event.kind == FOUND:
            found_owner = target
        elif event.kind == MATRIX:
            matrix_owner = target
    return startups


def _split_off_found(owner: StartUp, startups: list[StartUp]) -> StartUp:
    """A ``Found device N`` whose property lines show another GPU than the one ``owner`` knows as N
    (TF 1.x prints the name and bus id on the lines after it): that line and its properties so far
    begin a new start-up (appended); ``owner`` keeps the lines before it."""
    cut = max(k for k, e in enumerate(owner.events) if e.kind == FOUND)
    kept, moved = owner.events[:cut], owner.events[cut:]
    owner.__dict__.update(_startup_of(kept).__dict__)
    startup = _startup_of(moved)
    startups.append(startup)
    return startup


def _startup_of(events: list[LogEvent]) -> StartUp:
    startup = StartUp()
    for event in events:
        startup.add(event)
    return startup


def _rows_of_a_cut_matrix(row: LogEvent) -> bool:
    """A row k printed by TF's own peer-matrix code (``gpu_device.cc:N] 3:   Y Y Y Y``) with more
    entries than k: a matrix whose title, header and first rows the excerpt lost, read from here."""
    return row.gpu_source and len(row.values) > row.ordinals[0]


def _startup_for(startups: list[StartUp], event: LogEvent) -> StartUp:
    """The current start-up if ``event`` fits it, else a new one (appended)."""
    current = startups[-1] if startups else None
    if current is None or _starts_new(current, event):
        current = StartUp()
        startups.append(current)
    return current


def _starts_new(current: StartUp, event: LogEvent) -> bool:
    kind, ordinals = event.kind, set(event.ordinals)
    if kind in (FOUND, XLA, IGNORED) and current.knows_otherwise(event):
        return True  # the ordinal is another GPU here: another process, another machine
    if kind == XLA:
        return bool(ordinals & current.xla)
    if kind == FOUND:
        return bool(ordinals & current.found) or current.has_matrix or bool(current.created) or current.visible is not None
    if kind == VISIBLE:
        return current.visible is not None or current.has_matrix or not current.created <= ordinals
    if kind == MATRIX:
        return current.has_matrix or bool(ordinals and not current.created <= ordinals)
    if kind == DENIED:
        pair = (event.ordinals[0], event.ordinals[1])
        return pair in current.denied or current.has_matrix or bool(current.created)
    if kind == ENABLE_FAILED:
        return (event.ordinals[0], event.ordinals[1]) in current.enable_failed
    return False


def _startup_for_created(startups: list[StartUp], event: LogEvent) -> StartUp:
    """The latest start-up that names this device and has not created it; a new one if none."""
    ordinal = event.ordinals[0] if event.ordinals else None
    for startup in reversed(startups[-_LOOK_BACK_STARTUPS:]):
        if ordinal is not None and ordinal in startup.created:
            continue
        if event.tf_id is not None and event.tf_id in startup.created_tf_ids:
            continue
        if startup.knows_otherwise(event):  # another GPU by that ordinal: never this start-up
            continue
        named = startup.names()
        if ordinal is None or not named or ordinal in named:
            return startup
    startup = StartUp()
    startups.append(startup)
    return startup


def peer_entries(startup: StartUp) -> int:
    """How much a start-up says about which GPUs can peer: matrix entries, pair lines."""
    matrix = len(startup.matrix_rows) * max(len(startup.matrix_columns), 1) if startup.has_matrix else 0
    return matrix + len(startup.denied) + len(startup.enable_failed)


def chosen_startup(startups: list[StartUp]) -> int:
    """The 0-based index of the start-up to read by default: the one that says most about peers;
    among equals the last complete one, else the last (a cut restart never hides the only matrix)."""
    return max(range(len(startups)), key=lambda k: (peer_entries(startups[k]), startups[k].complete, k))


def last_complete(startups: list[StartUp]) -> int | None:
    return next((k for k in range(len(startups) - 1, -1, -1) if startups[k].complete), None)
