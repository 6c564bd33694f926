"""gputopo.train.launch.supervise: start, watch and stop training children (stand-in children, no TensorFlow)."""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path

import pytest

from gputopo.errors import InputError, TrainingFailed
from gputopo.train.checkpoints import latest_checkpoint_step
from gputopo.train.launch.supervise import describe_exit


def test_exit_descriptions_and_checkpoint_state(tmp_path: Path):
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(3) == "exited with status 3"
    assert latest_checkpoint_step(tmp_path) is None
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-40"\nall_model_checkpoint_paths: "ckpt-20"\nall_model_checkpoint_paths: "ckpt-40"\n'
    )
    assert latest_checkpoint_step(tmp_path) == 40


def _sleeper() -> list[str]:
    return [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_killed_worker_is_named_and_the_others_are_stopped(tmp_path: Path):
    from gputopo.train.launch.supervise import run_processes, start_child

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-30"\n')
    children = [
        start_child(f"worker {i} (127.0.0.1:{1000 + i})", _sleeper(), {}, tmp_path / f"r{i}.json") for i in range(2)
    ]
    children[1].process.send_signal(signal.SIGKILL)
    with pytest.raises(TrainingFailed) as caught:
        run_processes(children, str(tmp_path))
    message = str(caught.value)
    assert "worker 1 (127.0.0.1:1001) was killed by SIGKILL" in message
    assert "last checkpoint is at step 30" in message and "--resume" in message
    assert children[0].process.poll() is not None  # the survivor was stopped, not left hanging


def test_a_child_error_result_becomes_the_same_error(tmp_path: Path):
    from gputopo.train.launch.supervise import run_processes, start_child

    result = tmp_path / "r.json"
    script = (
        "import json, sys; json.dump({'error': 'an image in d could not be decoded', 'error_type': 'InputError'},"
        f" open({str(result)!r}, 'w')); sys.exit(2)"
    )
    child = start_child("training process", [sys.executable, "-c", script], {}, result)
    with pytest.raises(InputError, match="could not be decoded"):
        run_processes([child], None)
    ok = start_child("training process", [sys.executable, "-c", "pass"], {}, tmp_path / "none.json")
    assert run_processes([ok], None) == [{}]


def test_workers_that_never_start_are_named_after_the_startup_timeout(tmp_path: Path):
    from gputopo.train.workers import free_local_ports
    from gputopo.train.launch.supervise import run_processes, start_child

    (silent_port,) = free_local_ports(1)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        answering = f"127.0.0.1:{listening.getsockname()[1]}"
        child = start_child("worker 0", _sleeper(), {}, tmp_path / "r0.json")
        with pytest.raises(TrainingFailed, match=rf"^worker 127.0.0.1:{silent_port} does not answer after 0.5 s"):
            run_processes([child], None, startup_timeout_s=0.5, peers=[answering, f"127.0.0.1:{silent_port}"])
    assert child.process.returncode == -signal.SIGKILL  # not left waiting for a cluster that never forms


def test_startup_timeout_does_not_apply_once_started(tmp_path: Path):
    import time

    from gputopo.train.config import started_marker
    from gputopo.train.launch.supervise import run_processes, start_child

    result = tmp_path / "r.json"
    script = f"import time, pathlib; pathlib.Path({str(started_marker(result))!r}).touch(); time.sleep(1.0)"
    child = start_child("worker 0", [sys.executable, "-c", script], {}, result)
    # The timeout counts from run_processes; wait for the child to have started first (a Python
    # start-up on a loaded machine can take longer than the timeout, which this test is not about).
    deadline = time.monotonic() + 30
    while not child.started and child.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.started
    assert run_processes([child], None, startup_timeout_s=0.3, peers=["127.0.0.1:1"]) == [{}]


_CHILD_UNTIL_SIGNALLED = """
import pathlib, signal, sys, time
from gputopo.train.lifeline import bind_to_parent
received = []
def stop(signum, frame):
    received.append(signal.Signals(signum).name)
    time.sleep(0.5)  # time for a second signal, if any, to arrive
    pathlib.Path(sys.argv[1]).write_text(" ".join(received))
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
bind_to_parent(lambda: None)
pathlib.Path(sys.argv[1] + ".ready").touch()  # its handlers are in place
time.sleep(120)
"""


_PARENT = """
import sys
from pathlib import Path
from gputopo.train.launch.supervise import run_processes, start_child
tmp = Path(sys.argv[1])
child = start_child("training process", [sys.executable, "-c", sys.argv[2], str(tmp / "stopped-by")], {}, tmp / "r.json")
print(child.process.pid, flush=True)
run_processes([child], None)
"""


def _stopped_child(tmp_path: Path, parent_signal: int, whole_group: bool = False) -> tuple[int, str]:
    """Start a parent that runs one child, signal the parent (or, as a terminal's Ctrl-C does, its
    whole process group); return the parent's status and the signals that reached the child (the
    child must not outlive its parent)."""
    import os
    import subprocess

    ready = tmp_path / "stopped-by.ready"
    ready.unlink(missing_ok=True)
    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path), _CHILD_UNTIL_SIGNALLED],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        child_pid = int(parent.stdout.readline())
        # Signalled only once its handlers are in place (a fixed wait flaked on a loaded machine:
        # Python had not started yet, and the default SIGINT action ended the child).
        _poll(lambda: ready.exists() or parent.poll() is not None, 60.0)
        assert ready.exists() and parent.poll() is None, "the child never got ready"
        if whole_group:
            os.killpg(parent.pid, parent_signal)
        else:
            parent.send_signal(parent_signal)
        parent.wait(timeout=60)
        _poll(lambda: not _running(child_pid), 60.0)
        alive = _running(child_pid)
        if alive:
            os.kill(child_pid, signal.SIGKILL)
        assert not alive, "the training child outlived its parent"
    finally:
        parent.kill()
        parent.wait()
    return parent.returncode, (tmp_path / "stopped-by").read_text()


