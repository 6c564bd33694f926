"""A private network namespace for a local training cluster, so its gRPC servers cannot be reached
from other hosts.

TensorFlow's gRPC servers (multi-worker and parameter-server training) have no authentication and
listen on every interface: ``grpc_server_lib.cc`` binds ``0.0.0.0:<port>`` whatever host
``TF_CONFIG`` names, and ``ServerDef`` has no bind-address field. Anyone who can connect can run
operations in the trainer. A *local* cluster (``--local-workers N``, the in-process parameter
servers) only needs loopback, so its processes are started inside one new network namespace that
has nothing but its own ``lo``:

- ``PrivateNetwork.open()`` starts a holder (``python -m gputopo.train.launch.netns hold``) that unshares
  a user namespace (unless already root) and a network namespace, brings ``lo`` up and waits until
  the parent closes its standard input;
- ``PrivateNetwork.wrap(argv)`` prefixes a child's command with
  ``python -m gputopo.train.launch.netns enter <holder pid> --``, which joins the holder's namespaces
  (``setns``) and then ``exec``s the child: same pid, same parent, only loopback.

Where the kernel does not allow it (user namespaces disabled, seccomp), ``open`` raises
``PrivateNetworkUnavailable`` with the reason. Linux only; no TensorFlow.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import fcntl
import os
import signal
import socket
import struct
import subprocess
import sys
from typing import IO, Sequence

from gputopo.errors import EXIT_ENVIRONMENT, GputopoError

CLONE_NEWNET = 0x40000000
CLONE_NEWUSER = 0x10000000
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_PR_SET_PDEATHSIG = 1
MODULE = "gputopo.train.launch.netns"
READY = "ready"


class PrivateNetworkUnavailable(GputopoError):
    """The local cluster's servers cannot be put in a private network namespace here."""

    exit_code = EXIT_ENVIRONMENT


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="ascii") as handle:
        handle.write(text)


def bring_loopback_up() -> None:
    """``ip link set lo up`` without ``ip``: the SIOCSIFFLAGS ioctl on a socket of this namespace."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        request = struct.pack("16sH14x", b"lo", 0)
        flags = struct.unpack("16sH14x", fcntl.ioctl(sock.fileno(), _SIOCGIFFLAGS, request))[1]
        fcntl.ioctl(sock.fileno(), _SIOCSIFFLAGS, struct.pack("16sH14x", b"lo", flags | _IFF_UP))


def unshare_network() -> None:
    """Move this (single-threaded) process into a new network namespace with ``lo`` up; without
    root, inside a new user namespace that maps this user to itself."""
    libc = _libc()
    uid, gid = os.geteuid(), os.getegid()
    flags = CLONE_NEWNET if uid == 0 else CLONE_NEWNET | CLONE_NEWUSER
    _check(libc.unshare(flags), "unshare")
    if flags & CLONE_NEWUSER:
        _write("/proc/self/setgroups", "deny")
        _write("/proc/self/uid_map", f"{uid} {uid} 1")
        _write("/proc/self/gid_map", f"{gid} {gid} 1")
    bring_loopback_up()


def enter_namespaces(holder_pid: int) -> None:
    """Join the holder's user namespace (if it has its own) and then its network namespace."""
    libc = _libc()
    for kind, flag in (("user", CLONE_NEWUSER), ("net", CLONE_NEWNET)):
        path = f"/proc/{holder_pid}/ns/{kind}"
        if os.stat(path).st_ino == os.stat(f"/proc/self/ns/{kind}").st_ino:
            continue  # already there (root needs no user namespace)
        fd = os.open(path, os.O_RDONLY)
        try:
            _check(libc.setns(fd, flag), f"setns {kind}")
        finally:
            os.close(fd)


class PrivateNetwork:
    """One network namespace (with only loopback) shared by every process of a local cluster."""

    def __init__(self, holder: subprocess.Popen) -> None:
        self.holder = holder

    @classmethod
    def open(cls, python: str | None = None) -> PrivateNetwork:
        """Start the holder; ``PrivateNetworkUnavailable`` (with the kernel's reason) if it fails."""
        if not sys.platform.startswith("linux"):
            raise PrivateNetworkUnavailable("network namespaces need Linux")
        try:
            holder = subprocess.Popen(
                [python or sys.executable, "-m", MODULE, "hold"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            )  # fmt: skip
        except OSError as exc:
            raise PrivateNetworkUnavailable(f"cannot start the namespace holder: {exc.strerror or exc}") from None
        assert holder.stdout is not None
        line = holder.stdout.readline().strip()
        if line != READY:
            holder.kill()
            _, errors = holder.communicate()
            reason = line or (errors.strip().splitlines() or ["the namespace holder gave no answer"])[-1]
            raise PrivateNetworkUnavailable(reason)
        return cls(holder)

    @property
    def netns_inode(self) -> int:
        return os.stat(f"/proc/{self.holder.pid}/ns/net").st_ino

    def wrap(self, argv: Sequence[str], python: str | None = None) -> list[str]:
        """``argv`` run inside the namespace (the enter helper ``exec``s it: same pid)."""
        return [python or sys.executable, "-m", MODULE, "enter", str(self.holder.pid), "--", *argv]

    def close(self) -> None:
        """Let the holder go (the namespace lives on while any child is still in it)."""
        if self.holder.poll() is None:
            try:
                _close_quietly(self.holder.stdin)
                self.holder.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait()
        _close_quietly(self.holder.stdout)
        _close_quietly(self.holder.stderr)


def _close_quietly(stream: IO[str] | None) -> None:
    if stream is not None:
        try:
            stream.close()
        except OSError:
            pass


def _hold() -> int:
    try:
        unshare_network()
    except OSError as exc:
        sys.stdout.write(f"the kernel refused a private network namespace ({exc.strerror or exc})\n")
        return 1
    try:  # never outlive the parent
        _libc().prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        pass
    sys.stdout.write(READY + "\n")
    sys.stdout.flush()
    sys.stdin.read()  # until the parent closes the pipe (or dies)
    return 0


def _enter(args: list[str]) -> int:
    if len(args) < 3 or args[1] != "--" or not (args[0].isascii() and args[0].isdigit() and len(args[0]) < 12):
        sys.stderr.write(f"usage: python -m {MODULE} enter HOLDER_PID -- COMMAND...\n")
        return 2
    try:
        enter_namespaces(int(args[0]))
    except OSError as exc:
        sys.stderr.write(f"gputopo: error: cannot enter the private network namespace: {exc.strerror or exc}\n")
        return EXIT_ENVIRONMENT
    command = args[2:]
    try:
        os.execvp(command[0], command)
    except OSError as exc:
        sys.stderr.write(f"gputopo: error: cannot start {command[0]}: {exc.strerror or exc}\n")
    return 127


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["hold"]:
        return _hold()
    if args[:1] == ["enter"]:
        return _enter(args[1:])
    sys.stderr.write(f"usage: python -m {MODULE} hold | enter HOLDER_PID -- COMMAND...\n")
    return 2


if __name__ == "__main__":
    sys.exit(main())
