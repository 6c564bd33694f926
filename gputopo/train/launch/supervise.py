"""The parent's side of ``gputopo train``: start the training children, watch them, stop them.

``run_processes`` starts nothing itself: it forwards Ctrl-C to the children, and when one dies kills
the rest (a synchronous cluster missing a member only hangs) and says which one died, how, and where
the last checkpoint is. ``run_training`` starts one plan's processes and returns the chief's
summary; ``gputopo.train.lifeline`` binds each child to it (the child's side is there too).
No TensorFlow is imported on this path.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from gputopo.errors import InputError, TrainingFailed
from gputopo.train.checkpoints import remove_leftovers, resume_hint
from gputopo.train.workers import address_answers
from gputopo.train.config import INTERRUPTED_EXIT_CODE, TrainConfig, started_marker
from gputopo.train.lifeline import (
    CHILD_TEMP_PREFIX,
    PARENT_FD_ENV,
    TEMP_PREFIX,
    die_with,
    hold_run_folder,
    libc_prctl,
    sweep_stale_folders,
)
from gputopo.train.launch.plan import ProcessSpec
from gputopo.train.native_log import last_native_error, log_env

KILL_GRACE_S = 5.0
POLL_S = 0.1
EXIT_GRACE_S = 10.0  # a child that wrote its result and has not exited by then is stuck (TF's destructors): killed


@dataclass
class ChildProcess:
    """One training process the parent started, and how to name it in messages."""

    label: str  # "training process", "worker 1 (127.0.0.1:23456)"
    process: subprocess.Popen
    result_file: Path
    liveness_fd: int = -1  # the write end of the child's parent-liveness pipe (closed when the parent dies)
    result_seen_s: float | None = None  # when its result file appeared while it still ran
    killed_after_result: bool = False  # stuck after writing its result: killed, its result stands

    def close(self) -> None:
        if self.liveness_fd >= 0:
            os.close(self.liveness_fd)
            self.liveness_fd = -1

    @property
    def started(self) -> bool:
        return started_marker(self.result_file).exists()


def start_child(
    label: str, command: Sequence[str], env: dict[str, str], result_file: Path, pass_fds: Sequence[int] = ()
) -> ChildProcess:
    """Start one training child with ``env`` added to this process's environment (and ``pass_fds``
    open in it: the checkpoint folder's lock).

    The child gets a session of its own, so a Ctrl-C in the terminal reaches only the parent, which
    forwards it once: in the terminal's process group the child would get it twice (the terminal's
    and the forwarded one), and a second SIGINT means "stop at once", mid-step.

    It is bound to this process twice over: ``PR_SET_PDEATHSIG`` (SIGTERM when the parent dies, set
    before ``exec``) and the read end of a pipe whose only write end the parent holds
    (``PARENT_FD_ENV``): the kernel closes it when the parent dies however it dies, and the child's
    watcher (``gputopo.train.lifeline.bind_to_parent``) stops it, then ends it after ``ORPHAN_GRACE_S``.
    """
    read_fd, write_fd = os.pipe()  # both non-inheritable: only pass_fds reach the child
    child_env = dict(os.environ)
    child_env.update(env)
    child_env[PARENT_FD_ENV] = str(read_fd)
    try:
        process = subprocess.Popen(
            list(command), env=child_env, stdin=subprocess.DEVNULL, start_new_session=True,
            pass_fds=(*pass_fds, read_fd), preexec_fn=die_with(os.getpid(), libc_prctl()),
        )  # fmt: skip
    except OSError as exc:
        os.close(write_fd)
        raise TrainingFailed(f"cannot start the {label} ({command[0]}): {exc.strerror or exc}") from None
    finally:
        os.close(read_fd)
    return ChildProcess(label, process, result_file, liveness_fd=write_fd)


def read_result(child: ChildProcess) -> dict[str, Any] | None:
    try:
        return json.loads(child.result_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _stop(children: Sequence[ChildProcess], sig: int) -> None:
    for child in children:
        if child.process.poll() is None:
            try:
                child.process.send_signal(sig)
            except ProcessLookupError:
                pass


def _kill_after_grace(children: Sequence[ChildProcess]) -> None:
    deadline_s = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline_s and any(c.process.poll() is None for c in children):
        time.sleep(POLL_S)
    _stop(children, signal.SIGKILL)
    for child in children:
        child.process.wait()


STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)
LATE_STOP_GRACE_S = 20.0  # a stop signal after the children ended: the summary's time to be written
_summaries_kept: list[bool] = []  # inside ``summary_kept()``: stop signals after the children ended wait
_late_stops: list[tuple[int, float]] = []  # (signal, monotonic time) of each stop signal since then
_late_watch: list[threading.Event] = []  # set when ``summary_kept()`` is left: the watchdog ends


def _stop_late(signum: int, frame: Any) -> None:
    """A stop signal once the children have ended: noted only (no lock is taken in a handler);
    ``_end_after_grace`` gives the summary ``LATE_STOP_GRACE_S`` to be written."""
    _late_stops.append((signum, time.monotonic()))


def _end_after_grace(done: threading.Event) -> None:
    """The watchdog of the summary's window: ``LATE_STOP_GRACE_S`` after the first late stop signal,
    the process exits as the signal asked (128 + its number), whatever the main thread is blocked in
    (a write to a full pipe, a terminal stopped with Ctrl-S, a hung NVML call). Ignored for good, a
    SIGTERM from ``timeout``, systemd or a user would never end it."""
    while not done.wait(POLL_S):
        if _late_stops and time.monotonic() - _late_stops[0][1] > LATE_STOP_GRACE_S:
            os._exit(128 + _late_stops[0][0])


@contextlib.contextmanager
def summary_kept() -> Iterator[None]:
    """Around one run and the writing of its summary: once the training children have ended, SIGTERM
    and SIGHUP no longer end the parent before the summary (or the failure's one line) is written.

    Nothing is left to stop by then, and the run's outcome is decided. Under Slurm this is the
    common case, not a corner: ``srun --kill-on-bad-exit`` ends the step as soon as the first task
    exits with 130 after a stop, by SIGTERM to every other task (SIGKILL only ``KillWait`` later),
    and the task that exits a moment later lost its summary. Such a signal waits
    ``LATE_STOP_GRACE_S`` at most (``_end_after_grace``). The handlers in force before are back on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    _summaries_kept.append(True)
    try:
        yield
    finally:
        _summaries_kept.pop()
        while _late_watch:
            _late_watch.pop().set()
        _late_stops.clear()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class _StopSignalsAsInterrupt:
    """While active, SIGTERM and SIGHUP (``kill``, a closed terminal) reach the parent as Ctrl-C does.

    Their default action ends the parent at once, leaving its training children running with no
    one to read their results; as a KeyboardInterrupt they are forwarded like Ctrl-C instead. On
    leaving (every child has ended), they wait for the summary inside ``summary_kept()`` (``_end_after_grace``).
    """

    def __enter__(self) -> _StopSignalsAsInterrupt:
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                self._previous[sig] = signal.signal(sig, self._raise)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        if self._previous and _summaries_kept and not _late_watch:
            done = threading.Event()
            _late_watch.append(done)
            threading.Thread(target=_end_after_grace, args=(done,), name="gputopo-late-stop", daemon=True).start()
        for sig, handler in self._previous.items():
            signal.signal(sig, _stop_late if _summaries_kept else handler)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt


def run_processes(
    children: Sequence[ChildProcess],
    checkpoint_dir: str | None,
    startup_timeout_s: float | None = None,
    peers: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Wait for every child; return their results, or raise one clear error for the first failure.

    Ctrl-C is forwarded (each child saves a checkpoint and exits 130); a second Ctrl-C kills them.
    SIGTERM and SIGHUP to the parent are forwarded the same way (see ``_StopSignalsAsInterrupt``).
    When one child fails, the others are stopped: a synchronous cluster cannot go on without it.
    With ``startup_timeout_s``, children that have not finished their first step by then are
    stopped, and the error names those of ``peers`` (host:port) that do not answer.
    """
    with _StopSignalsAsInterrupt():
        return _wait_for(children, checkpoint_dir, startup_timeout_s, peers)


def _wait_for(
    children: Sequence[ChildProcess],
    checkpoint_dir: str | None,
    startup_timeout_s: float | None,
    peers: Sequence[str],
) -> list[dict[str, Any]]:
    interrupts = 0
    failed: ChildProcess | None = None
    deadline_s = time.monotonic() + startup_timeout_s if startup_timeout_s else None
    while True:
        try:
            if deadline_s is not None and time.monotonic() > deadline_s:
                if all(c.started or c.process.poll() is not None for c in children):
                    deadline_s = None
                else:
                    failure = _startup_failure(startup_timeout_s or 0.0, peers)  # probe before stopping ours
                    _stop(children, signal.SIGKILL)
                    for child in children:
                        child.process.wait()
                    raise failure
            codes = [_exit_code(c) for c in children]
            failures = [c for c, code in zip(children, codes) if code not in (None, 0, INTERRUPTED_EXIT_CODE)]
            # A child killed by a signal is the cause; others failing at the same time are its victims.
            failed = min(failures, key=lambda c: c.process.returncode >= 0) if failures else None
            if failed is not None or all(code is not None for code in codes):
                break
            if INTERRUPTED_EXIT_CODE in codes and not interrupts:  # one stopped on a signal: stop the rest the same way
                interrupts = 1
                _stop(children, signal.SIGINT)
            time.sleep(POLL_S)
        except KeyboardInterrupt:
            interrupts += 1
            _stop(children, signal.SIGINT if interrupts == 1 else signal.SIGKILL)
    if failed is not None:
        others = [c for c in children if c is not failed]
        _stop(others, signal.SIGTERM)
        _kill_after_grace(others)
        raise _failure(failed, checkpoint_dir)
    results = [read_result(c) or {} for c in children]
    for child, result in zip(children, results):
        if "error" in result:  # e.g. stopped by Ctrl-C before training began
            raise _failure(child, checkpoint_dir)
    return results


def _exit_code(child: ChildProcess) -> int | None:
    """The child's exit status; a child still running ``EXIT_GRACE_S`` after it wrote its result
    (stuck in TensorFlow's destructors after a save) is killed, and its result stands. So it does
    for a child that ended otherwise after its summary was written (a second stop killed it, a late
    signal): the summary is written last, after every save, so the run's outcome is in it."""
    code = child.process.poll()
    if code is not None:
        if code not in (0, INTERRUPTED_EXIT_CODE):
            result = read_result(child) or {}
            if "status" in result and "error" not in result:
                return INTERRUPTED_EXIT_CODE if result["status"] == "interrupted" else 0
        return code
    if not child.result_file.exists():
        return None
    now_s = time.monotonic()
    if child.result_seen_s is None:
        child.result_seen_s = now_s
    elif now_s - child.result_seen_s > EXIT_GRACE_S and read_result(child) is not None:
        child.killed_after_result = True
        child.process.kill()
        child.process.wait()
        return _exit_code(child)
    return None


def _startup_failure(timeout_s: float, peers: Sequence[str]) -> TrainingFailed:
    silent = [address for address in peers if not address_answers(address)]
    if silent:
        who = f"worker {silent[0]} does not answer" if len(silent) == 1 else f"workers {', '.join(silent)} do not answer"
    else:
        who = "the workers did not all join"
    return TrainingFailed(
        f"{who} after {timeout_s:g} s (is it started, with the same --workers list and a reachable address?)"
    )


def native_log_of(result_file: Path) -> Path:
    """Where a child's TensorFlow native log goes: beside its result, in the run's private folder."""
    return result_file.with_name(result_file.stem + ".tf.log")


def _failure(child: ChildProcess, checkpoint_dir: str | None) -> Exception:
    result = read_result(child) or {}
    if "error" in result:
        if result.get("error_type") == "InputError":
            return InputError(result["error"])
        return TrainingFailed(result["error"])
    said = last_native_error(native_log_of(child.result_file))
    tf_said = f"; TensorFlow's last error: {said}" if said else ""
    return TrainingFailed(f"the {child.label} {describe_exit(child.process.returncode)}{tf_said}; "
                          f"{resume_hint(checkpoint_dir)}")


def describe_exit(returncode: int) -> str:
    """``-9`` -> ``"was killed by SIGKILL"``; ``3`` -> ``"exited with status 3"``."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"was killed by {name}"
    return f"exited with status {returncode}"


def child_temp_folder(run_folder: Path, index: int) -> str:
    """A training child's own temporary folder (its ``TMPDIR``), made 0700 inside the run's folder:
    what TensorFlow writes there (AutoGraph's ``__autograph_generated_file*.py``, a few per run) goes
    with the run's folder, whichever way the run ends (``lifeline.CHILD_TEMP_PREFIX``)."""
    folder = run_folder / f"{CHILD_TEMP_PREFIX}{index}"
    os.mkdir(folder, 0o700)
    return str(folder)


def run_training(
    processes: Sequence[ProcessSpec],
    config: TrainConfig,
    wrap: Callable[[Sequence[str]], list[str]] | None = None,
    pass_fds: Sequence[int] = (),
) -> dict[str, Any]:
    """Start the training process(es), wait for them, and return the chief's summary.

    ``wrap`` prefixes each child's command (``exposure.NetworkGuard.wrap``: a private network
    namespace, whose workers the parent cannot probe); ``pass_fds`` stay open in every child.
    With several workers the summary also lists every worker's weight fingerprint, so a user (and
    the tests) can see that synchronous training kept them identical.
    """
    sweep_stale_folders()
    with tempfile.TemporaryDirectory(prefix=f"{TEMP_PREFIX}{os.getpid()}-") as tmp:
        children: list[ChildProcess] = []
        run_lock = hold_run_folder(tmp)  # another PID namespace's sweep sees the run alive by it
        try:
            for i, spec in enumerate(processes):
                result_file = Path(tmp) / f"result-{i}.json"
                command = spec.command(str(result_file))
                env = {**spec.env, "TMPDIR": child_temp_folder(Path(tmp), i),
                       **log_env(native_log_of(result_file), {**os.environ, **spec.env})}
                children.append(start_child(spec.label, wrap(command) if wrap else command, env, result_file, pass_fds))
            multi_worker = config.strategy == "multi-worker"
            results = run_processes(
                children,
                config.checkpoint_dir,
                startup_timeout_s=config.startup_timeout_s if multi_worker else None,
                peers=processes[0].config.workers if multi_worker and wrap is None else (),
            )
        finally:
            for child in children:  # never leave a training process behind
                if child.process.poll() is None:
                    child.process.kill()
                    child.process.wait()
                child.close()
            remove_leftovers(config.checkpoint_dir)  # TF's ckpt-N_temp of a killed save, worker copies
            os.close(run_lock)
    summary = dict(results[0])
    if len(results) > 1:
        summary["devices"] = [device for result in results for device in result.get("devices", [])]
        summary["worker_weights_sha256"] = [r.get("weights_sha256") for r in results]
        summary["worker_steps"] = [r.get("steps") for r in results]
    return summary


def run_scaling(
    sizes: Sequence[int], specs: Sequence[ProcessSpec], announce: Callable[[int, ProcessSpec], None] | None = None
) -> tuple[list[tuple[int, dict[str, Any]]], bool]:
    """One ``--scaling`` run per device count, one after the other: ``([(count, summary)], interrupted)``.

    Ctrl-C stops the whole table, not one run of it.
    """
    results: list[tuple[int, dict[str, Any]]] = []
    for count, spec in zip(sizes, specs):
        if announce is not None:
            announce(count, spec)
        summary = run_training([spec], spec.config)
        if summary.get("status") == "interrupted":
            return results, True
        results.append((count, summary))
    return results, False