def _poll(done, deadline_s: float) -> None:
    """Wait until ``done()``, checking every 20 ms, for at most ``deadline_s`` (a bound, not a timing)."""
    import time

    deadline = time.monotonic() + deadline_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.02)


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie that no one has reaped yet has ended)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG are Linux's")
def test_a_terminated_or_killed_parent_leaves_no_training_child_behind(tmp_path: Path):
    # SIGTERM (kill) or SIGHUP (terminal closed) to gputopo: forwarded as Ctrl-C, the child saves and stops.
    for parent_signal in (signal.SIGTERM, signal.SIGHUP):
        (tmp_path / "stopped-by").unlink(missing_ok=True)
        assert _stopped_child(tmp_path, parent_signal) == (0, "SIGINT")
    # SIGKILL cannot be caught: the child is told by the kernel (SIGTERM) that its parent died.
    (tmp_path / "stopped-by").unlink(missing_ok=True)
    assert _stopped_child(tmp_path, signal.SIGKILL) == (-signal.SIGKILL, "SIGTERM")


def test_ctrl_c_in_the_terminal_reaches_the_training_child_once(tmp_path: Path):
    # The terminal signals its whole foreground process group; the parent forwards Ctrl-C itself, so
    # a child in that group would get two SIGINTs, and a second one means "stop at once".
    assert _stopped_child(tmp_path, signal.SIGINT, whole_group=True) == (0, "SIGINT")



