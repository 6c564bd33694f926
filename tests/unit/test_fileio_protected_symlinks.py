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
