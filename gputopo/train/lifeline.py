"""The lifeline between ``gputopo train`` and its training children, both sides: a child never
outlives its parent, and what an orphan or a killed run leaves is cleaned up.

- the parent starts each child with ``die_with`` as its ``preexec_fn`` (``PR_SET_PDEATHSIG`` =
  SIGTERM before ``exec``) and hands it the read end of a pipe only the parent can write
  (``PARENT_FD_ENV``): the kernel closes the write end when the parent dies, however it dies;
- the child calls ``bind_to_parent``: a watcher thread on that pipe asks it to stop (save) and ends
  it after a grace if it is still running (a save waiting for a dead peer), removing its result
  file and the run's temporary folder (``orphan_cleanup``);
- ``sweep_stale_folders``: the next run removes the temporary folders of runs killed outright.

Pure Python, no TensorFlow (``gputopo.train.launch`` and ``gputopo.train.child`` both import it).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from gputopo.train.config import INTERRUPTED_EXIT_CODE, started_marker
from gputopo.train.native_log import LOG_ENV

ORPHAN_GRACE_S = 30.0  # a child whose parent died stops and saves; one still running after this ends itself
PARENT_FD_ENV = "GPUTOPO_PARENT_FD"  # the read end of the parent-liveness pipe in a child
ORPHAN_GRACE_ENV = "GPUTOPO_ORPHAN_GRACE_S"
TEMP_PREFIX = "gputopo-train-"  # the parent's folder: gputopo-train-<pid>-<random>
CHILD_TEMP_PREFIX = "tmp-"  # in it, each child's own TMPDIR: tmp-<child index>, 0700
RUN_LOCK = ".run.lock"  # in it, flock-held by the parent while the run lives (``hold_run_folder``)
STALE_UNLOCKED_S = 600.0  # a run folder with no lock and no live pid is swept once this old
POLL_S = 0.1
_PR_SET_PDEATHSIG = 1


def libc_prctl() -> Any:
    """libc's ``prctl``, looked up in the parent (a child between fork and exec must not load libraries)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with(parent_pid: int, prctl: Any) -> Callable[[], None]:
    """The child's first act between fork and exec: SIGTERM when this parent dies (kept across
    ``exec``), and an immediate exit if it already has."""

    def bind() -> None:
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        if os.getppid() != parent_pid:
            os._exit(INTERRUPTED_EXIT_CODE)

    return bind


def bind_to_parent(on_gone: Callable[[], None], result_file: str | None = None,
                   grace_s: float | None = None) -> None:
    """In a training child: when the parent ``gputopo train`` dies (even by SIGKILL), stop.

    ``PR_SET_PDEATHSIG`` delivers SIGTERM (the child saves and stops, as on Ctrl-C); the watcher of
    the parent-liveness pipe (``PARENT_FD_ENV``) calls ``on_gone`` (the same request, without a
    second signal), removes the run's result file and, once the last child's is gone, the parent's
    temporary folder, and ends the process after ``grace_s`` if it has not ended by then (a save
    that waits forever for a dead peer). Nothing happens outside Linux or without the pipe.
    """
    if sys.platform.startswith("linux"):
        prctl = libc_prctl()
        if prctl is not None:
            prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    fd_text = os.environ.pop(PARENT_FD_ENV, "")
    if not (fd_text.isascii() and fd_text.isdigit()):
        return
    if grace_s is None:
        grace_text = os.environ.get(ORPHAN_GRACE_ENV, "")
        try:
            grace_s = min(max(float(grace_text), 0.0), 3600.0) if grace_text else ORPHAN_GRACE_S
        except ValueError:
            grace_s = ORPHAN_GRACE_S
    watcher = threading.Thread(target=_watch_parent, args=(int(fd_text), on_gone, result_file, grace_s),
                               name="gputopo-parent-watch", daemon=True)
    watcher.start()


