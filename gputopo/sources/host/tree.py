"""One confined view of a host's files: the live ``/``, a folder someone gave us, or a gathered archive.

Every reader of host files (sysfs, procfs, a ``gather`` archive, a folder with the same layout)
goes through a ``Tree``; none opens evidence with a plain ``open()`` (a test greps for it). A tree
given to us is hostile: its links may point anywhere, through other links; its files may be
FIFOs, devices or endless. So:

- **Paths are resolved one name at a time inside the root**, each symbolic link met on the way
  (a folder on the path, the last name, a link inside a link's target) looked up in the tree itself
  and followed there. A link is followed only where it stays inside: a ``..`` that would climb
  above the root, or an absolute target in any tree but this host's own ``/`` (where the root *is*
  ``/``), makes the path unresolvable ("outside", read as "not there"), and so do more than
  ``MAX_LINK_HOPS`` links ("loop"). Nothing outside the root is ever reached, whatever the links
  say as text. (The kernel's own sysfs links are relative; ``gather`` packs no absolute link.)
- **Only regular files are read**, and at most ``limit`` bytes of each: a FIFO, a device node, a
  socket or a folder reads as "not there", never blocks, never opens a device. On disk a file is
  checked with ``lstat`` first and then opened relative to its folder's descriptor with
  ``O_NOFOLLOW | O_NONBLOCK``, every folder on the way opened the same way from the root's
  descriptor: a name swapped for a link after the check fails the open instead of being followed.
- An archive is never unpacked to disk: ``MemoryTree`` holds its members (``sources/archives/archive.py``
  checks and bounds them), so there is no temporary folder to leave behind on SIGTERM.
"""

from __future__ import annotations

import os
import posixpath
import stat
from typing import Iterable, Union

from gputopo.errors import InputError
from gputopo.fileio import decode_text, open_folder_chain

MAX_LINK_HOPS = 40  # the kernel's own limit on links followed in one path (ELOOP past it)
# Names one walk may visit, links' targets included: a real sysfs path is a few dozen; 40 hops of
# 4096-byte targets of `..` would be 80,000 (an archive of 49,000 such links: minutes of work).
MAX_WALK_NAMES = 4096
DEFAULT_READ_LIMIT = 1 << 20

FILE, FOLDER, LINK, OTHER = "file", "folder", "link", "other"


def split_relative(rel: str) -> list[str]:
    """The names of a path inside a tree (``/`` and ``.`` dropped; ``..`` kept for the walk)."""
    return [name for name in rel.split("/") if name not in ("", ".")]


