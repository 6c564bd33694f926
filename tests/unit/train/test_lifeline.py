"""Children never outlive their parent, a child stuck after its result is killed, and no temporary
folder is left behind (issue 20, item 5). Plain Python children, no TensorFlow."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gputopo.train.launch import supervise
from gputopo.train.launch.supervise import run_processes, start_child
from gputopo.train.lifeline import RUN_LOCK, STALE_UNLOCKED_S, hold_run_folder, orphan_cleanup, sweep_stale_folders

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc are Linux's")

# A child deaf to SIGTERM (as a worker stuck in a collective is): only the liveness pipe ends it.
_DEAF_CHILD = """
import signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
from gputopo.train.lifeline import bind_to_parent
bind_to_parent(lambda: None, sys.argv[1], grace_s=1.0)
time.sleep(120)
"""

_PARENT = """
import sys
from pathlib import Path
from gputopo.train.launch.supervise import start_child
folder = Path(sys.argv[1])
folder.mkdir()
result = folder / "result-0.json"
child = start_child("worker 0", [sys.executable, "-c", sys.argv[2], str(result)], {}, result)
result.write_text("{}")  # as a child's result would be
print(child.process.pid, flush=True)
child.process.wait()
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_child_deaf_to_sigterm_is_gone_soon_after_its_parent_is_killed(tmp_path):
    folder = tmp_path / f"gputopo-train-{os.getpid()}-x"
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(folder), _DEAF_CHILD], stdout=subprocess.PIPE,
                              text=True, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    child_pid = int(parent.stdout.readline())
    try:
        time.sleep(1.0)  # the child is watching
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 20
        while _alive(child_pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(child_pid), "the child outlived its parent"
        assert not folder.exists(), "the orphan left the run's temporary folder behind"
    finally:
        if _alive(child_pid):
            os.kill(child_pid, signal.SIGKILL)


def test_the_liveness_pipe_is_the_childs_alone(tmp_path):
    """Only the parent holds the write end: a second child must not keep the first one's pipe open."""
    script = "import os,time; print(sorted(os.listdir('/proc/self/fd')), os.environ.get('GPUTOPO_PARENT_FD'), flush=True)"
    first = start_child("a", [sys.executable, "-c", script], {}, tmp_path / "a.json")
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    first.process.wait()
    first.close()
    assert "None" in second.stdout  # an unrelated process gets no pipe
    assert first.liveness_fd == -1


def test_a_child_stuck_after_writing_its_result_is_killed_and_its_result_stands(tmp_path, monkeypatch):
    monkeypatch.setattr(supervise, "EXIT_GRACE_S", 0.5)
    result = tmp_path / "r.json"
    script = ("import json, signal, sys, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
              f"open({str(result)!r}, 'w').write(json.dumps({{'status': 'completed', 'steps': 3}}))\ntime.sleep(120)\n")
    child = start_child("training process", [sys.executable, "-c", script], {}, result)
    started = time.monotonic()
    assert run_processes([child], None) == [{"status": "completed", "steps": 3}]
    assert time.monotonic() - started < 60 and child.process.poll() is not None and child.killed_after_result
    child.close()


def test_stale_run_folders_are_swept_and_live_ones_and_links_kept(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    stale = tmp_path / f"gputopo-train-{dead.pid}-abc"
    live = tmp_path / f"gputopo-train-{os.getpid()}-def"
    victim = tmp_path / "victim"
    for folder in (stale, live, victim):
        folder.mkdir()
        (folder / "result-0.json").write_text(json.dumps({}))
    (stale / RUN_LOCK).write_text("")  # its lock free: the run that held it is gone
    (tmp_path / f"gputopo-train-{dead.pid}-lnk").symlink_to(victim)
    sweep_stale_folders(str(tmp_path))
    assert not stale.exists() and live.exists() and (victim / "result-0.json").exists()


def test_a_live_run_of_another_pid_namespace_keeps_its_folder(tmp_path):
    """Two containers sharing /tmp: a run's pid means nothing in the other's PID namespace (here, a
    pid that has ended), but the run holds its folder's lock, which the sweep sees across namespaces.
    Before, the other container's next run removed the live run's folder (its results, its children's
    TMPDIR). A folder with no lock yet (being made, or an older gputopo's) is kept while it is new."""
    import fcntl

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    held = tmp_path / f"gputopo-train-{dead.pid}-held"
    young = tmp_path / f"gputopo-train-{dead.pid}-young"
    old = tmp_path / f"gputopo-train-{dead.pid}-old"
    for folder in (held, young, old):
        folder.mkdir()
        (folder / "result-0.json").write_text("{}")
    lock_fd = hold_run_folder(str(held))
    long_ago = time.time() - 2 * STALE_UNLOCKED_S
    os.utime(old, (long_ago, long_ago))
    try:
        sweep_stale_folders(str(tmp_path))
        assert held.exists() and (held / "result-0.json").exists() and young.exists() and not old.exists()
        probe = os.open(held / RUN_LOCK, os.O_RDONLY)
        try:
            with pytest.raises(BlockingIOError):  # still held by the run, not taken over by the sweep
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
    finally:
        os.close(lock_fd)
    sweep_stale_folders(str(tmp_path))  # the run ended without its clean-up: now it is stale
    assert not held.exists()


def test_an_orphan_removes_its_own_temporary_folder_and_no_other(tmp_path, monkeypatch):
    """A child's TMPDIR (AutoGraph's files) is the parent's ``tmp-<i>`` in the run's folder: an
    orphan removes it with its result, and the run's folder once empty; a TMPDIR of its own choosing
    elsewhere stays."""
    run = tmp_path / "gputopo-train-1-abc"
    own = run / "tmp-0"
    own.mkdir(parents=True)
    (own / "__autograph_generated_file1.py").write_text("")
    (run / "result-0.json").write_text("{}")
    monkeypatch.setenv("TMPDIR", str(own))
    orphan_cleanup(str(run / "result-0.json"))
    assert not run.exists()

    other = tmp_path / "users-own-tmp"
    other.mkdir()
    (other / "keep").write_text("")
    run.mkdir()
    (run / "result-1.json").write_text("{}")
    monkeypatch.setenv("TMPDIR", str(other))
    orphan_cleanup(str(run / "result-1.json"))
    assert (other / "keep").exists() and not run.exists()


def test_an_orphan_removes_its_native_log_beside_its_result_and_no_other_file(tmp_path, monkeypatch):
    """A parent killed early (SIGKILL, before any result): the child's TensorFlow log, which it opened
    beside its result, kept the run's folder from being removed; a log named elsewhere stays."""
    run = tmp_path / "gputopo-train-1-abc"
    run.mkdir()
    (run / "result-0.json").write_text("{}")
    (run / "result-0.tf.log").write_text("")
    monkeypatch.delenv("TMPDIR", raising=False)
    monkeypatch.setenv("GPUTOPO_TF_LOG", str(run / "result-0.tf.log"))
    orphan_cleanup(str(run / "result-0.json"))
    assert not run.exists()

    elsewhere = tmp_path / "mine.log"
    elsewhere.write_text("")
    run.mkdir()
    (run / "result-1.json").write_text("{}")
    monkeypatch.setenv("GPUTOPO_TF_LOG", str(elsewhere))
    orphan_cleanup(str(run / "result-1.json"))
    assert elsewhere.exists() and not run.exists()


def test_each_child_temporary_folder_is_private(tmp_path):
    folder = Path(supervise.child_temp_folder(tmp_path, 3))
    assert folder == tmp_path / "tmp-3" and (folder.stat().st_mode & 0o777) == 0o700
