"""Writing files so that a crash never leaves a half-written one behind."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from gputopo.errors import InputError


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` via a temporary file in the same folder and an atomic rename.

    Readers see either the old file or the complete new one, never a partial write.
    """
    target = Path(path)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {target}: folder {folder} does not exist")
    if target.is_dir():
        raise InputError(f"cannot write {target}: it is a folder; give a file name")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp_name, target)
    except BaseException as exc:
        try:
            os.unlink(tmp_name)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):
            raise InputError(f"cannot write {target}: {exc.strerror or exc}") from None
        raise
    return target


def read_text_input(path: str | os.PathLike[str], what: str = "file") -> str:
    """Read a user-supplied text file ('-' is standard input); refuse binary or unreadable files."""
    import sys

    if str(path) == "-":
        data = sys.stdin.buffer.read()
        label = "standard input"
    else:
        p = Path(path)
        label = str(p)
        if not p.exists():
            raise InputError(f"{what} {label} does not exist")
        if p.is_dir():
            raise InputError(f"{what} {label} is a folder, not a file")
        try:
            data = p.read_bytes()
        except OSError as exc:
            raise InputError(f"cannot read {what} {label}: {exc.strerror or exc}") from None
    if b"\x00" in data:
        raise InputError(f"{what} {label} is binary, not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data.decode("latin-1")