class Tree:
    """A root folder's files, read only through paths resolved inside it (see the module docstring).

    Subclasses say what one name is (``_lookup``) and read one resolved, link-free path."""

    label: str = ""
    is_live_host: bool = False  # the real ``/`` of this machine (statvfs and NVML may be asked too)
    walked: int = 0  # names visited by every walk so far (an archive's check bounds their sum)

    # --- what subclasses give ---------------------------------------------------------------------

    def _lookup(self, parts: tuple[str, ...]) -> tuple[str, str | None] | None:
        """What the link-free path ``parts`` is, without following it: ``(FILE|FOLDER|OTHER, None)``,
        ``(LINK, target)``, or None where nothing is there."""
        raise NotImplementedError

    def _read_resolved(self, parts: tuple[str, ...], limit: int) -> bytes | None:
        raise NotImplementedError

    def _list_resolved(self, parts: tuple[str, ...]) -> list[str] | None:
        raise NotImplementedError

    # --- the walk ---------------------------------------------------------------------------------

    def resolve(self, rel: str) -> tuple[str, ...] | None:
        """``rel`` with every link followed inside the tree: the link-free names from the root, or
        None (nothing there, a climb above the root, a loop)."""
        return self._walk(rel)[0]

    def why_unresolved(self, rel: str) -> str | None:
        """Why ``rel`` does not resolve: ``"missing"``, ``"outside"`` (a link that leaves the root) or
        ``"loop"`` (None: it does)."""
        return self._walk(rel)[1]

    def _walk(self, rel: str) -> tuple[tuple[str, ...] | None, str | None]:
        pending = list(reversed(split_relative(rel)))
        done: list[str] = []
        hops = visited = 0
        while pending:
            visited += 1
            if visited > MAX_WALK_NAMES:
                return None, "loop"  # (said as the kernel says a chain too long: not followed)
            self.walked += 1
            name = pending.pop()
            if name == "/":  # an absolute link target: this host's root (only the live host's is followed)
                done = []
                continue
            if name == "..":
                if not done:
                    return None, "outside"  # never followed, whatever lies there
                done.pop()
                continue
            found = self._lookup((*done, name))
            if found is None:
                return None, "missing"
            kind, target = found
            if kind == LINK:
                hops += 1
                if hops > MAX_LINK_HOPS:
                    return None, "loop"
                if not target:
                    return None, "missing"
                if target.startswith("/") and not self.is_live_host:
                    return None, "outside"
                pending.extend(reversed(split_relative(target)))
                if target.startswith("/"):
                    pending.append("/")
                continue
            if pending and kind != FOLDER:
                return None, "missing"  # a file named as a folder on the way
            done.append(name)
        return tuple(done), None

    # --- what readers use -------------------------------------------------------------------------

    def kind(self, rel: str) -> str | None:
        """``FILE``, ``FOLDER`` or ``OTHER`` once links are followed inside the tree; None: not there."""
        parts = self.resolve(rel)
        if parts is None:
            return None
        if not parts:
            return FOLDER
        found = self._lookup(parts)
        return None if found is None else found[0]

    def exists(self, rel: str) -> bool:
        return self.kind(rel) is not None

    def is_file(self, rel: str) -> bool:
        return self.kind(rel) == FILE

    def is_folder(self, rel: str) -> bool:
        return self.kind(rel) == FOLDER

    def is_link(self, rel: str) -> bool:
        """Whether the last name of ``rel`` is itself a link (its folder resolved inside the tree)."""
        return self.read_link(rel) is not None

    def read_link(self, rel: str) -> str | None:
        """The text of the link ``rel`` (its folder resolved inside the tree), not followed."""
        folder, _, name = rel.rstrip("/").rpartition("/")
        parts = self.resolve(folder)
        if parts is None or not name or name in (".", ".."):
            return None
        found = self._lookup((*parts, name))
        return found[1] if found is not None and found[0] == LINK else None

    def read_bytes(self, rel: str, limit: int = DEFAULT_READ_LIMIT) -> bytes | None:
        """At most ``limit`` bytes of the regular file ``rel``; None where there is none (or it is
        a FIFO, a device, a folder, unreadable)."""
        parts = self.resolve(rel)
        if not parts:
            return None
        return self._read_resolved(parts, limit)

    def read_text(self, rel: str, limit: int = DEFAULT_READ_LIMIT, what: str = "file") -> str | None:
        """``read_bytes`` decoded as ``fileio`` decodes inputs (UTF-8/UTF-16 by BOM, else UTF-8,
        else Latin-1); binary content reads as None."""
        data = self.read_bytes(rel, limit)
        if data is None:
            return None
        try:
            return decode_text(data, self.display(rel), what)
        except InputError:  # binary, not text
            return None

    def listdir(self, rel: str) -> list[str] | None:
        """The names in the folder ``rel``, sorted; None where it is not a folder here."""
        parts = self.resolve(rel)
        if parts is None:
            return None
        if parts and (found := self._lookup(parts)) is not None and found[0] != FOLDER:
            return None
        names = self._list_resolved(parts)
        return None if names is None else sorted(names)

    def display(self, rel: str) -> str:
        """How a path of this tree is named to people: ``box.tar.gz:proc/cmdline``, ``/proc/cmdline``."""
        rel = rel.lstrip("/")
        return f"/{rel}" if self.is_live_host else f"{self.label}:{rel}"


