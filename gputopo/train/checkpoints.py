"""Checkpoints: what a folder holds, whether a run may write there, what to tell the user, and the
``tf.train.CheckpointManager`` a training child saves and restores with.

Checkpoints are numbered by step (``ckpt-<step>.index`` + ``ckpt-<step>.data-*``) and written by
``tf.train.CheckpointManager``: TF writes the data files first and rewrites its ``checkpoint``
state file (atomically) only after. The parent reads the folder without TensorFlow
(``saved_checkpoints``); the child's helpers take the ``tf`` module as an argument.

What a folder holds is decided from the files themselves, not only from TF's state file: any
``ckpt-*`` file means "already holds a checkpoint" (a run without ``--resume`` never overwrites
it), a damaged state file is said so (and set aside by ``--resume``), and ``--resume`` falls back
from a damaged newest checkpoint to the previous whole one. Only local (or mounted) folders are
taken: a URL such as ``gs://bucket/x`` is refused, since the folder is locked and inspected here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from gputopo.errors import InputError
from gputopo.fileio import open_regular, protected_link, read_regular
from gputopo.notation import ascii_int
from gputopo.train.config import TrainConfig, is_chief

MAX_TO_KEEP = 3
CHECKPOINT_NAME = "ckpt"
STATE_FILE = "checkpoint"
_FILE_RE = re.compile(r"^ckpt-(\d+)\.(index|data-\d+-of-\d+)$")
_URL_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_TEMP_RE = re.compile(r"^ckpt-\d+_temp")  # TF's folder for a save in progress (left by a crash)
_WORKER_COPY_RE = re.compile(r"^\.worker-\d+-tmp$")  # a non-chief worker's throw-away copy
MARKER_FILE = ".gputopo-checkpoints"  # written by the chief with its first save: "gputopo wrote these"
MARKER_SCHEMA = "gputopo.checkpoints/1"
MAX_STATE_BYTES = 1024 * 1024  # TF's state file lists a few names: a bigger one is not TF's
_STATE_LINE_RE = re.compile(r'^\s*[a-z_]+\s*:\s*("(?:[^"\\]|\\.)*"|[-+0-9.eE]+)\s*$')


def check_local_folder(checkpoint_dir: str) -> None:
    """Refuse a URL (``gs://``, ``s3://``, ``hdfs://``) in one line: ``Path()`` would turn it into
    a local folder ``gs:/bucket/x``, and the folder could be neither locked nor inspected.

    Refuse too a folder reached through another user's link in a sticky world-writable folder
    (``/tmp/ck`` -> ``/root/.ssh``), the folder itself or any folder above it, as the kernel's
    ``fs.protected_symlinks`` would (``fileio.protected_link``): the run would write, rotate and
    delete checkpoint files wherever that user points it."""
    match = _URL_RE.match(checkpoint_dir)
    if match:
        raise InputError(
            f"--checkpoint-dir {checkpoint_dir}: {match.group(1)}:// URLs are not supported; give a local folder "
            "(a bucket mounted as a folder, e.g. with gcsfuse or s3fs, works)"
        )
    refused = protected_link(checkpoint_dir) or _controlled_by_others(checkpoint_dir)
    if refused is not None:
        raise InputError(f"--checkpoint-dir {checkpoint_dir}: {refused}; nothing there was opened or changed")


def _controlled_by_others(checkpoint_dir: str) -> str | None:
    """Why another user could redirect this run's saves (None: nobody could): the folder, or one
    above it, writable by anyone without the sticky bit, or (for a run as root) owned by a user other
    than root. That user can put a link in at any moment after the checks (``ckpt-N_temp`` -> /etc)
    and TensorFlow's save follows it: the run would write, rotate and delete where it leads, as root.
    (A folder a colleague shares with a user's own run stays allowed: the group is trusted there.)"""
    me = os.geteuid()
    folder = Path(os.path.realpath(checkpoint_dir))  # (links on the way: checked by protected_link)
    for place in [folder, *folder.parents]:
        try:
            st = os.stat(place)
        except OSError:
            continue  # not there yet: made by this run
        if me == 0 and st.st_uid != 0:
            return (f"{place} is owned by uid {st.st_uid} (neither you nor root), who could put a link there "
                    f"that the saves would follow as root; give a folder of root's own")
        if st.st_mode & stat.S_IWOTH and not st.st_mode & stat.S_ISVTX:
            return (f"anyone may write {place} (mode {stat.S_IMODE(st.st_mode):o}, not sticky) and put a link there "
                    f"that the saves would follow; give a folder of your own")
    return None


@dataclass
class SavedCheckpoints:
    """What a checkpoint folder holds, read from its files (no TensorFlow)."""

    folder: Path
    steps: list[int] = field(default_factory=list)  # ckpt-<step> with an index file, oldest first
    other_files: list[str] = field(default_factory=list)  # ckpt-* files that are no whole checkpoint's
    state_step: int | None = None  # the step TF's state file names as the latest
    state_problem: str | None = None  # why the state file cannot be read, if it cannot
    unsafe: list[str] = field(default_factory=list)  # "ckpt-3.index (a symbolic link)": refused, never opened
    marker: dict[str, Any] | None = None  # gputopo's own record (MARKER_FILE), None: not written by gputopo
    marker_problem: str | None = None  # why a record that is there cannot be read (damaged, not gputopo's)

    @property
    def holds_any(self) -> bool:
        """Any ``ckpt-*`` file, or a state file that names a checkpoint."""
        return bool(self.steps or self.other_files or self.state_step is not None)

    @property
    def latest_step(self) -> int | None:
        if self.state_step is not None:
            return self.state_step
        return self.steps[-1] if self.steps else None

    def restore_order(self) -> list[int]:
        """Steps to try with ``--resume``, newest first: the state file's choice, then the rest."""
        order = sorted(self.steps, reverse=True)
        if self.state_step in order:
            order.remove(self.state_step)  # type: ignore[arg-type]
            order.insert(0, self.state_step)  # type: ignore[arg-type]
        return order

    def describe(self) -> str:
        """``step 40`` or ``ckpt-* files``: what the folder holds, for messages."""
        step = self.latest_step
        return f"step {step}" if step is not None else f"{len(self.other_files)} ckpt-* file(s)"


def _read_state(path: Path) -> tuple[int | None, str | None]:
    """``(step, problem)`` from TF's ``checkpoint`` state file (a text protobuf), read without
    following a link, without blocking on a FIFO and at most ``MAX_STATE_BYTES``."""
    try:
        data = read_regular(path, f"TensorFlow's {STATE_FILE} state file", MAX_STATE_BYTES)
    except InputError as exc:
        return None, f"cannot be used ({exc})"
    if data is None:
        return None, None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None, "is damaged (not UTF-8 text)"
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or any(not _STATE_LINE_RE.match(line) for line in lines):
        return None, "is damaged (not the text TensorFlow writes)"
    for line in lines:
        if line.strip().startswith("model_checkpoint_path"):
            name = line.split(":", 1)[1].strip().strip('"')
            _, _, number = Path(name).name.rpartition("-")
            step = ascii_int(number, 18)
            if step is not None:
                return step, None
    return None, "names no checkpoint"


def saved_checkpoints(checkpoint_dir: str | os.PathLike[str]) -> SavedCheckpoints:
    """Every ``ckpt-*`` file of the folder and what its state file says."""
    folder = Path(checkpoint_dir)
    saved = SavedCheckpoints(folder)
    try:
        names = sorted(entry.name for entry in os.scandir(folder))
    except OSError:
        return saved
    with_index = set()
    for name in names:
        match = _FILE_RE.match(name)
        if match and match.group(2) == "index":
            with_index.add(int(match.group(1)))
    saved.steps = sorted(with_index)
    for name in names:
        match = _FILE_RE.match(name)
        if name.startswith(CHECKPOINT_NAME + "-") and not (match and int(match.group(1)) in with_index):
            saved.other_files.append(name)
    saved.unsafe = _unsafe_entries(folder, names)
    if not any(entry.startswith(STATE_FILE + " ") for entry in saved.unsafe):
        saved.state_step, saved.state_problem = _read_state(folder / STATE_FILE)
    saved.marker = _read_marker(folder)
    marker_path = folder / MARKER_FILE
    if saved.marker is None and (marker_path.is_symlink() or marker_path.exists()):
        saved.marker_problem = f"its {MARKER_FILE} record is there but damaged or not gputopo's (not a JSON object of schema {MARKER_SCHEMA})"
    return saved


def _unsafe_entries(folder: Path, names: list[str]) -> list[str]:
    """The checkpoint files (``ckpt-*``, the state file, gputopo's own) that are not regular files,
    or folders where TF keeps a save in progress: links, FIFOs, devices are never opened."""
    unsafe = []
    for name in names:
        if not (name.startswith(CHECKPOINT_NAME + "-") or name in (STATE_FILE, MARKER_FILE)):
            continue
        try:
            mode = os.lstat(folder / name).st_mode
        except OSError:
            continue
        ok = stat.S_ISDIR(mode) if _TEMP_RE.match(name) else stat.S_ISREG(mode)
        if not ok:
            kind = "a symbolic link" if stat.S_ISLNK(mode) else ("a folder" if stat.S_ISDIR(mode) else "not a regular file")
            unsafe.append(f"{name} ({kind})")
    return unsafe


def _read_marker(folder: Path) -> dict[str, Any] | None:
    try:
        data = read_regular(folder / MARKER_FILE, "gputopo's checkpoint record", 64 * 1024)
        marker = json.loads(data.decode("utf-8")) if data is not None else None
    except (InputError, ValueError, RecursionError):
        return None
    return marker if isinstance(marker, dict) and marker.get("schema") == MARKER_SCHEMA else None


def write_marker(config: TrainConfig) -> None:
    """The chief's record that gputopo writes this folder's checkpoints (and for which model), made
    before its first save; ``--resume`` refuses a folder without it (another program's checkpoints
    would be "resumed" from nothing and rotated away)."""
    if not (config.checkpoint_dir and is_chief(config)):
        return
    path = Path(config.checkpoint_dir) / MARKER_FILE
    if os.path.lexists(path):
        return
    try:  # a child run by hand (its printed command) makes the folder itself, as TF's first save would
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot write checkpoints to {config.checkpoint_dir}: {exc.strerror or exc}") from None
    record = {"schema": MARKER_SCHEMA, "model": config.model, "image_size": config.image_size}
    fd = open_regular(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, "gputopo's checkpoint record")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


def remove_no_follow(path: str | os.PathLike[str]) -> None:
    """Remove ``path``, a folder this run wrote: a symbolic link there is removed itself, never what
    it leads to (``shutil.rmtree`` does not follow links inside, unlike ``tf.io.gfile.rmtree``)."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        os.unlink(path)


def remove_leftovers(checkpoint_dir: str | os.PathLike[str] | None) -> None:
    """The temporary folders runs leave in a checkpoint folder gputopo writes: TF's ``ckpt-N_temp``
    of an interrupted save and the workers' ``.worker-N-tmp`` copies (links removed, not followed)."""
    if checkpoint_dir is None or _read_marker(Path(checkpoint_dir)) is None:
        return
    try:
        names = [entry.name for entry in os.scandir(checkpoint_dir)]
    except OSError:
        return
    for name in names:
        if _TEMP_RE.match(name) or _WORKER_COPY_RE.match(name):
            remove_no_follow(Path(checkpoint_dir) / name)


def latest_checkpoint_step(checkpoint_dir: str | os.PathLike[str] | None) -> int | None:
    """The step of the newest checkpoint: the one TF's state file names, else the newest
    ``ckpt-<step>.index`` in the folder. No TF needed."""
    if checkpoint_dir is None:
        return None
    return saved_checkpoints(checkpoint_dir).latest_step


def check_checkpoint_dir_writable(checkpoint_dir: str) -> None:
    """Create ``--checkpoint-dir`` and write a test file there, before any training starts.

    Otherwise a folder that cannot be written only shows at the first checkpoint, after the first
    ``--checkpoint-every`` steps of training.
    """
    check_local_folder(checkpoint_dir)
    try:
        Path(checkpoint_dir).mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=checkpoint_dir, prefix=".gputopo-write-test-"):
            pass
    except OSError as exc:
        raise InputError(f"cannot write checkpoints to {checkpoint_dir}: {exc.strerror or exc}") from None


def resume_hint(checkpoint_dir: str | os.PathLike[str] | None) -> str:
    """Where the last checkpoint is and how to continue from it, for failure messages."""
    step = latest_checkpoint_step(checkpoint_dir)
    if step is None:
        return "no checkpoint was saved"
    return f"the last checkpoint is at step {step} in {checkpoint_dir}; rerun with --resume to continue"


def _already_holds(checkpoint_dir: str, saved: SavedCheckpoints) -> InputError:
    if not saved.steps and not saved.other_files:  # only TF's state file, naming files that are gone
        return InputError(
            f"{checkpoint_dir} holds TensorFlow's {STATE_FILE} state file naming step {saved.state_step}, but its "
            f"ckpt-{saved.state_step} files are missing (so --resume has nothing to restore); remove the state file "
            "or give another --checkpoint-dir to start afresh"
        )
    return InputError(
        f"{checkpoint_dir} already holds a checkpoint ({saved.describe()}); add --resume to continue "
        "from it, or give another --checkpoint-dir to start afresh"
    )


def _nothing_to_resume(checkpoint_dir: str, saved: SavedCheckpoints) -> InputError:
    if saved.other_files:
        detail = f" (only parts of checkpoints: {', '.join(saved.other_files[:3])})"
    elif saved.state_problem:
        detail = f" (its {STATE_FILE} state file {saved.state_problem}, and no ckpt-* files are there)"
    elif saved.state_step is not None:
        detail = f" (its {STATE_FILE} state file names step {saved.state_step}, but no ckpt-{saved.state_step} files are there)"
    else:
        detail = ""
    return InputError(f"--resume: no checkpoint in {checkpoint_dir} to resume from{detail}")


def check_checkpoint_choice(config: TrainConfig, *, scaling: bool, dry_run: bool) -> None:
    """Decided in the parent, before any process starts, so that nothing is overwritten: ``--resume``
    needs a whole checkpoint, and any ``ckpt-*`` already there needs ``--resume`` (or another folder)."""
    if config.resume and config.checkpoint_dir is None:
        raise InputError("--resume needs a --checkpoint-dir (not --no-checkpoint)")
    if config.checkpoint_dir is None:
        return
    check_local_folder(config.checkpoint_dir)
    try:
        os.stat(config.checkpoint_dir)
    except (FileNotFoundError, NotADirectoryError):
        pass  # made by the run, or refused below with what stands in the way
    except OSError as exc:  # EACCES (/proc/1/root/...), ENAMETOOLONG, ELOOP: one line, not a traceback
        raise InputError(f"--checkpoint-dir cannot be looked at ({exc.strerror or exc}): {config.checkpoint_dir}") from None
    if Path(config.checkpoint_dir).exists() and not Path(config.checkpoint_dir).is_dir():
        raise InputError(f"--checkpoint-dir {config.checkpoint_dir} is a file, not a folder")
    saved = saved_checkpoints(config.checkpoint_dir)
    if saved.unsafe:
        raise InputError(
            f"checkpoint folder {config.checkpoint_dir} holds {saved.unsafe[0]}: checkpoint files must be regular "
            "files (nothing there was opened or changed); remove it or give another --checkpoint-dir"
        )
    if config.resume and not saved.steps:
        raise _nothing_to_resume(config.checkpoint_dir, saved)
    if config.resume:
        check_written_by_gputopo(config, saved)
    if not config.resume and saved.holds_any and not scaling and not dry_run:
        raise _already_holds(config.checkpoint_dir, saved)


def check_written_by_gputopo(config: TrainConfig, saved: SavedCheckpoints) -> None:
    """``--resume`` only from checkpoints gputopo wrote, for the same model: another program's
    ``ckpt-N`` would restore nothing, and the rotation of the new run's saves would delete them."""
    if saved.marker is None:
        why = saved.marker_problem or f"no {MARKER_FILE} record there"
        raise InputError(
            f"--resume: the checkpoints in {config.checkpoint_dir} were not written by gputopo train ({why}); "
            "nothing was changed. Give another --checkpoint-dir"
        )
    if saved.marker.get("model") != config.model:
        raise InputError(
            f"--resume: the checkpoints in {config.checkpoint_dir} are of --model {str(saved.marker.get('model'))[:40]}, "
            f"not {config.model}; nothing was changed"
        )


def checkpoint_dir_for(config: TrainConfig) -> Path | None:
    """The chief writes the real checkpoints; other workers write a throw-away copy (all must save)."""
    if config.checkpoint_dir is None:
        return None
    base = Path(config.checkpoint_dir)
    if is_chief(config):
        return base
    copy = base / f".worker-{config.task_index}-tmp"
    if os.path.lexists(copy) and (os.path.islink(copy) or not os.path.isdir(copy)):
        raise InputError(f"{copy} is not a folder gputopo made (a link or a file): refused, nothing deleted")
    return copy


def set_aside_damaged_state(config: TrainConfig, note: Callable[[str], None]) -> None:
    """The chief moves a damaged state file aside: TF cannot even open the folder with it. With
    ``--resume`` the checkpoints are then found from their files; a run without it gets here only
    when the folder holds no ``ckpt-*`` file (``check_checkpoint_choice``)."""
    if not (config.checkpoint_dir and is_chief(config)):
        return
    saved = saved_checkpoints(config.checkpoint_dir)
    if saved.state_problem and (Path(config.checkpoint_dir) / STATE_FILE).exists():
        state = Path(config.checkpoint_dir) / STATE_FILE
        aside = state.with_name(f"{STATE_FILE}.damaged-{time.strftime('%Y%m%d-%H%M%S')}")
        os.replace(state, aside)
        note(f"the {STATE_FILE} state file in {config.checkpoint_dir} {saved.state_problem}; moved it to {aside.name}")


def checkpoint_manager(tf: Any, config: TrainConfig, checkpoint: Any) -> Any:
    """The child's ``tf.train.CheckpointManager`` (None without ``--checkpoint-dir``)."""
    directory = checkpoint_dir_for(config)
    if directory is None:
        return None
    return tf.train.CheckpointManager(
        checkpoint, str(directory), max_to_keep=MAX_TO_KEEP, checkpoint_name=CHECKPOINT_NAME
    )


def _first_line(exc: BaseException) -> str:
    text = (getattr(exc, "message", None) or str(exc)).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def restore_checkpoint(
    tf: Any, config: TrainConfig, checkpoint: Any, step_variable: Any, note: Callable[[str], None] = lambda _: None
) -> int:
    """Restore the newest whole checkpoint with ``--resume`` (a damaged newest one is skipped,
    saying so); refuse to overwrite one without it. Returns the restored step (0: none)."""
    if config.checkpoint_dir is None:
        if config.resume:
            raise InputError("--resume needs --checkpoint-dir (where the checkpoints are)")
        return 0
    saved = saved_checkpoints(config.checkpoint_dir)
    if not config.resume:
        if saved.holds_any:
            raise _already_holds(config.checkpoint_dir, saved)
        return 0
    damaged: list[str] = []
    for step in saved.restore_order():
        path = str(Path(config.checkpoint_dir) / f"{CHECKPOINT_NAME}-{step}")
        try:
            checkpoint.restore(path).expect_partial()
        except (ValueError, AssertionError) as exc:  # shapes or structure: another model
            raise InputError(
                f"cannot restore {path}: it was written for another model or data shape ({_first_line(exc)})"
            ) from None
        except Exception as exc:  # truncated or missing files: TF's OpErrors, IndexError, OSError...
            damaged.append(f"{Path(path).name} ({type(exc).__name__}: {_first_line(exc)[:120]})")
            continue
        if damaged:
            note(f"{'; '.join(damaged)} in {config.checkpoint_dir} is damaged; resumed from {Path(path).name} instead")
        return int(step_variable.numpy())
    if damaged:
        raise InputError(f"--resume: no whole checkpoint in {config.checkpoint_dir}: {'; '.join(damaged)} damaged")
    raise _nothing_to_resume(config.checkpoint_dir, saved)
