"""``gputopo train --watch``: the link counters of ``gputopo watch`` sampled beside the training.

A thread of the parent samples NVML's counters (``gputopo.sources.host.nvml_counters``, the one NVML door)
every interval while the children train, folds each interval into a ``Summary`` and hands it to
``on_frame`` (the caller writes it out: the JSON line of ``--watch-file``); a last interval is read
when training ends, so a short run has one. Where NVML cannot start (no driver, no binding) the
recorder says why in one line and records nothing: training goes on. No TensorFlow here.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Callable
from pathlib import Path

from gputopo.analysis.causes.finding_kinds import with_kinds
from gputopo.analysis.watch.watch import Frame, frame
from gputopo.analysis.watch.watch_summary import Summary
from gputopo.errors import GputopoError, InputError, OutputError
from gputopo.fileio import _open_folder, _walk, open_regular  # the walk and hold every output file gets
from gputopo.sources.host import nvml_counters
from gputopo.sources.host.nvml_counters import CounterReader, GpuSample, WatchedGpu

DEFAULT_INTERVAL_S = 1.0


class TrainWatch:
    """Start it before the children, ``stop()`` after: ``summary`` and ``gpus`` are then what it saw,
    ``reason`` why nothing was recorded (None where it was)."""

    def __init__(self, on_frame: Callable[[Frame], None], interval_s: float = DEFAULT_INTERVAL_S) -> None:
        self.on_frame, self.interval_s = on_frame, interval_s
        self.summary = Summary()
        self.gpus: list[WatchedGpu] = []
        self.reason: str | None = None
        self._reader: CounterReader | None = None
        self._before: list[GpuSample] = []
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def start(self) -> str | None:
        """Open NVML and start sampling; the reason it cannot, in one line (None: it samples)."""
        reader = None
        try:
            reader = nvml_counters.reader()
            self.gpus = reader.open()
            self._before = reader.sample()
        except GputopoError as exc:
            if reader is not None:
                reader.close()
            self.reason = f"link traffic not recorded: {exc}"
            return self.reason
        self._reader = reader
        self._thread = threading.Thread(target=self._loop, name="gputopo-train-watch", daemon=True)
        self._thread.start()
        return None

    def _loop(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self._one()

    def _one(self) -> None:
        with self._lock:
            if self._reader is None:
                return
            try:
                after = self._reader.sample()
                current = frame(self.gpus, self._before, after)
                with_kinds(current.findings)
                self._before = after
                self.summary.add(current)
                self.on_frame(current)
            except (GputopoError, OSError) as exc:  # the file filled up, NVML went away: training goes on
                self.reason = f"link traffic recording stopped: {exc}"
                self._close()

    def stop(self) -> None:
        """Stop sampling (one last interval first) and close NVML."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._reader is not None:
            self._one()
        with self._lock:
            self._close()

    def _close(self) -> None:
        if self._reader is not None:
            self._reader.close()
            self._reader = None


def open_watch_file(path: str | os.PathLike[str], what: str = "--watch-file") -> int:
    """A descriptor of the regular file ``path`` to append to (created 0644 if missing), held as an
    output file is (``fileio.atomic_write_bytes``): the folder is walked once (``protected_link``'s rule for
    every link on the way) and opened one name at a time, the file opened in it without following a
    link (``fileio.open_regular``); an existing file of another user in a sticky world-writable folder is
    refused as ``fs.protected_regular`` would (an ``OutputError``), whatever the sysctl says."""
    given = Path(path)
    if not os.fspath(path) or not given.name:
        raise InputError(f"cannot open {what} {os.fspath(path)!r}: give a file name")
    refused, folder = _walk(given.parent)
    if refused is not None:
        raise InputError(f"cannot write {what} {given}: {refused}")
    if folder is None:
        raise OutputError(f"cannot write {what} {given}: the current folder no longer exists")
    try:
        dir_fd = _open_folder(folder)
    except OSError as exc:
        raise InputError(f"cannot open {what} {given}: folder {given.parent} cannot be opened "
                         f"({exc.strerror or exc})") from None
    try:
        fd = open_regular(given.name, os.O_WRONLY | os.O_CREAT | os.O_APPEND, what, dir_fd=dir_fd, shown=given)
        file_st, folder_st = os.fstat(fd), os.fstat(dir_fd)
    finally:
        os.close(dir_fd)
    sticky_public = folder_st.st_mode & stat.S_ISVTX and folder_st.st_mode & stat.S_IWOTH
    if sticky_public and file_st.st_uid not in (folder_st.st_uid, os.geteuid()):
        os.close(fd)
        raise OutputError(f"cannot write {what} {given}: the file is owned by uid {file_st.st_uid} in the sticky "
                          f"world-writable folder {given.parent} (neither the folder's owner nor you): not "
                          f"appended to (as fs.protected_regular); remove it or give another name")
    return fd
