"""Nothing exposed: a local training cluster's unauthenticated TensorFlow servers are reachable only
inside a private network namespace; where that is impossible the run is refused unless
--allow-exposed-ports (tests/unit/train/launch/test_exposure.py). The listening sockets are read from
/proc/net/tcp{,6} of the host's namespace and of the children's."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, assert_process_ends

from gputopo.train.launch.netns import PrivateNetwork, PrivateNetworkUnavailable

_LISTEN = "0A"


def _namespace_problem() -> str | None:
    try:
        PrivateNetwork.open().close()
    except PrivateNetworkUnavailable as exc:
        return str(exc)
    return None


NAMESPACE_PROBLEM = _namespace_problem()
needs_namespace = pytest.mark.skipif(
    NAMESPACE_PROBLEM is not None, reason=f"no private network namespace here: {NAMESPACE_PROBLEM}"
)


def _listeners(proc_net: Path) -> dict[int, tuple[str, int]]:
    """Socket inode -> (hex local address, port) of every LISTEN socket in one /proc/.../net dir."""
    found: dict[int, tuple[str, int]] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == _LISTEN:
                address, port = fields[1].split(":")
                found[int(fields[9])] = (address, int(port, 16))
    return found


def _socket_inodes(pid: int) -> set[int]:
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(int(target[8:-1]))
    return inodes


def _training_children(parent: int) -> list[int]:
    """Pids of the training children (``gputopo.train.child``) under ``parent``."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == parent and b"gputopo.train.child" in cmdline:
            pids.append(int(entry.name))
    return pids


def _interfaces(pid: int) -> list[str]:
    lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    return [line.split(":")[0].strip() for line in lines]


@needs_namespace
def test_a_wrapped_command_sees_only_loopback_and_its_listeners_stay_inside():
    network = PrivateNetwork.open()
    try:
        script = (
            "import socket, sys; s = socket.socket(); s.bind(('0.0.0.0', 0)); s.listen(); "
            "print(s.getsockname()[1], flush=True); sys.stdin.read()"
        )
        child = subprocess.Popen(network.wrap([sys.executable, "-c", script]), stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            port = int(child.stdout.readline())
            assert _interfaces(child.pid) == ["lo"]
            assert os.stat(f"/proc/{child.pid}/ns/net").st_ino == network.netns_inode != os.stat("/proc/self/ns/net").st_ino
            ours = _socket_inodes(child.pid)
            inside = {inode: where for inode, where in _listeners(Path(f"/proc/{child.pid}/net")).items() if inode in ours}
            assert [where[1] for where in inside.values()] == [port]  # listening on 0.0.0.0, of a loopback-only world
            assert not ours & set(_listeners(Path("/proc/net")))  # and not in the host's namespace
        finally:
            child.stdin.close()
            child.wait(timeout=10)
    finally:
        network.close()
    assert network.holder.returncode == 0


@pytest.mark.tf
@needs_namespace
def test_a_local_two_worker_run_listens_only_inside_its_private_namespace(tmp_path: Path):
    pytest.importorskip("tensorflow")
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    parent = subprocess.Popen(
        [sys.executable, "-m", "gputopo", "train", "--strategy", "multi-worker", "--local-workers", "2",
         "--cpu-devices", "2", "--steps-per-epoch", "100000", "--no-eval", "--no-checkpoint", "--json"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 180
        seen: dict[int, set[int]] = {}
        while time.monotonic() < deadline and parent.poll() is None:
            children = _training_children(parent.pid)
            if len(children) == 2:
                seen = {pid: set(_listeners(Path(f"/proc/{pid}/net"))) & _socket_inodes(pid) for pid in children}
                if all(seen.values()):
                    break
            time.sleep(0.5)
        assert len(seen) == 2 and all(seen.values()), "the workers never listened"
        host_listeners = set(_listeners(Path("/proc/net")))
        for pid, inodes in seen.items():
            assert not inodes & host_listeners, f"worker {pid} listens in the host's network namespace"
            assert _interfaces(pid) == ["lo"]
            assert os.stat(f"/proc/{pid}/ns/net").st_ino != os.stat("/proc/self/ns/net").st_ino
    finally:
        parent.send_signal(signal.SIGINT)
        try:
            parent.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            parent.kill()
            parent.communicate()


# `gputopo watch -- COMMAND` over the fake pynvml, as a whole process (signals reach it for real).
_WATCH_DRIVER = """
import sys
sys.path[:0] = [{repo!r}, {tests!r}]
from fake_nvml import FakeNvml
from gputopo.sources.host import nvml_counters
from gputopo.sources.reference import load_reference
nvml_counters.reader = lambda: nvml_counters.CounterReader(FakeNvml(load_reference("dgx-h100"), counters={{"gpus": {{}}}}))
sys.argv = ["gputopo", *sys.argv[1:]]
from gputopo.cli import main
main()
"""


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGKILL])
def test_a_watched_command_that_ignores_sigterm_dies_with_gputopo(tmp_path: Path, sig):
    # Review 3: on SIGHUP (a closed terminal or ssh) gputopo died at once, and on SIGKILL nothing
    # but the kernel's parent-death SIGTERM reached the command: one that ignores SIGTERM (a trap, a
    # training script saving) ran on without gputopo, unwatched.
    pid_file = tmp_path / "child.pid"
    driver = tmp_path / "driver.py"
    driver.write_text(_WATCH_DRIVER.format(repo=str(REPO), tests=str(REPO / "tests")))
    script = f"trap '' TERM HUP; echo $$ > {pid_file}; while :; do sleep 0.1; done"
    parent = subprocess.Popen([sys.executable, str(driver), "watch", "-i", "0.2", "--json", "--", "sh", "-c", script],
                              cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.1)
        child = int(pid_file.read_text())
        time.sleep(0.5)
        parent.send_signal(sig)
        parent.wait(30)
        assert_process_ends(child, 20, f"the watched command outlived gputopo ({sig.name})")  # (5 s grace, then SIGKILL)
    finally:
        if parent.poll() is None:
            parent.kill()
            parent.wait()


