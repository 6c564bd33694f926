"""fileio: atomic writes and user-supplied text files; every failure is one InputError line."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from gputopo.errors import InputError, OutputError
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
    def refuse(src, dst, **dir_fds):
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(InputError, match=r"cannot write .*out.json: Permission denied"):
        atomic_write_text(tmp_path / "out.json", "x")
    assert list(tmp_path.iterdir()) == []


def test_a_folder_where_no_temp_file_can_be_made_is_an_input_error(tmp_path, monkeypatch):
    real_open = os.open

    def refuse(name, flags, *args, **kwargs):
        if flags & os.O_CREAT:
            raise OSError(errno.EROFS, "Read-only file system")
        return real_open(name, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
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


# --- write rules: only regular files, symlinks written through, modes kept, failures leave no trace ---


def test_a_fifo_target_is_refused_and_left_a_fifo(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match=r"cannot write .*pipe: it is a named pipe \(FIFO\), not a regular file"):
        atomic_write_text(fifo, "x")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert [p.name for p in tmp_path.iterdir()] == ["pipe"]  # no temp file either


def test_dev_null_is_refused_and_stays_a_character_device():
    with pytest.raises(InputError, match="it is a character device, not a regular file"):
        atomic_write_text("/dev/null", "x")
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


def test_a_symlink_is_written_through_to_its_target_and_stays_a_link(tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "box.json"
    target.write_text("old")
    link = tmp_path / "box.json"
    link.symlink_to(target)
    assert atomic_write_text(link, "new") == link
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text() == "new"
    assert sorted(p.name for p in (tmp_path / "real").iterdir()) == ["box.json"]


def test_a_dangling_symlink_creates_its_target_and_a_loop_is_refused(tmp_path):
    link = tmp_path / "out.json"
    link.symlink_to(tmp_path / "made.json")
    atomic_write_text(link, "new")
    assert link.is_symlink() and (tmp_path / "made.json").read_text() == "new"
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    with pytest.raises(InputError, match="loop"):
        atomic_write_text(loop, "x")
    assert loop.is_symlink()


def test_an_existing_file_keeps_its_mode(tmp_path):
    for mode in (0o644, 0o640, 0o600):
        target = tmp_path / f"out{mode:o}.json"
        target.write_text("old")
        target.chmod(mode)
        atomic_write_text(target, "new")
        assert stat.S_IMODE(target.stat().st_mode) == mode and target.read_text() == "new"


def test_a_new_file_gets_the_umask_default_like_open(tmp_path):
    old_umask = os.umask(0o022)
    try:
        atomic_write_text(tmp_path / "new.json", "x")
        os.umask(0o027)
        atomic_write_text(tmp_path / "other.json", "x")
    finally:
        os.umask(old_umask)
    assert stat.S_IMODE((tmp_path / "new.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "other.json").stat().st_mode) == 0o640


def test_a_full_disk_is_an_output_error_and_keeps_the_old_file(tmp_path, monkeypatch):
    from gputopo.errors import EXIT_ENVIRONMENT, OutputError

    target = tmp_path / "out.json"
    target.write_text("old")

    def disk_full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", disk_full)
    with pytest.raises(OutputError, match=r"cannot write .*out.json: No space left on device") as caught:
        atomic_write_text(target, "new")
    assert caught.value.exit_code == EXIT_ENVIRONMENT
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["out.json"]


def test_a_folder_swapped_for_a_link_after_the_check_does_not_send_the_write_elsewhere(tmp_path, monkeypatch):
    """The race ``protected_link`` alone left open: between the check and the write, a folder on the
    path becomes a link to another folder (an attacker's, or /etc). The write now fails there."""
    import gputopo.fileio as fileio

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    real_open_folder = fileio._open_folder

    def swap_then_open(folder):  # the window: the path checked and resolved, the folder not yet open
        work.rename(tmp_path / "work.moved")
        (tmp_path / "work").symlink_to(elsewhere)
        return real_open_folder(folder)

    monkeypatch.setattr(fileio, "_open_folder", swap_then_open)
    with pytest.raises(OutputError, match=r"cannot write .*plan.json: folder .*work changed or cannot be opened"):
        atomic_write_text(work / "plan.json", "x")
    assert list(elsewhere.iterdir()) == [] and list((tmp_path / "work.moved").iterdir()) == []


def test_a_file_swapped_for_a_fifo_after_the_check_is_not_replaced(tmp_path, monkeypatch):
    import gputopo.fileio as fileio

    target = tmp_path / "plan.json"
    target.write_text("old")
    real_open_folder = fileio._open_folder

    def swap_then_open(folder):
        target.unlink()
        os.mkfifo(target)
        return real_open_folder(folder)

    monkeypatch.setattr(fileio, "_open_folder", swap_then_open)
    with pytest.raises(OutputError, match="changed to a named pipe"):
        atomic_write_text(target, "new")
    assert stat.S_ISFIFO(os.lstat(target).st_mode) and [p.name for p in tmp_path.iterdir()] == ["plan.json"]


# --- reading: bounded, byte-order marks, pipes ---------------------------------------------------


def test_utf16_with_a_bom_is_read_as_text(tmp_path):
    for encoding in ("utf-16", "utf-16-be"):
        path = tmp_path / f"topo-{encoding}.txt"
        data = "GPU0\tX\tNV2 — ok\n".encode(encoding)
        if encoding == "utf-16-be":
            data = b"\xfe\xff" + data
        path.write_bytes(data)
        assert read_text_input(path) == "GPU0\tX\tNV2 — ok\n"


def test_a_utf8_bom_is_dropped(tmp_path):
    path = tmp_path / "box.json"
    path.write_bytes(b"\xef\xbb\xbf{\"schema\": 1}")
    assert read_text_input(path) == '{"schema": 1}'


def test_input_past_the_limit_is_one_error_and_the_limit_itself_is_fine(tmp_path, monkeypatch):
    import gputopo.fileio

    monkeypatch.setattr(gputopo.fileio, "MAX_INPUT_BYTES", 1024 * 1024)
    path = tmp_path / "big.txt"
    path.write_bytes(b"a" * (1024 * 1024))
    assert len(read_text_input(path)) == 1024 * 1024
    path.write_bytes(b"a" * (1024 * 1024 + 1))
    with pytest.raises(InputError, match="larger than the 1 MiB limit"):
        read_text_input(path)


def test_dev_zero_stops_at_the_first_chunk():
    with pytest.raises(InputError, match="binary"):
        read_text_input("/dev/zero", max_bytes=1 << 40)  # no bound in sight: the NUL bytes stop it


def test_a_pipe_is_read_like_a_file(tmp_path):
    read_end, write_end = os.pipe()
    os.write(write_end, b"GPU0\tX\n")
    os.close(write_end)
    try:
        assert read_text_input(f"/dev/fd/{read_end}") == "GPU0\tX\n"
    finally:
        os.close(read_end)


def test_an_empty_output_name_is_refused_not_taken_as_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError, match="the output file name is empty"):
        atomic_write_text("", "x")
    assert list(tmp_path.iterdir()) == []


