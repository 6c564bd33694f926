"""fileio: atomic writes and user-supplied text files; every failure is one InputError line."""

from __future__ import annotations

import errno
import os

import pytest

from gputopo.errors import InputError
from gputopo.fileio import atomic_write_text, read_text_input


def test_atomic_write_replaces_the_file(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_writing_onto_a_folder_is_one_input_error(tmp_path):
    with pytest.raises(InputError, match="is a folder"):
        atomic_write_text(tmp_path, "x")


def test_an_os_error_while_writing_is_an_input_error_and_leaves_no_temp_file(tmp_path, monkeypatch):
    def refuse(src, dst):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(InputError, match=r"cannot write .*out.json: Permission denied"):
        atomic_write_text(tmp_path / "out.json", "x")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_where_no_temp_file_can_be_made_is_an_input_error(tmp_path, monkeypatch):
    import tempfile

    def refuse(**kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    with pytest.raises(InputError, match="Read-only file system"):
        atomic_write_text(tmp_path / "out.json", "x")


def test_scan_save_onto_a_folder_is_one_error_line(cli, tmp_path):
    from conftest import assert_one_error_line

    result = cli("scan", "--machine", "dgx1", "--save", str(tmp_path))
    assert "is a folder" in assert_one_error_line(result)


def test_read_text_input_refuses_folders_and_binary(tmp_path):
    with pytest.raises(InputError, match="folder"):
        read_text_input(tmp_path)
    binary = tmp_path / "b"
    binary.write_bytes(b"a\x00b")
    with pytest.raises(InputError, match="binary"):
        read_text_input(binary)