_PARENT_SIGNALLED_AFTER_THE_RUN = """
import os, signal, sys
from pathlib import Path
from gputopo.train.launch.supervise import run_processes, start_child, summary_kept
tmp = Path(sys.argv[1])
child = start_child("training process", [sys.executable, "-c", "pass"], {}, tmp / "r.json")
with summary_kept():
    results = run_processes([child], None)
    os.kill(os.getpid(), signal.SIGTERM)  # srun ending the step: another task exited 130 first
    os.kill(os.getpid(), signal.SIGHUP)
    print("summary", results, flush=True)
os.kill(os.getpid(), signal.SIGTERM)  # outside, the handler in force before is back
print("not reached", flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_a_stop_signal_after_the_children_ended_waits_for_the_summary(tmp_path: Path):
    import subprocess

    parent = subprocess.run([sys.executable, "-c", _PARENT_SIGNALLED_AFTER_THE_RUN, str(tmp_path)],
                            capture_output=True, text=True, timeout=60)  # fmt: skip
    assert parent.stdout == "summary [{}]\n", parent.stderr
    assert parent.returncode == -signal.SIGTERM


_CHILD_STUCK_AFTER_ITS_RESULT = """
import json, pathlib, signal, sys, time
signal.signal(signal.SIGINT, signal.SIG_IGN)  # stuck in TensorFlow's destructors, say
pathlib.Path(sys.argv[1]).write_text(json.dumps({"status": "interrupted", "steps": 7}))
pathlib.Path(sys.argv[1] + ".ready").touch()
time.sleep(120)
"""

_PARENT_OF_A_STUCK_CHILD = """
import json, sys
from pathlib import Path
from gputopo.train.launch.supervise import run_processes, start_child
tmp = Path(sys.argv[1])
child = start_child("training process", [sys.executable, "-c", sys.argv[2], str(tmp / "r.json")], {}, tmp / "r.json")
print(json.dumps(run_processes([child], None)), flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_a_second_stop_kills_a_child_that_wrote_its_result_and_keeps_the_result(tmp_path: Path):
    """Two SIGTERMs (the test's, then srun ending the step) while the child, its result written, has
    not exited yet: killed at the second, it is not "a worker killed by SIGKILL"; its result stands."""
    import subprocess
    import time

    parent = subprocess.Popen([sys.executable, "-c", _PARENT_OF_A_STUCK_CHILD, str(tmp_path), _CHILD_STUCK_AFTER_ITS_RESULT],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    try:
        _poll(lambda: (tmp_path / "r.json.ready").exists() or parent.poll() is not None, 60.0)
        assert parent.poll() is None, parent.stderr.read()
        parent.send_signal(signal.SIGTERM)
        time.sleep(0.5)
        parent.send_signal(signal.SIGTERM)
        out, err = parent.communicate(timeout=60)
    finally:
        parent.kill()
        parent.wait()
    assert parent.returncode == 0, err
    assert json.loads(out) == [{"status": "interrupted", "steps": 7}]


_PARENT_STUCK_ON_ITS_SUMMARY = """
import sys
from pathlib import Path
from gputopo.train.launch import supervise
supervise.LATE_STOP_GRACE_S = 1.0
tmp = Path(sys.argv[1])
child = supervise.start_child("training process", [sys.executable, "-c", "pass"], {}, tmp / "r.json")
with supervise.summary_kept():
    supervise.run_processes([child], None)
    (tmp / "ended").touch()
    while True:  # the summary's write, into a pipe no one reads (a terminal on Ctrl-S, `| less`)
        sys.stdout.write("x" * 65536)
        sys.stdout.flush()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="POSIX signals")
def test_a_late_stop_signal_ends_a_parent_stuck_writing_its_summary(tmp_path: Path):
    # A SIGTERM after the children ended waits for the summary, but not forever: `timeout`,
    # systemd or a user's `kill` must still end a parent whose output blocks.
    import subprocess
    import time

    parent = subprocess.Popen([sys.executable, "-c", _PARENT_STUCK_ON_ITS_SUMMARY, str(tmp_path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline_s = time.monotonic() + 60
        while not (tmp_path / "ended").exists() and time.monotonic() < deadline_s:
            time.sleep(0.05)
        time.sleep(0.3)
        parent.send_signal(signal.SIGTERM)
        try:
            code = parent.wait(timeout=20)
        except subprocess.TimeoutExpired:
            code = None
    finally:
        parent.kill()
        parent.wait()
    assert code == 128 + signal.SIGTERM, "a SIGTERM was ignored for good while the summary's write blocked"
