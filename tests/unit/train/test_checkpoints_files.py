"""Files in a checkpoint folder are never followed, blocked on or deleted through a link; --resume
takes only checkpoints gputopo wrote (issue 20, items 2 and 3)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from gputopo.errors import InputError
from gputopo.train.launch.checkpoint_lock import LOCK_FILE, CheckpointLock
from gputopo.train.checkpoints import (
    MARKER_FILE,
    check_checkpoint_choice,
    checkpoint_dir_for,
    remove_leftovers,
    remove_no_follow,
    saved_checkpoints,
    write_marker,
)
from gputopo.train.config import TrainConfig


@pytest.fixture(autouse=True)
def _no_hang():
    """A FIFO opened for reading would block forever: fail the test instead."""
    signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(TimeoutError("blocked")))
    signal.alarm(10)
    yield
    signal.alarm(0)


def _ckpt(folder: Path, step: int, by_gputopo: bool = True, model: str = "cnn") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    if by_gputopo:
        write_marker(TrainConfig(checkpoint_dir=str(folder), model=model))
    (folder / f"ckpt-{step}.index").write_bytes(b"index")
    (folder / f"ckpt-{step}.data-00000-of-00001").write_bytes(b"data")


def _choice(folder: Path, resume: bool = False, model: str = "cnn") -> None:
    check_checkpoint_choice(TrainConfig(checkpoint_dir=str(folder), resume=resume, model=model),
                            scaling=False, dry_run=False)


def test_the_lock_never_follows_a_link_and_leaves_its_target_whole(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / LOCK_FILE).symlink_to(precious)
    with pytest.raises(InputError, match="symbolic link"):
        CheckpointLock.acquire(ck)
    assert precious.read_text() == "keep me\n"
    (ck / LOCK_FILE).unlink()
    (ck / LOCK_FILE).symlink_to("/dev/null")
    with pytest.raises(InputError, match="symbolic link"):
        CheckpointLock.acquire(ck)


@pytest.mark.parametrize("kind", ["fifo", "hardlink", "folder"])
def test_the_lock_refuses_what_is_not_its_own_regular_file(tmp_path, kind):
    ck = tmp_path / "ck"
    ck.mkdir()
    lock = ck / LOCK_FILE
    if kind == "fifo":
        os.mkfifo(lock)
    elif kind == "hardlink":
        other = tmp_path / "other"
        other.write_text("another file\n")
        os.link(other, lock)
    else:
        lock.mkdir()
    with pytest.raises(InputError, match="regular file|hard links|Is a directory"):
        CheckpointLock.acquire(ck)
    if kind == "hardlink":
        assert (tmp_path / "other").read_text() == "another file\n"


def test_a_worker_copy_that_is_a_link_is_refused_and_its_target_kept(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "data.txt").write_text("not yours\n")
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / ".worker-1-tmp").symlink_to(victim)
    with pytest.raises(InputError, match="not a folder gputopo made"):
        checkpoint_dir_for(TrainConfig(checkpoint_dir=str(ck), strategy="multi-worker",
                                       workers=["a:1", "b:2"], task_index=1))
    remove_no_follow(ck / ".worker-1-tmp")  # the link goes, never what it leads to
    assert (victim / "data.txt").read_text() == "not yours\n" and not os.path.lexists(ck / ".worker-1-tmp")


def test_leftover_temporary_folders_go_and_links_are_not_followed(tmp_path):
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "x").write_text("x")
    ck = tmp_path / "ck"
    _ckpt(ck, 5)
    (ck / "ckpt-6_temp").mkdir()
    (ck / "ckpt-6_temp" / "part-00000-of-00001.index").write_bytes(b"half")
    (ck / ".worker-2-tmp").mkdir()
    (ck / ".worker-2-tmp" / "inner-link").symlink_to(victim)
    (ck / ".worker-3-tmp").symlink_to(victim)
    remove_leftovers(ck)
    assert sorted(p.name for p in ck.iterdir()) == sorted([MARKER_FILE, "ckpt-5.index", "ckpt-5.data-00000-of-00001"])
    assert (victim / "x").read_text() == "x"


def test_leftovers_stay_in_a_folder_gputopo_does_not_own(tmp_path):
    ck = tmp_path / "ck"
    _ckpt(ck, 5, by_gputopo=False)
    (ck / "ckpt-6_temp").mkdir()
    remove_leftovers(ck)
    assert (ck / "ckpt-6_temp").is_dir()


@pytest.mark.parametrize("make", ["fifo", "dev-zero", "link"])
def test_a_state_file_that_is_no_regular_file_is_refused_without_reading_it(tmp_path, make):
    ck = tmp_path / "ck"
    _ckpt(ck, 5)
    state = ck / "checkpoint"
    if make == "fifo":
        os.mkfifo(state)
    elif make == "dev-zero":
        state.symlink_to("/dev/zero")
    else:
        (tmp_path / "elsewhere").write_text('model_checkpoint_path: "ckpt-5"\n')
        state.symlink_to(tmp_path / "elsewhere")
    assert saved_checkpoints(ck).unsafe
    with pytest.raises(InputError, match="checkpoint files must be regular files"):
        _choice(ck, resume=True)


def test_a_huge_state_file_is_read_to_its_bound_only(tmp_path):
    ck = tmp_path / "ck"
    _ckpt(ck, 5)
    (ck / "checkpoint").write_bytes(b"model_checkpoint_path: \"ckpt-5\"\n" * 100_000)
    saved = saved_checkpoints(ck)
    assert saved.state_step is None and "larger than" in saved.state_problem


def test_a_checkpoint_file_that_is_a_link_is_refused(tmp_path):
    ck = tmp_path / "ck"
    _ckpt(ck, 5)
    (ck / "ckpt-5.index").unlink()
    (ck / "ckpt-5.index").symlink_to("/etc/passwd")
    with pytest.raises(InputError, match=r"ckpt-5.index \(a symbolic link\)"):
        _choice(ck, resume=True)


def test_resume_refuses_checkpoints_gputopo_did_not_write_and_changes_nothing(tmp_path):
    ck = tmp_path / "ck"
    _ckpt(ck, 7, by_gputopo=False)
    before = sorted((p.name, p.read_bytes()) for p in ck.iterdir())
    with pytest.raises(InputError, match="not written by gputopo train"):
        _choice(ck, resume=True)
    assert sorted((p.name, p.read_bytes()) for p in ck.iterdir()) == before


def test_a_damaged_record_is_said_to_be_damaged_not_missing(tmp_path):
    """Review 2: a malformed .gputopo-checkpoints record was reported as "no record there"."""
    ck = tmp_path / "ck"
    _ckpt(ck, 7, by_gputopo=False)
    (ck / ".gputopo-checkpoints").write_text("{not json")
    with pytest.raises(InputError, match=r"not written by gputopo train \(its .gputopo-checkpoints record is there but damaged"):
        _choice(ck, resume=True)


def test_resume_refuses_another_models_checkpoints(tmp_path):
    ck = tmp_path / "ck"
    _ckpt(ck, 7, model="mobilenetv2")
    with pytest.raises(InputError, match="of --model mobilenetv2, not cnn"):
        _choice(ck, resume=True)
    _choice(ck, resume=True, model="mobilenetv2")


def test_the_marker_is_never_written_through_a_link(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (tmp_path / "target").write_text("t")
    (ck / MARKER_FILE).symlink_to(tmp_path / "target")
    write_marker(TrainConfig(checkpoint_dir=str(ck)))  # there already: left alone
    assert (tmp_path / "target").read_text() == "t"
    assert saved_checkpoints(ck).marker is None


def test_the_marker_makes_a_missing_folder_as_the_first_save_would(tmp_path):
    """A child run by hand (its printed command) has no parent to make --checkpoint-dir first."""
    ck = tmp_path / "new" / "ck"
    write_marker(TrainConfig(checkpoint_dir=str(ck)))
    assert saved_checkpoints(ck).marker == {"schema": "gputopo.checkpoints/1", "model": "cnn", "image_size": None}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown the link to another user")
@pytest.mark.parametrize("through", ["ck", "parent/ck"], ids=["the-folder-itself", "a-folder-above-it"])
def test_a_checkpoint_folder_through_another_users_link_in_a_sticky_folder_is_refused(tmp_path, through):
    """``--checkpoint-dir /tmp/ck`` where another user made /tmp/ck (or /tmp/parent) a link to root's
    folder: the run would write, rotate and delete there. Refused as fs.protected_symlinks would."""
    from gputopo.train.checkpoints import check_checkpoint_dir_writable

    public = tmp_path / "public"
    public.mkdir()
    os.chmod(public, 0o1777)
    victim = tmp_path / "victim"
    (victim / "ck").mkdir(parents=True)
    (victim / "ck" / "ckpt-1.index").write_bytes(b"root's own")
    link = public / through.split("/")[0]
    link.symlink_to(victim / "ck" if through == "ck" else victim)
    os.lchown(link, 54321, 54321)
    given = public / through
    for check in (lambda: _choice(given), lambda: check_checkpoint_dir_writable(str(given))):
        with pytest.raises(InputError, match=rf"--checkpoint-dir {given}: {link} is a symbolic link in the sticky"):
            check()
    assert sorted(p.name for p in (victim / "ck").iterdir()) == ["ckpt-1.index"]  # nothing written there
    os.lchown(link, 0, 0)  # root's own link (the writer's) is followed: the folder holds a checkpoint
    with pytest.raises(InputError, match="already holds a checkpoint"):
        _choice(given)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown the folder to another user")
@pytest.mark.parametrize("owned", ["ck", "parent"], ids=["the-folder-itself", "a-folder-above-it"])
def test_a_checkpoint_folder_another_user_controls_is_refused(tmp_path, owned):
    """Review 3: ``--checkpoint-dir /tmp/ck`` where another user made /tmp/ck a real folder (or owns
    a folder above it): no link at the check, but that user may put one in at any moment, between
    the check and TF's save (``ckpt-N_temp`` -> /etc), and the run (root) writes, rotates and deletes
    where it leads. Refused before anything is written."""
    from gputopo.train.checkpoints import check_checkpoint_dir_writable

    public = tmp_path / "public"
    public.mkdir()
    os.chmod(public, 0o1777)
    (public / "parent" / "ck").mkdir(parents=True)
    os.chown(public / owned if owned == "parent" else public / "parent" / "ck", 54321, 54321)
    given = public / "parent" / "ck"
    with pytest.raises(InputError, match=r"owned by uid 54321 \(neither you nor root\)"):
        check_checkpoint_dir_writable(str(given))
    assert list(given.iterdir()) == []


def test_a_checkpoint_folder_anyone_may_write_is_refused_unless_sticky(tmp_path):
    public = tmp_path / "open"
    public.mkdir()
    os.chmod(public, 0o777)
    from gputopo.train.checkpoints import check_checkpoint_dir_writable

    with pytest.raises(InputError, match="anyone may write"):
        check_checkpoint_dir_writable(str(public / "ck"))
    os.chmod(public, 0o1777)  # sticky, as /tmp: others cannot rename or remove this run's folder
    check_checkpoint_dir_writable(str(public / "ck"))