class FolderTree(Tree):
    """A folder on disk (``/`` for this host, or a folder a user gave); see the module docstring."""

    def __init__(self, root: str | os.PathLike[str], label: str | None = None) -> None:
        self.root = os.path.abspath(os.fspath(root))
        self.is_live_host = self.root == "/"
        self.label = label if label is not None else ("this host" if self.is_live_host else os.path.basename(self.root))

    def _path(self, parts: Iterable[str]) -> str:
        return os.path.join(self.root, *parts)

    def _lookup(self, parts: tuple[str, ...]) -> tuple[str, str | None] | None:
        path = self._path(parts)
        try:
            st = os.lstat(path)
        except (OSError, ValueError):  # (ValueError: a NUL in a name)
            return None
        if stat.S_ISLNK(st.st_mode):
            try:
                return LINK, os.readlink(path)
            except OSError:
                return None
        if stat.S_ISDIR(st.st_mode):
            return FOLDER, None
        return (FILE if stat.S_ISREG(st.st_mode) else OTHER), None

    def _open_folder(self, parts: tuple[str, ...]) -> int:
        """A descriptor of the link-free folder ``parts``, opened from the root one name at a time
        with ``O_NOFOLLOW``: a name swapped for a link since the walk fails (ELOOP/ENOTDIR)."""
        return open_folder_chain(self.root, parts)

    def _read_resolved(self, parts: tuple[str, ...], limit: int) -> bytes | None:
        try:
            folder_fd = self._open_folder(parts[:-1])
        except (OSError, ValueError):
            return None
        try:
            before = os.stat(parts[-1], dir_fd=folder_fd, follow_symlinks=False)
            if not stat.S_ISREG(before.st_mode):
                return None  # a FIFO, device or socket is never opened
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOCTTY", 0)
            fd = os.open(parts[-1], flags, dir_fd=folder_fd)
        except (OSError, ValueError):
            return None
        finally:
            os.close(folder_fd)
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != (before.st_dev, before.st_ino):
                return None  # swapped between the check and the open
            chunks, total = [], 0
            while total < limit:
                chunk = os.read(fd, min(1 << 20, limit - total))
                if not chunk:
                    break
                chunks.append(chunk)
                total += len(chunk)
            return b"".join(chunks)
        except OSError:
            return None
        finally:
            os.close(fd)

    def _list_resolved(self, parts: tuple[str, ...]) -> list[str] | None:
        try:
            fd = self._open_folder(parts)
        except (OSError, ValueError):
            return None
        try:
            return os.listdir(fd)
        except OSError:
            return None
        finally:
            os.close(fd)


class MemoryTree(Tree):
    """A checked archive's members held in memory (``sources/archives/archive.py``): files, folders and
    links by their normalised paths. Folders are every member folder and every parent of a member."""

    def __init__(self, label: str, files: dict[str, bytes], links: dict[str, str], folders: Iterable[str] = ()) -> None:
        self.label = label
        self.files = files
        self.links = links
        self.folders: set[str] = {""}
        self.children: dict[str, set[str]] = {}
        for path in [*files, *links, *folders]:
            self._add_parents(path)
        for path in folders:
            self.folders.add(path)

    def _add_parents(self, path: str) -> None:
        child = path
        while child:
            parent = posixpath.dirname(child)
            self.children.setdefault(parent, set()).add(posixpath.basename(child))
            if parent in self.folders:
                return
            self.folders.add(parent)
            child = parent

    def _lookup(self, parts: tuple[str, ...]) -> tuple[str, str | None] | None:
        path = "/".join(parts)  # (bounded: a walk visits at most MAX_WALK_NAMES names)
        if path in self.links:
            return LINK, self.links[path]
        if path in self.files:
            return FILE, None
        if path in self.folders:
            return FOLDER, None
        return None

    def _read_resolved(self, parts: tuple[str, ...], limit: int) -> bytes | None:
        data = self.files.get("/".join(parts))
        return None if data is None else data[:limit]

    def _list_resolved(self, parts: tuple[str, ...]) -> list[str] | None:
        path = "/".join(parts)
        return list(self.children.get(path, ())) if path in self.folders else None


def as_tree(root: "Root") -> Tree:
    """A tree for ``root``: itself where it is one, else the folder on disk."""
    return root if isinstance(root, Tree) else FolderTree(root)


Root = Union[str, "os.PathLike[str]", Tree]  # what the readers of host files take