def test_a_file_this_user_may_not_write_is_not_replaced(tmp_path, monkeypatch):
    """The rename would replace a file its owner made read-only for us; the shell's `>` refuses it,
    and so do we (root may write it, as with `>`, so the kernel's answer is stood in for here)."""
    import gputopo.fileio as fileio
    from gputopo.errors import OutputError

    target = tmp_path / "ro.json"
    target.write_text("old\n")
    real_access = os.access
    monkeypatch.setattr(fileio.os, "access", lambda p, mode: False if mode == os.W_OK else real_access(p, mode))
    with pytest.raises(OutputError, match="cannot write .*ro.json: Permission denied"):
        atomic_write_text(target, "new")
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["ro.json"]


def test_a_path_the_kernel_will_not_look_at_is_an_output_error_not_a_traceback(tmp_path):
    """ENAMETOOLONG (and EACCES, as /proc/1/root/... gives in a container) came out of
    Path.is_symlink() in write_target as a traceback."""
    too_long = tmp_path / "/".join(["a"] * 3000) / "x.json"
    with pytest.raises(OutputError, match="File name too long"):
        atomic_write_text(too_long, "{}")


def test_a_large_regular_file_is_read_whole_and_checked_as_chunks_are(tmp_path):
    """Issue 21: a regular file within the bound is read in one go (no chunks joined); its first
    megabyte is still checked for NUL bytes, and a UTF-8 BOM still dropped."""
    path = tmp_path / "box.json"
    text = '{"x": "' + "é" * (3 * 1024 * 1024) + '"}'
    path.write_bytes(b"\xef\xbb\xbf" + text.encode())
    assert read_text_input(path) == text
    path.write_bytes(b"{" + b"\x00" + b"a" * (2 * 1024 * 1024))
    with pytest.raises(InputError, match="binary"):
        read_text_input(path)


