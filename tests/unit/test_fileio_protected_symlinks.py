"""--save/-o through a link in a sticky world-writable folder (/tmp) follow the kernel's
fs.protected_symlinks rule even for root: only a link owned by the folder's owner or by the writer
is followed (issue 20, item 4)."""

from __future__ import annotations

import os
import stat

import pytest

from gputopo.errors import OutputError
from gputopo.fileio import atomic_write_text

OTHER_UID = 54321

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown the link to another user")


@pytest.fixture
def sticky(tmp_path):
    folder = tmp_path / "public"
    folder.mkdir()
    os.chmod(folder, 0o1777)
    secret = tmp_path / "secret"
    secret.write_text("root's own\n")
    os.chmod(secret, 0o600)
    return folder, secret


def test_another_users_link_in_a_sticky_folder_is_not_followed(sticky):
    folder, secret = sticky
    link = folder / "report.json"
    link.symlink_to(secret)
    os.lchown(link, OTHER_UID, OTHER_UID)
    with pytest.raises(OutputError, match="protected_symlinks"):
        atomic_write_text(link, "overwritten\n")
    assert secret.read_text() == "root's own\n" and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["report.json"]  # no temporary file left


def test_a_link_owned_by_the_writer_or_the_folders_owner_is_followed(sticky):
    folder, secret = sticky
    link = folder / "mine.json"
    link.symlink_to(secret)  # owned by root, the writer
    atomic_write_text(link, "new\n")
    assert secret.read_text() == "new\n"
    os.chown(folder, OTHER_UID, OTHER_UID)  # the folder's owner's link
    theirs = folder / "theirs.json"
    theirs.symlink_to(secret)
    os.lchown(theirs, OTHER_UID, OTHER_UID)
    atomic_write_text(theirs, "again\n")
    assert secret.read_text() == "again\n"


def test_outside_a_sticky_folder_links_are_written_through_as_before(tmp_path):
    target = tmp_path / "target"
    target.write_text("old\n")
    link = tmp_path / "link"
    link.symlink_to(target)
    os.lchown(link, OTHER_UID, OTHER_UID)
    atomic_write_text(link, "new\n")
    assert target.read_text() == "new\n" and link.is_symlink()


@pytest.fixture
def foreign_folder_link(sticky, tmp_path):
    """``public/out``: another user's link in the sticky folder, leading to root's own folder."""
    folder, _secret = sticky
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "report.json").write_text("root's report\n")
    link = folder / "out"
    link.symlink_to(private)
    os.lchown(link, OTHER_UID, OTHER_UID)
    return folder, private


def _listing(folder):
    return sorted((p.name, p.read_text()) for p in folder.iterdir())


def test_another_users_link_as_a_folder_of_the_path_is_not_followed(foreign_folder_link, monkeypatch):
    folder, private = foreign_folder_link
    before = _listing(private)
    for given in (folder / "out" / "report.json", folder / "out" / "new.json", folder / "out" / "." / "report.json"):
        with pytest.raises(OutputError, match=rf"{folder / 'out'} is a symbolic link in the sticky world-writable folder"):
            atomic_write_text(given, "overwritten\n")
    monkeypatch.chdir(folder)  # a relative path is walked from the current folder
    with pytest.raises(OutputError, match="protected_symlinks"):
        atomic_write_text("out/report.json", "overwritten\n")
    assert _listing(private) == before  # nothing replaced, nothing created, no temporary file


def test_another_users_link_met_inside_a_links_target_is_not_followed(foreign_folder_link, tmp_path):
    folder, private = foreign_folder_link
    mine = tmp_path / "mine"
    mine.symlink_to(folder / "out")  # root's own link, outside the sticky folder, to the foreign one
    with pytest.raises(OutputError, match=rf"{folder / 'out'} is a symbolic link"):
        atomic_write_text(mine / "report.json", "overwritten\n")
    assert (private / "report.json").read_text() == "root's report\n"


def test_a_folder_link_owned_by_the_writer_or_the_folders_owner_is_followed(sticky, tmp_path):
    folder, _secret = sticky
    private = tmp_path / "private"
    private.mkdir()
    (folder / "mine").symlink_to(private)  # root's, the writer's
    atomic_write_text(folder / "mine" / "a.json", "a\n")
    os.chown(folder, OTHER_UID, OTHER_UID)
    (folder / "theirs").symlink_to(private)
    os.lchown(folder / "theirs", OTHER_UID, OTHER_UID)  # the folder's owner's
    atomic_write_text(folder / "theirs" / "b.json", "b\n")
    assert _listing(private) == [("a.json", "a\n"), ("b.json", "b\n")]


def test_a_chain_of_more_links_than_the_kernel_follows_does_not_hide_another_users_link(sticky, tmp_path):
    """41 links of the writer's own before another user's link in /tmp: the walk gave up at 40 and
    let realpath (no limit) write through; the shell's > says ELOOP."""
    folder, secret = sticky
    theirs = folder / "theirs"
    theirs.symlink_to(secret)
    os.lchown(theirs, OTHER_UID, OTHER_UID)
    chain = tmp_path / "chain"
    chain.mkdir()
    (chain / "l41").symlink_to(theirs)
    for i in range(40, -1, -1):
        (chain / f"l{i}").symlink_to(f"l{i + 1}")
    with pytest.raises(OutputError, match="more than 40 symbolic links"):
        atomic_write_text(chain / "l0", "overwritten\n")
    assert secret.read_text() == "root's own\n"


def test_another_users_regular_file_in_a_sticky_folder_is_not_replaced(sticky):
    """Review 3: root's ``--save /tmp/plan.json`` over a file another user made there replaced it and
    gave the new content back to that user (owner and mode kept: 0666 too), who could then change the
    plan root goes on to train with, or read a gather archive. The kernel's fs.protected_regular
    refuses the shell's ``>`` there; so does gputopo now, and the file stays as it was."""
    folder, _ = sticky
    planted = folder / "plan.json"
    planted.write_text("theirs\n")
    os.chmod(planted, 0o666)
    os.chown(planted, OTHER_UID, OTHER_UID)
    with pytest.raises(OutputError, match="protected_regular"):
        atomic_write_text(planted, "root's plan\n")
    assert planted.read_text() == "theirs\n" and planted.stat().st_uid == OTHER_UID
    assert sorted(p.name for p in folder.iterdir()) == ["plan.json"]
    os.chown(planted, os.geteuid(), os.getegid())  # the writer's own file: replaced as before
    atomic_write_text(planted, "root's plan\n")
    assert planted.read_text() == "root's plan\n"
