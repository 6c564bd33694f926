"""One run per checkpoint folder: an exclusive ``flock`` on ``<folder>/.gputopo-lock`` for the run's
life, with the holder's pid, host and start time written in the file for the next one to read.

``gputopo train`` takes the lock before it starts any training process and hands the locked file
descriptor to its children (``pass_fds``): the lock belongs to the open file, so it holds as long
as any of them runs, even if the parent itself is killed. The kernel drops it when the last one
exits, however it ends; a stale lock file left behind locks nothing. The lock file is opened without
following a link and must be a regular file with one link (``fileio.open_regular``).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from gputopo.errors import InputError
from gputopo.fileio import open_regular

LOCK_FILE = ".gputopo-lock"


class CheckpointLock:
    """The exclusive lock on one checkpoint folder, held from ``acquire`` until ``release``."""

    def __init__(self, folder: Path, fd: int) -> None:
        self.folder = folder
        self.fd = fd

    @classmethod
    def acquire(cls, checkpoint_dir: str | os.PathLike[str]) -> CheckpointLock:
        """Lock the (existing) folder or raise ``InputError`` naming the run that holds it."""
        folder = Path(checkpoint_dir)
        path = folder / LOCK_FILE
        # Never through a link, never a FIFO or device: root would truncate whatever it leads to.
        fd = open_regular(path, os.O_RDWR | os.O_CREAT, "checkpoint lock")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = _describe_holder(fd)
            os.close(fd)
            raise InputError(
                f"checkpoint folder {folder} is in use by another run ({holder}); wait for it to finish "
                "or give another --checkpoint-dir"
            ) from None
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%d %H:%M:%S %z")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        return cls(folder, fd)

    def release(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)  # the lock goes with the last descriptor (a child may still hold one)
            self.fd = -1

    def __enter__(self) -> CheckpointLock:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.release()


def _describe_holder(fd: int) -> str:
    """``pid 123 on host gpu7, started 2025-01-01 10:00:00 +0000`` from the lock file."""
    try:
        record = json.loads(os.pread(fd, 4096, 0).decode("utf-8", errors="replace") or "{}")
        return f"pid {int(record['pid'])} on host {record['host']}, started {record['started']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "its details are not written yet"
