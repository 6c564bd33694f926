"""Reading the files users give us and writing the files they ask for, safely.

Writes (``atomic_write_text``, used by every ``--save``/``-o``): a temporary file in the target's
folder, then an atomic rename, so readers see the old file or the complete new one. Only regular
files are written: a device node (``/dev/null``), a FIFO or a folder is refused, never replaced. A
symbolic link is written *through*: the file it points at is replaced and the link stays (except
where the kernel's ``fs.protected_symlinks`` would not follow it: a link in a sticky world-writable
folder owned by neither the folder's owner nor the writer is refused, whether it is the file's own
name or a folder on its path; ``protected_link``); nor is another user's file there replaced (``fs.protected_regular``). An
existing file keeps its permission bits (and, where allowed, its owner); a new one gets what
``open()`` would give it (0666 less the umask). A failed write (disk full, no permission) is one
``OutputError`` and leaves the old file as it was and no temporary file behind.

Files in folders others may write (a checkpoint folder): ``open_regular`` / ``read_regular`` open
without following links or blocking on FIFOs, refuse anything but a regular file, and bound reads.

Reads (``read_text_input``): files or ``-`` (standard input), read in chunks up to
``MAX_INPUT_BYTES`` (an endless input such as ``/dev/zero`` stops at once or at the bound);
UTF-8 with or without a byte-order mark, UTF-16 with one (what PowerShell's ``>`` writes), and
Latin-1 as a last resort; anything else with NUL bytes is refused as binary.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import BinaryIO, Iterable

from gputopo.errors import InputError, OutputError

# Inputs are topology text, snapshots and TensorFlow logs: a few MiB at most in real use.
MAX_INPUT_BYTES = 64 * 1024 * 1024
_READ_CHUNK_BYTES = 1024 * 1024

_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")


# --- writing -------------------------------------------------------------------------------------


def _kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


MAX_LINK_HOPS = 40  # the kernel's limit on links followed in one path (ELOOP past it)


def protected_link(path: str | os.PathLike[str]) -> str | None:
    """Why the kernel's ``fs.protected_symlinks`` rule would not follow ``path`` (None: it would).

    The path is walked as the kernel walks it, component by component, each symbolic link met on the
    way followed (a folder of the path, the last name, or a link inside a link's target): a link in
    a sticky world-writable folder (``/tmp``) is followed only when its owner is the folder's owner
    or the follower (the effective user). Root is held to it too: the shell's ``>`` is refused
    there (where the sysctl is on), while a rename onto the link's target, or a file created in the
    folder it leads to, would not be. The walk stops at the first name that is not there."""
    return _walk(path)[0]


def _walk(path: str | os.PathLike[str]) -> tuple[str | None, Path | None]:
    """``protected_link``'s walk: why a link on the way would not be followed (None: all would be),
    and where the path leads as walked (absolute, every link followed, what is not there yet
    appended as named; None when the current folder is gone). A write goes to that place and no
    other: it is resolved once, here, by the same walk that checked the links on the way."""
    text = os.fspath(path)
    pending = list(reversed(Path(text).parts))
    try:
        current = Path("/") if text.startswith("/") else Path(os.getcwd())
    except OSError:  # the current folder was removed: the write fails on its own
        return None, None
    hops = 0
    while pending:
        name = pending.pop()
        if name.startswith("/"):  # an absolute part: the root (of the path or of a link's target)
            current = Path("/")
            continue
        if name in ("", "."):
            continue
        if name == "..":
            current = current.parent  # physical: ``current`` never holds a link
            continue
        step = current / name
        try:
            link_st = os.lstat(step)
        except OSError:
            return None, current.joinpath(name, *reversed(pending))  # not there (yet): nothing further is followed
        if not stat.S_ISLNK(link_st.st_mode):
            current = step
            continue
        hops += 1
        try:
            folder_st = os.stat(current)
            target = os.readlink(step)
        except OSError:
            return None, current.joinpath(name, *reversed(pending))
        sticky_public = folder_st.st_mode & stat.S_ISVTX and folder_st.st_mode & stat.S_IWOTH
        if sticky_public and link_st.st_uid not in (folder_st.st_uid, os.geteuid()):
            return (f"{step} is a symbolic link in the sticky world-writable folder {current}, owned by uid "
                    f"{link_st.st_uid} (neither the folder's owner nor you): not followed (as fs.protected_symlinks)"), None
        if hops > MAX_LINK_HOPS:  # a loop, or a chain the kernel refuses (ELOOP); realpath would follow it
            return f"more than {MAX_LINK_HOPS} symbolic links on the way to {text} (a loop?): not followed, as the kernel", None
        pending.extend(reversed(Path(target).parts))
    return None, current


def write_target(path: str | os.PathLike[str]) -> Path:
    """The regular file a write to ``path`` replaces: symbolic links followed; an empty name, or
    anything that is not a regular file (or not there yet), refused with one ``InputError``; an
    existing file this user may not write, with one ``OutputError`` (as the shell's ``>`` would).
    Commands that work for long before they save (``bench-p2p --save``) call it first, to refuse a
    bad target at once."""
    return _checked_target(path)[0]


def _checked_target(path: str | os.PathLike[str]) -> tuple[Path, Path | None]:
    """``write_target``'s checks; also where the link check's walk resolved the path (``_walk``)."""
    if not os.fspath(path):
        raise InputError("the output file name is empty")
    text = os.fspath(path)
    if text.endswith(("/", "/.", "/..")) or text in (".", ".."):  # Path() would drop the slash: "out/" -> file "out"
        what = "it is a folder" if os.path.isdir(text) else "the name names a folder"
        raise InputError(f"cannot write {text}: {what}; give a file name")
    path = Path(path)
    shown = str(path)
    refused, walked = _walk(path)
    if refused is not None:
        raise OutputError(f"cannot write {shown}: {refused}")
    try:
        is_link = path.is_symlink()
    except OSError as exc:  # EACCES (/proc/1/root/... in a container), ENAMETOOLONG: one line, as the shell's >
        raise OutputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    target = Path(os.path.realpath(path)) if is_link else path
    if target.is_symlink():  # realpath stops at a loop
        raise InputError(f"cannot write {shown}: the symbolic link does not lead to a file (a loop)")
    if target != path:
        shown = f"{path} (a link to {target})"
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {shown}: folder {folder} does not exist")
    try:
        mode = os.stat(target).st_mode
    except FileNotFoundError:
        return target, walked
    except OSError as exc:
        raise OutputError(f"cannot write {shown}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise InputError(f"cannot write {shown}: it is a folder; give a file name")
    if not stat.S_ISREG(mode):
        raise InputError(f"cannot write {shown}: it is {_kind_of(mode)}, not a regular file")
    if not os.access(target, os.W_OK):  # the rename would replace a file its owner protected
        raise OutputError(f"cannot write {shown}: Permission denied")
    refused = _protected_regular(target, folder)
    if refused is not None:
        raise OutputError(f"cannot write {shown}: {refused}")
    return target, walked


def _protected_regular(target: Path, folder: Path) -> str | None:
    """Why the kernel's ``fs.protected_regular`` would not let this writer open the existing file
    ``target`` (None: it would): in a sticky world-writable folder (``/tmp``), a file owned by neither
    the folder's owner nor the writer, root included. Replaced, it would stay that user's (owner and
    mode are kept), who could then change what root wrote (a plan root trains with) or read it."""
    try:
        file_st, folder_st = os.stat(target), os.stat(folder)
    except OSError:
        return None
    sticky_public = folder_st.st_mode & stat.S_ISVTX and folder_st.st_mode & stat.S_IWOTH
    if sticky_public and file_st.st_uid not in (folder_st.st_uid, os.geteuid()):
        return (f"the file is owned by uid {file_st.st_uid} in the sticky world-writable folder {folder} "
                f"(neither the folder's owner nor you): not replaced (as fs.protected_regular); remove it or "
                f"give another name")
    return None


def _new_file_mode() -> int:
    """The permission bits ``open()`` gives a new file: 0666 less the process's umask."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """``atomic_write_bytes`` of ``text`` in UTF-8 (a lone surrogate, which no UTF-8 holds, written
    as ``?``: what is written reads back)."""
    return atomic_write_bytes(path, text.encode("utf-8", "replace"))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to the regular file ``path`` via a temporary file and an atomic rename.

    Readers see either the old file or the complete new one, never a partial write. Returns
    ``path`` as given. Raises ``InputError`` for a target that is not a regular file (nothing is
    touched) and ``OutputError`` when the write itself fails (the old file stays as it was).

    Checked once, then held: the target's folder is resolved by the walk that checks its links (``_walk``) and
    opened one name at a time without following links (``_open_folder``), and the temporary file,
    the rename and the clean-up all work relative to that open folder. A folder on the path swapped
    for a link after the check (to send root's write elsewhere) fails the write instead."""
    target, walked = _checked_target(path)
    given = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if walked is None:  # (the current folder is gone)
        raise OutputError(f"cannot write {given}: the current folder no longer exists")
    try:  # the place the check walked to, not the path resolved again (a link swapped in since would be followed)
        dir_fd = _open_folder(walked.parent)
    except OSError as exc:
        raise OutputError(f"cannot write {given}: folder {folder} changed or cannot be opened "
                          f"({exc.strerror or exc})") from None
    try:
        _write_in_folder(dir_fd, walked.name, data, given)
    finally:
        os.close(dir_fd)
    return given


def _open_folder(folder: Path) -> int:
    """A descriptor of the absolute, link-free ``folder``, opened from ``/`` one name at a time with
    ``O_NOFOLLOW``: a name that has become a link since it was resolved fails (ENOTDIR or ELOOP).
    ``O_PATH`` where there is one: holding a folder needs only the right to search it, as a write by
    path does (a 0711 home, a --x folder on the way), not the right to list it."""
    return open_folder_chain("/", folder.parts[1:], getattr(os, "O_PATH", os.O_RDONLY))


def open_folder_chain(start: str, names: Iterable[str], mode: int = os.O_RDONLY) -> int:
    """A descriptor of the folder ``names`` below ``start``, opened one name at a time with
    ``O_NOFOLLOW`` (``mode``: ``O_RDONLY`` to list it, ``O_PATH`` to hold it): a name that is, or has
    become, a link fails (ELOOP or ENOTDIR) instead of being followed."""
    flags = mode | os.O_DIRECTORY | os.O_CLOEXEC
    fd = os.open(start, flags)
    try:
        for name in names:
            next_fd = os.open(name, flags | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except BaseException:
        os.close(fd)
        raise
    return fd


def _create_temp(dir_fd: int, name: str) -> tuple[int, str]:
    """A new temporary file beside ``name`` in the open folder (never an existing one, never a link)."""
    import secrets  # here, not at the top: reading commands never need it

    for _ in range(100):
        tmp_name = f".{name}.{secrets.token_hex(6)}.tmp"
        try:
            fd = os.open(tmp_name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600,
                         dir_fd=dir_fd)
        except FileExistsError:
            continue
        return fd, tmp_name
    raise OSError(17, "no free temporary file name")


def _write_in_folder(dir_fd: int, name: str, data: bytes, given: Path) -> None:
    try:
        old = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        old = None
    if old is not None and not stat.S_ISREG(old.st_mode):  # swapped since it was checked
        raise OutputError(f"cannot write {given}: it changed to {_kind_of(old.st_mode)} while being written")
    try:
        fd, tmp_name = _create_temp(dir_fd, name)
    except OSError as exc:
        raise OutputError(f"cannot write {given}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), stat.S_IMODE(old.st_mode) if old else _new_file_mode())
            if old is not None and (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
                try:  # root replacing someone else's file keeps it theirs; others cannot, and need not
                    os.fchown(handle.fileno(), old.st_uid, old.st_gid)
                except OSError:
                    pass
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException as exc:
        try:
            os.unlink(tmp_name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {given}: {exc.strerror or exc}") from None
        raise


# --- files in folders others may write (checkpoint folders) -------------------------------------


def open_regular(path: str | os.PathLike[str], flags: int, what: str, mode: int = 0o644,
                 dir_fd: int | None = None, shown: str | os.PathLike[str] | None = None) -> int:
    """A descriptor of the regular file ``path``, opened without following a symbolic link and
    without blocking on a FIFO; a link, FIFO, device, socket or folder there (or a file with other
    hard links, which a truncate would reach too) is one ``InputError`` and nothing is touched.
    With ``dir_fd``, ``path`` is a name in that open folder (``shown``: the path the user gave)."""
    shown = path if shown is None else shown
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0), mode,
                     dir_fd=dir_fd)
    except OSError as exc:
        try:
            is_link = stat.S_ISLNK(os.lstat(path, dir_fd=dir_fd).st_mode)
        except OSError:
            is_link = False
        if is_link:
            raise InputError(f"{what} {shown} is a symbolic link: refused (it is never followed)") from None
        raise InputError(f"cannot open {what} {shown}: {exc.strerror or exc}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            kind = "a folder" if stat.S_ISDIR(st.st_mode) else _kind_of(st.st_mode)
            raise InputError(f"{what} {shown} is {kind}, not a regular file: refused")
        if st.st_nlink > 1:
            raise InputError(f"{what} {shown} has {st.st_nlink} hard links: refused (a write would reach the others)")
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path: str | os.PathLike[str], what: str, max_bytes: int) -> bytes | None:
    """The bytes of the regular file ``path`` (``open_regular``), at most ``max_bytes`` (more is an
    ``InputError``); None when there is no such file."""
    if not os.path.lexists(path):
        return None
    fd = open_regular(path, os.O_RDONLY, what)
    with os.fdopen(fd, "rb") as stream:
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{what} {path} is larger than {max_bytes} bytes: refused")
    return data


# --- reading -------------------------------------------------------------------------------------


def _read_bounded(stream: BinaryIO, label: str, what: str, max_bytes: int) -> bytes | bytearray:
    """At most ``max_bytes`` from ``stream``, in chunks; more is an ``InputError``, and so is a
    first chunk with NUL bytes that is not UTF-16 (``/dev/zero`` stops after one chunk). A regular
    file within the bound is read in one go into one buffer (a 34 MB snapshot: no chunks to join)."""
    chunks: list[bytes] = []
    total = 0
    whole = _read_regular(stream, max_bytes)
    if whole is not None:
        if b"\x00" in whole[:_READ_CHUNK_BYTES] and not whole.startswith(_UTF16_BOMS):
            raise InputError(f"{what} {label} is binary, not text")
        more = stream.read(1)
        if not more:
            return whole
        chunks, total = [bytes(whole), more], len(whole) + 1  # it grew since: read on, bounded, below
        if total > max_bytes:
            raise InputError(f"{what} {label} is larger than the {max_bytes // (1024 * 1024)} MiB limit for inputs")
    while True:
        chunk = stream.read(min(_READ_CHUNK_BYTES, max_bytes + 1 - total))
        if not chunk:
            break
        if not chunks and b"\x00" in chunk and not chunk.startswith(_UTF16_BOMS):
            raise InputError(f"{what} {label} is binary, not text")
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise InputError(f"{what} {label} is larger than the {max_bytes // (1024 * 1024)} MiB limit for inputs")
    return b"".join(chunks)


def _read_regular(stream: BinaryIO, max_bytes: int) -> bytearray | None:
    """A regular file of at most ``max_bytes`` read at once, up to the size it has now; None for
    anything else (a pipe, a terminal, a file over the bound: read in bounded chunks)."""
    try:
        info = os.fstat(stream.fileno())
    except (OSError, AttributeError, ValueError):  # (a stream without a file: a test's)
        return None
    if not stat.S_ISREG(info.st_mode) or info.st_size > max_bytes or info.st_size < _READ_CHUNK_BYTES:
        return None
    buffer = bytearray(info.st_size)
    count = stream.readinto(buffer)  # type: ignore[attr-defined]
    del buffer[count or 0 :]  # (a file cut since: what it holds now)
    return buffer


def read_stdin_bytes(what: str, max_bytes: int) -> bytes:
    """Standard input's bytes, text or not (an archive piped in), at most ``max_bytes``: more is
    one ``InputError``."""
    data = sys.stdin.buffer.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise InputError(f"{what} standard input is larger than the {max_bytes // (1024 * 1024)} MiB limit for inputs")
    return data


def decode_text(data: bytes | bytearray, label: str, what: str) -> str:
    """Text from bytes (``InputError`` for binary): a UTF-8 or UTF-16 byte-order mark decides; else UTF-8, else Latin-1."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM) :]
    elif data.startswith(_UTF16_BOMS):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise InputError(f"{what} {label} starts like UTF-16 but is not valid UTF-16") from None
        if "\x00" in text:
            raise InputError(f"{what} {label} is binary, not text")
        return text
    if b"\x00" in data:
        raise InputError(f"{what} {label} is binary, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")


def read_text_input(path: str | os.PathLike[str], what: str = "file", max_bytes: int | None = None) -> str:
    """Read a user-supplied text file ('-' is standard input) of at most ``max_bytes`` (default
    ``MAX_INPUT_BYTES``); refuse binary, unreadable or oversized input with one ``InputError``.

    Pipes and other non-regular files (``<(nvidia-smi topo -m)``) are read like files: the bound,
    not the kind, stops an endless one."""
    max_bytes = MAX_INPUT_BYTES if max_bytes is None else max_bytes
    if str(path) == "-":
        return decode_text(_read_bounded(sys.stdin.buffer, "standard input", what, max_bytes), "standard input", what)
    p = Path(path)
    label = str(p)
    try:
        if not p.exists():
            raise InputError(f"{what} {label} does not exist")
        if p.is_dir():
            raise InputError(f"{what} {label} is a folder, not a file")
        with open(p, "rb") as stream:
            data = _read_bounded(stream, label, what, max_bytes)
    except OSError as exc:
        raise InputError(f"cannot read {what} {label}: {exc.strerror or exc}") from None
    return decode_text(data, label, what)