def test_a_regular_file_that_grows_while_read_is_read_on_to_the_bound(tmp_path, monkeypatch):
    import gputopo.fileio

    path = tmp_path / "box.txt"
    path.write_bytes(b"a" * (3 * 1024 * 1024))
    real_fstat = os.fstat

    def smaller(fd):  # the size it had a moment before: the rest was written since
        info = real_fstat(fd)
        return os.stat_result((*info[:6], info.st_size - 1024 * 1024 - 5, *info[7:]))

    monkeypatch.setattr(gputopo.fileio.os, "fstat", smaller)
    assert read_text_input(path) == "a" * (3 * 1024 * 1024)
    with pytest.raises(InputError, match="larger than the 2 MiB limit"):
        read_text_input(path, max_bytes=2 * 1024 * 1024)


def test_a_folder_swapped_for_a_link_while_the_rest_is_checked_does_not_send_the_write_elsewhere(
        tmp_path, monkeypatch):
    """The folder must be the one the link check walked: a swap just after that walk (here, while
    the write checks that the folder exists) used to be followed, because the folder was resolved
    again (``realpath``) after the check."""
    from gputopo import fileio

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    real_is_dir = fileio.Path.is_dir
    swapped = []

    def swap_then_is_dir(self):
        if not swapped and self == work:
            work.rename(tmp_path / "work.moved")
            work.symlink_to(elsewhere)
            swapped.append(True)
        return real_is_dir(self)

    monkeypatch.setattr(fileio.Path, "is_dir", swap_then_is_dir)
    with pytest.raises(OutputError, match=r"cannot write .*plan.json: folder .*work changed or cannot be opened"):
        atomic_write_text(work / "plan.json", "x")
    assert swapped and list(elsewhere.iterdir()) == [] and list((tmp_path / "work.moved").iterdir()) == []


def _exit_code_as_another_user(action) -> int:
    """``action()`` in a child process, as nobody when we are root (as ourselves otherwise)."""
    import sys

    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        code = 0
        try:
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            action()
        except BaseException as exc:  # noqa: BLE001 (reported through the exit code)
            sys.stderr.write(f"{exc}\n")
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_folder_this_user_may_search_but_not_list_is_written_as_the_shell_would():
    """A folder on the path with --x for us (a 0711 home, a drop-box) lets the shell's `>` write
    below it; opening each folder for reading (to hold it) refused it with Permission denied."""
    import shutil
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="gputopo-test-"))  # (tmp_path's parents are 0700: nobody cannot pass)
    try:
        outer = base / "outer"
        inner = outer / "inner"
        inner.mkdir(parents=True)
        os.chmod(base, 0o711)
        os.chmod(outer, 0o311)
        os.chmod(inner, 0o777)
        code = _exit_code_as_another_user(lambda: atomic_write_text(inner / "out.json", "{}"))
        assert code == 0
        assert (inner / "out.json").read_text() == "{}"
        assert [p.name for p in inner.iterdir()] == ["out.json"]
    finally:
        os.chmod(outer, 0o755)
        shutil.rmtree(base)


@pytest.mark.parametrize("suffix", ["/", "//", "/."])
def test_a_name_ending_in_a_slash_is_a_folder_never_a_file(tmp_path, suffix):
    """Review 3: ``-o out/`` wrote a file named ``out`` (and ``-o f.xml/`` replaced the file f.xml),
    where the shell's ``>`` says "Is a directory": the name asks for a folder."""
    existing = tmp_path / "f.xml"
    existing.write_text("kept")
    for given in (f"{tmp_path / 'newdir'}{suffix}", f"{existing}{suffix}"):
        with pytest.raises(InputError, match="names a folder"):
            atomic_write_text(given, "x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.xml"] and existing.read_text() == "kept"
