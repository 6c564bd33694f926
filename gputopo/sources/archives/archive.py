"""Reading a ``gputopo gather`` archive (or any tar of a host's ``sys/`` and ``proc/``) safely.

The archive is checked whole before anything is used: every member must be a regular file, a
folder or a symbolic link; no absolute path, no ``..``, no link whose target is absolute or leaves
the archive (resolved through the other links, not only as text), nothing below a link, no name
twice, no device node, FIFO, hard link or sparse file; names and link targets of at most
``MAX_NAME_BYTES``; at most ``MAX_MEMBERS`` members, ``MAX_FILE_BYTES`` per file and
``MAX_TOTAL_BYTES`` in all (a tar bomb is refused). The compressed stream is decompressed in bounded
chunks, at most ``MAX_STREAM_BYTES`` of it, and while the members are listed no header may make
tarfile read more than ``MAX_HEADER_BYTES`` at once (a GNU long name or pax header of gigabytes is
refused before it is read). One bad member refuses the archive, in one line (``InputError``).

A good archive is never unpacked to disk: its members are held in memory as a ``MemoryTree``
(``sources/host/tree.py``), whose paths resolve inside the archive only. So there is no temporary
folder to remove, on any exit, and no link of the archive's is ever followed by the kernel.
"""

from __future__ import annotations

import bz2
import gzip
import io
import lzma
import os
import posixpath
import tarfile

from gputopo.errors import InputError
from gputopo.sources.host.tree import MemoryTree

# What ``gputopo gather`` writes first: a tar without it is not a gather archive (an unrelated tar
# would otherwise read as a host where every check passed, its files simply missing).
GATHER_MARK = "gputopo/gathered-by"
# What gather could not record, a line each: ``topo-m: nvidia-smi topo -m timed out after 20 s``.
SMI_FAILURES = "gputopo/smi-failures"

MAX_MEMBERS = 50_000
MAX_FILE_BYTES = 4 << 20
MAX_TOTAL_BYTES = 64 << 20
MAX_NAME_BYTES = 4096  # PATH_MAX: no real member name or link target is longer
MAX_HEADER_BYTES = 16 << 10  # a pax or GNU long-name header's payload (gather's are a few hundred bytes)
MAX_STREAM_BYTES = MAX_TOTAL_BYTES + (32 << 20)  # the files, plus their headers and padding
MAX_LINK_WALK_NAMES = 1 << 20  # names followed to check every link (plus 64 a link): seconds, not hours
_CHUNK_BYTES = 1 << 20


# The first bytes of a gzip, bzip2 or xz file: a compressed file that tarfile cannot open is a
# damaged archive (one line, exit 2), not text to read.
_COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")


def is_archive(path: str) -> bool:
    """A tar file (plain, gzip, bzip2 or xz), or a compressed file that may be a damaged one, to be
    read (or refused) by ``opened_archive``; False for anything else. Only the first header block is
    looked at (never a header's payload: a plain tar whose first member has a gigabyte-long name is
    still cheap to recognise)."""
    try:
        if not os.path.isfile(path):
            return False
        with open(path, "rb") as head:
            start = head.read(_CHUNK_BYTES)
    except OSError:
        return False
    return is_archive_start(start)


def is_archive_start(start: bytes) -> bool:
    """``is_archive`` of what a file or standard input starts with (its first chunk)."""
    if start.startswith(_COMPRESSED_MAGIC):
        return True
    # What tarfile.is_tarfile tries but the magic above: a plain tar, and (its xz opener takes
    # both formats) an lzma stream without the xz container; gzip and bzip2 need their magic.
    if _is_tar_header(start[: tarfile.BLOCKSIZE]):
        return True
    try:
        return _is_tar_header(lzma.LZMADecompressor(lzma.FORMAT_AUTO).decompress(start, max_length=tarfile.BLOCKSIZE))
    except (lzma.LZMAError, EOFError, ValueError):
        return False


def _is_tar_header(block: bytes) -> bool:
    """Whether ``block`` is a tar header block tarfile would take (its checksum holds)."""
    if len(block) < tarfile.BLOCKSIZE:
        return False
    try:
        tarfile.TarInfo.frombuf(block, tarfile.ENCODING, "surrogateescape")
    except (tarfile.HeaderError, ValueError):
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


def _below_a_link(path: str, links: set[str]) -> bool:
    """Whether a folder on ``path`` is one of ``links`` (each prefix looked up: no scan of every link)."""
    cut = path.rfind("/")
    while cut > 0:
        if path[:cut] in links:
            return True
        cut = path.rfind("/", 0, cut)
    return False


