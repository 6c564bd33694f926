"""Reading a ``gputopo gather`` archive (or any tar of a host's ``sys/`` and ``proc/``) safely.

The archive is checked whole before anything is written: every member must be a regular file, a
folder or a symbolic link; no absolute path, no ``..``, no link whose target is absolute or leaves
the archive, nothing below a link, no name twice, no device node, FIFO, hard link or sparse file;
at most ``MAX_MEMBERS`` members, ``MAX_FILE_BYTES`` per file and ``MAX_TOTAL_BYTES`` in all (a tar
bomb is refused). One bad member refuses the archive, in one line (``InputError``), and nothing is
written. A good archive is unpacked into a private temporary folder (links last), read, and removed.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
import tarfile
import tempfile
from typing import Iterator

from gputopo.errors import InputError

# What ``gputopo gather`` writes first: a tar without it is not a gather archive (an unrelated tar
# would otherwise read as a host where every check passed, its files simply missing).
GATHER_MARK = "gputopo/gathered-by"

MAX_MEMBERS = 50_000
MAX_FILE_BYTES = 4 << 20
MAX_TOTAL_BYTES = 64 << 20


# The first bytes of a gzip, bzip2 or xz file: a compressed file that tarfile cannot open is a
# damaged archive (one line, exit 2), not text to read.
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


def is_archive(path: str) -> bool:
    """A tar file (plain, gzip, bzip2 or xz), or a compressed file that may be a damaged one, to be
    read (or refused) by ``unpacked``; False for anything else."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as head:
            if head.read(6).startswith(_COMPRESSED_MAGIC):
                return True
        # What tarfile.is_tarfile tries but the magic above: a plain tar, and (its xz opener takes
        # both formats) an lzma stream without the xz container; gzip and bzip2 need their magic.
        # Two tries, not is_tarfile's four (a 1000-host plan reads 1000 snapshots).
        return any(_opens(path, mode) for mode in ("r:", "r:xz"))
    except (OSError, EOFError, tarfile.TarError, ValueError):  # a cut gzip raises EOFError here
        return False


def _opens(path: str, mode: str) -> bool:
    try:
        tarfile.open(path, mode).close()
    except (tarfile.TarError, EOFError):
        return False
    return True


def _member_path(name: str) -> str | None:
    """The member's normalised relative path, or None where it is absolute or climbs out."""
    if not name or "\x00" in name or name.startswith("/") or "\\" in name:
        return None
    normal = posixpath.normpath(name)
    if normal == "." or normal.startswith("../") or normal == ".." or normal.startswith("/"):
        return None
    return normal


def _why_hostile(member: tarfile.TarInfo, path: str | None, links: set[str], seen: set[str]) -> str | None:
    if path is None:
        return "an absolute path or one with '..'"
    if path in seen:
        return "a name given twice"
    if any(path.startswith(link + "/") for link in links):
        return "a path below a link"
    if member.issym():
        target = member.linkname
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            return f"a link pointing out of the archive ({target!r})"
        return None
    if member.isdir():
        return None
    if not member.isreg() or member.issparse():
        return "a device node, FIFO, hard link or other special file"
    if member.size > MAX_FILE_BYTES:
        return f"a file of {member.size} bytes (at most {MAX_FILE_BYTES})"
    return None


def checked_members(archive: tarfile.TarFile, label: str) -> list[tuple[tarfile.TarInfo, str]]:
    """Every member with its safe path; ``InputError`` naming the first hostile one."""
    members: list[tuple[tarfile.TarInfo, str]] = []
    links: set[str] = set()
    seen: set[str] = set()
    total = 0
    for member in archive:
        if len(members) >= MAX_MEMBERS:
            raise InputError(f"{label}: refused: more than {MAX_MEMBERS} members (a tar bomb?)")
        path = _member_path(member.name)
        why = _why_hostile(member, path, links, seen)
        if why is not None:
            raise InputError(f"{label}: refused: member {member.name[:120]!r} is {why}; nothing was unpacked")
        assert path is not None
        total += member.size if member.isreg() else 0
        if total > MAX_TOTAL_BYTES:
            raise InputError(f"{label}: refused: more than {MAX_TOTAL_BYTES >> 20} MiB unpacked (a tar bomb?)")
        seen.add(path)
        if member.issym():
            links.add(path)
        members.append((member, path))
    for path in seen:  # a link given before a member below it
        if any(path.startswith(link + "/") for link in links):
            raise InputError(f"{label}: refused: member {path[:120]!r} is a path below a link; nothing was unpacked")
    return members


def _unpack(archive: tarfile.TarFile, members: list[tuple[tarfile.TarInfo, str]], target: str) -> None:
    for member, path in members:
        full = os.path.join(target, path)
        if member.isdir():
            os.makedirs(full, mode=0o700, exist_ok=True)
        elif member.isreg():
            os.makedirs(os.path.dirname(full), mode=0o700, exist_ok=True)
            source = archive.extractfile(member)
            data = source.read(MAX_FILE_BYTES + 1) if source is not None else b""
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data[:MAX_FILE_BYTES])
    for member, path in members:  # links last: nothing is ever written through one
        if member.issym():
            full = os.path.join(target, path)
            os.makedirs(os.path.dirname(full), mode=0o700, exist_ok=True)
            os.symlink(member.linkname, full)


def _one_line(exc: BaseException) -> str:
    """tarfile's reasons run over several lines (one per compression tried): one line, bounded."""
    return " ".join(str(exc).split())[:200]


@contextlib.contextmanager
def unpacked(path: str) -> Iterator[str]:
    """The archive at ``path`` unpacked into a private temporary folder (removed afterwards)."""
    label = os.path.basename(path)
    try:
        archive = tarfile.open(path, "r:*")
    except (OSError, tarfile.TarError, EOFError) as exc:
        raise InputError(f"{label}: cannot read the archive ({_one_line(exc)})") from None
    target = tempfile.mkdtemp(prefix="gputopo-gather-")
    try:
        with archive:
            try:
                members = checked_members(archive, label)
                _unpack(archive, members, target)
            except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
                raise InputError(f"{label}: cannot read the archive ({_one_line(exc)})") from None
        os.chmod(target, stat.S_IRWXU)
        if not os.path.isfile(os.path.join(target, GATHER_MARK)):
            raise InputError(f"{label} is not a `gputopo gather` archive (it holds no {GATHER_MARK}); make one on "
                             "the host with `gputopo gather -o box.tar.gz`, or give the folder it would hold")
        yield target
    finally:
        shutil.rmtree(target, ignore_errors=True)