def _watch_parent(fd: int, on_gone: Callable[[], None], result_file: str | None, grace_s: float) -> None:
    while True:
        try:
            if not os.read(fd, 1):
                break  # EOF: every write end is closed, the parent is gone
        except InterruptedError:
            continue
        except OSError:
            return
    on_gone()
    deadline_s = time.monotonic() + grace_s
    while time.monotonic() < deadline_s:
        time.sleep(min(POLL_S, grace_s))
    orphan_cleanup(result_file)
    os._exit(INTERRUPTED_EXIT_CODE)


def parent_gone() -> bool:
    """Whether this process was orphaned (its parent died: it was adopted)."""
    return os.getppid() == 1


def orphan_cleanup(result_file: str | None) -> None:
    """What a child of a dead parent leaves no more: its result file, start-up marker and native log, its own
    temporary folder (its ``TMPDIR``, where that is the one the parent made for it in the same
    folder), and the parent's temporary folder once it is empty (the last child removes it)."""
    if not result_file:
        return
    folder = Path(result_file).parent
    paths = [Path(result_file), started_marker(result_file)]
    native_log = os.environ.get(LOG_ENV)  # the TensorFlow log this child opened, beside its result
    if native_log and Path(native_log).parent == folder:
        paths.append(Path(native_log))
    for path in paths:
        try:
            os.unlink(path)
        except OSError:
            pass
    own_temp = Path(os.environ.get("TMPDIR") or "/")
    if folder.name.startswith(TEMP_PREFIX) and own_temp.parent == folder and own_temp.name.startswith(CHILD_TEMP_PREFIX):
        shutil.rmtree(own_temp, ignore_errors=True)  # links in it are removed, never followed
    if folder.name.startswith(TEMP_PREFIX):
        try:
            os.unlink(folder / RUN_LOCK)  # its parent, who held it, is gone
        except OSError:
            pass
        try:
            os.rmdir(folder)
        except OSError:
            pass


def hold_run_folder(folder: str) -> int:
    """Make the run folder's lock (``RUN_LOCK``, new, never through a link) and hold it for the run's
    life: the descriptor to close when the run ends (the kernel closes it if the parent dies)."""
    fd = os.open(os.path.join(folder, RUN_LOCK), os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except OSError:
        os.close(fd)
        raise
    return fd


def _lock_held(folder: str) -> bool | None:
    """Whether some process holds ``folder``'s run lock (None: the folder has no lock file). A lock
    is seen across PID namespaces, where the folder's pid says nothing."""
    try:
        dir_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return True  # not a folder we can look into: leave it
    try:
        fd = os.open(RUN_LOCK, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError:
        return True
    finally:
        os.close(dir_fd)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)  # releases the probe's lock, if it took one
    return False


def sweep_stale_folders(tmp_root: str | None = None) -> None:
    """Remove this user's ``gputopo-train-<pid>-*`` folders whose run is gone (a parent and its
    children killed with SIGKILL leave theirs): real folders only, never through a link.

    A run is alive while its pid is (in this PID namespace) or while its folder's lock is held (in
    any: containers that share /tmp see each other's folders, not each other's pids); a folder with
    no lock (being made, or an older gputopo's) is kept while younger than ``STALE_UNLOCKED_S``."""
    root = Path(tmp_root or tempfile.gettempdir())
    try:
        entries = list(os.scandir(root))
    except OSError:
        return
    for entry in entries:
        match = re.fullmatch(re.escape(TEMP_PREFIX) + r"(\d{1,10})-\w+", entry.name)
        if not match:
            continue
        try:
            st = entry.stat(follow_symlinks=False)
            os.kill(int(match.group(1)), 0)
            continue  # its run is alive
        except ProcessLookupError:
            pass
        except (OSError, OverflowError):
            continue  # alive but not ours, or unreadable
        if not (stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid()):
            continue
        held = _lock_held(entry.path)
        if held or (held is None and time.time() - st.st_mtime < STALE_UNLOCKED_S):
            continue
        shutil.rmtree(entry.path, ignore_errors=True)