def _why_hostile(member: tarfile.TarInfo, path: str | None, links: set[str], seen: set[str]) -> str | None:
    if len(member.name.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
        return f"a name of more than {MAX_NAME_BYTES} bytes"
    if path is None:
        return "an absolute path or one with '..'"
    if path in seen:
        return "a name given twice"
    if _below_a_link(path, links):
        return "a path below a link"
    if member.issym():
        target = member.linkname
        if len(target.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            return f"a link of more than {MAX_NAME_BYTES} bytes"
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
        if not target or target.startswith("/") or "\x00" in target or joined == ".." or joined.startswith("../"):
            return f"a link pointing out of the archive ({target[:120]!r})"
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
            raise InputError(f"{label}: refused: member {member.name[:120]!r} is {why}; nothing was read")
        assert path is not None
        total += member.size if member.isreg() else 0
        if total > MAX_TOTAL_BYTES:
            raise InputError(f"{label}: refused: more than {MAX_TOTAL_BYTES >> 20} MiB unpacked (a tar bomb?)")
        seen.add(path)
        if member.issym():
            links.add(path)
        members.append((member, path))
    for path in seen:  # a link given before a member below it
        if _below_a_link(path, links):
            raise InputError(f"{label}: refused: member {path[:120]!r} is a path below a link; nothing was read")
    return members


class _NoSparseTarInfo(tarfile.TarInfo):
    """Members as tarfile reads them, but a sparse one (GNU ``S`` or pax ``GNU.sparse``) refused as
    soon as its header is seen: tarfile would read its extension blocks first (180,000 of them from a
    321 KB archive: 380 MB), and a cut one ends in an IndexError deep in tarfile."""

    def _proc_sparse(self, tarfile_):  # type: ignore[override]
        raise tarfile.ReadError("a sparse member (never in a gather archive)")

    def _proc_gnusparse_00(self, *args):  # type: ignore[override]
        raise tarfile.ReadError("a sparse member (never in a gather archive)")

    _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00


class _HeaderBoundedStream(io.BytesIO):
    """The decompressed archive, for tarfile: while members are listed no single read may ask for
    more than ``limit`` bytes (tarfile reads a long-name or pax header's whole payload at once)."""

    limit = MAX_HEADER_BYTES

    def read(self, size: int | None = -1) -> bytes:  # type: ignore[override]
        if size is None or size < 0 or size > self.limit:
            raise tarfile.ReadError(f"a header of more than {self.limit} bytes (a tar bomb?)")
        return super().read(size)


def _decompressor(raw: io.BufferedReader, start: bytes):
    """The stream of the archive's tar bytes: decompressed by its magic, else plain, else bare lzma."""
    if start.startswith(b"\x1f\x8b"):
        return gzip.GzipFile(fileobj=raw, mode="rb")
    if start.startswith(b"BZh"):
        return bz2.BZ2File(raw, "rb")
    if start.startswith(b"\xfd7zXZ\x00") or not _is_tar_header(start[: tarfile.BLOCKSIZE]):
        return lzma.LZMAFile(raw, "rb")
    return raw


def _tar_stream(path: str, label: str, data: bytes | None = None) -> "_HeaderBoundedStream":
    """The archive's tar stream, decompressed in chunks straight into the buffer tarfile reads (no
    second copy), at most ``MAX_STREAM_BYTES`` of it (``data``: the archive's bytes, read from
    standard input, in the place of ``path``)."""
    buffer, total = _HeaderBoundedStream(), 0
    try:
        with (open(path, "rb") if data is None else io.BytesIO(data)) as raw:
            start = raw.read(_CHUNK_BYTES)
            raw.seek(0)
            stream = _decompressor(raw, start)
            while True:
                chunk = stream.read(min(_CHUNK_BYTES, MAX_STREAM_BYTES + 1 - total))
                if not chunk:
                    break
                buffer.write(chunk)
                total += len(chunk)
                if total > MAX_STREAM_BYTES:
                    raise InputError(f"{label}: refused: more than {MAX_STREAM_BYTES >> 20} MiB once decompressed "
                                     "(a tar bomb?)")
    except (OSError, EOFError, lzma.LZMAError, ValueError) as exc:  # (gzip.BadGzipFile is an OSError)
        raise InputError(f"{label}: cannot read the archive ({_one_line(exc)})") from None
    buffer.seek(0)
    return buffer


def _one_line(exc: BaseException) -> str:
    """tarfile's reasons run over several lines (one per compression tried): one line, bounded."""
    return " ".join(str(exc).split())[:200]


def opened_archive(path: str, data: bytes | None = None) -> MemoryTree:
    """The archive at ``path`` (or ``data``, its bytes from standard input: ``gather -o - | doctor
    --from -``), checked and held in memory as a tree (see the module docstring)."""
    label = os.path.basename(path) if data is None else "standard input"
    stream = _tar_stream(path, label, data)
    try:
        with tarfile.open(fileobj=stream, mode="r:", tarinfo=_NoSparseTarInfo) as archive:
            members = checked_members(archive, label)
            stream.limit = MAX_FILE_BYTES + tarfile.BLOCKSIZE
            files, links, folders = {}, {}, []
            for member, member_path in members:
                if member.isreg():
                    source = archive.extractfile(member)
                    files[member_path] = source.read(MAX_FILE_BYTES + 1)[:MAX_FILE_BYTES] if source is not None else b""
                elif member.issym():
                    links[member_path] = member.linkname
                else:
                    folders.append(member_path)
    except (tarfile.TarError, EOFError, OSError, ValueError, IndexError, OverflowError, UnicodeError) as exc:
        raise InputError(f"{label}: cannot read the archive ({_one_line(exc)})") from None
    tree = MemoryTree(label, files, links, folders)
    budget = MAX_LINK_WALK_NAMES + 64 * len(links)  # a real archive's links are a few names each
    for link in links:  # resolved through the other links, not only as text (a -> ., b -> a/.., c -> b/..)
        why = tree.why_unresolved(link)
        if tree.walked > budget:
            raise InputError(f"{label}: refused: its links lead through each other too deeply to check "
                             f"(more than {budget} names followed); nothing was read")
        if why in ("outside", "loop"):
            raise InputError(f"{label}: refused: member {link[:120]!r} is a link that "
                             f"{'leads out of the archive' if why == 'outside' else 'loops'} through other links; "
                             "nothing was read")
    if not tree.is_file(GATHER_MARK):
        raise InputError(f"{label} is not a `gputopo gather` archive (it holds no {GATHER_MARK}); make one on "
                         "the host with `gputopo gather -o box.tar.gz`, or give the folder it would hold")
    return tree
