"""Where the workers of a multi-worker job are: addresses, free ports, ``TF_CONFIG``.

Pure Python, no TensorFlow: the parent checks addresses before starting anything, the child
builds its ``TF_CONFIG`` from them.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Mapping, Sequence

from gputopo.errors import InputError
from gputopo.notation import parse_host_port, parse_json_object

LOOPBACK = "127.0.0.1"
MAX_TF_CONFIG_CHARS = 1 << 20


def check_own_address(address: str) -> None:
    """A worker must be able to listen on its own address: a clear error if the port is taken."""
    host, port = parse_address(address)
    if host in ("127.0.0.1", "localhost", "0.0.0.0") or host == socket.gethostname():
        check_port_free("127.0.0.1" if host == "localhost" else host, port)


def parse_address(text: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)`` with a clear error on anything else (``notation.parse_host_port``)."""
    return parse_host_port(text)


def parse_workers(text: str) -> list[str]:
    """``"h1:p1,h2:p2"`` -> validated addresses (``--workers``)."""
    addresses = [part.strip() for part in text.split(",") if part.strip()]
    if not addresses:
        raise InputError("--workers is empty; give host:port for every worker, e.g. 10.0.0.1:2222,10.0.0.2:2222")
    for address in addresses:
        parse_address(address)
    if len(set(addresses)) != len(addresses):
        raise InputError("--workers lists the same address twice")
    return addresses


def tf_config(workers: Sequence[str], task_index: int, ps: Sequence[str] = (), task_type: str = "worker") -> str:
    """The ``TF_CONFIG`` JSON that MultiWorkerMirroredStrategy reads to find its cluster and itself."""
    cluster: dict[str, list[str]] = {"worker": list(workers)}
    if ps:
        cluster["ps"] = list(ps)
    return json.dumps({"cluster": cluster, "task": {"type": task_type, "index": task_index}})


def parse_tf_config(text: str, what: str = "TF_CONFIG", advice: str = "") -> dict[str, Any]:
    """``TF_CONFIG`` text -> its JSON object; anything else is one ``InputError`` naming ``what``
    (``advice`` ends the message: what the user can do about it)."""
    if len(text) > MAX_TF_CONFIG_CHARS:
        raise InputError(f"{what} is longer than {MAX_TF_CONFIG_CHARS} characters{advice}")
    value = parse_json_object(text, what, advice)
    problem = tf_config_problem(value)
    if problem:
        raise InputError(f"{what}: {problem}{advice}")
    return value


def tf_config_problem(value: dict[str, Any]) -> str | None:
    """What TensorFlow's ``TFConfigClusterResolver`` would fail on (with a long traceback, from
    the child) in a ``TF_CONFIG`` object, in a few words; None when its shape is right."""
    cluster = value.get("cluster", {})
    if not isinstance(cluster, dict):
        return f"cluster must be an object of job name -> addresses, got {json.dumps(cluster)[:40]}"
    for job, tasks in cluster.items():
        addresses = list(tasks.values()) if isinstance(tasks, dict) else tasks
        if not isinstance(addresses, list) or not all(isinstance(a, str) for a in addresses):
            return f"cluster.{str(job)[:40]} must be a list of host:port strings"
        if isinstance(tasks, dict) and not all(str(k).isascii() and str(k).isdigit() for k in tasks):
            return f"cluster.{str(job)[:40]} must be indexed by task numbers"
    task = value.get("task", {})
    if not isinstance(task, dict):
        return f"task must be an object with type and index, got {json.dumps(task)[:40]}"
    if "type" in task and not isinstance(task["type"], str):
        return "task.type must be a string"
    index = task.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < 2**31:
        return f"task.index must be a task number, got {json.dumps(index)[:40]}"
    for key in ("rpc_layer", "environment"):
        if key in value and not isinstance(value[key], str):
            return f"{key} must be a string"
    return None


def check_tf_config_env(environ: Mapping[str, str] | None = None) -> None:
    """A ``TF_CONFIG`` in the environment must be a JSON object: TensorFlow parses it (and fails
    with a traceback) even for a run that builds its own, or none."""
    text = (os.environ if environ is None else environ).get("TF_CONFIG")
    if text is not None and text.strip():
        parse_tf_config(text, "TF_CONFIG in the environment", "; fix it or unset it")


def check_port_free(host: str, port: int) -> None:
    """Raise ``InputError`` if ``port`` on ``host`` cannot be bound (another process holds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As gRPC does: connections of an earlier run lingering in TIME_WAIT do not block the port,
        # only a process listening on it does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            raise InputError(
                f"port {port} on {host} is in use ({exc.strerror or exc}); pick another port for this worker"
            ) from None


def free_local_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct ports that were free on ``host`` a moment ago (for local workers)."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((host, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def address_answers(address: str, timeout_s: float = 1.0) -> bool:
    """Whether something accepts TCP connections at ``host:port``."""
    host, port = parse_address(address)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False
