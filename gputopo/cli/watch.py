"""`gputopo watch`: live traffic and health of every GPU link, alone or while a command runs.

Reading is ``gputopo.sources.host.nvml_counters``, rates and findings ``gputopo.analysis.watch.watch`` and
``watch_summary``, the screens ``gputopo.views.watch`` / ``watch_prometheus``. ``-- COMMAND ...``
runs the command as a child bound to this process's life (``gputopo.train.lifeline.die_with``:
SIGTERM when gputopo dies), samples while it runs, prints a summary and exits with its exit code.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from typing import Annotated, Any, Optional

import typer

from gputopo.cli import FromOption, JsonOption, command
from gputopo.errors import InputError, Terminated

MAX_INTERVAL_S = 3600.0
MIN_INTERVAL_S = 0.05
STOP_GRACE_S = 5.0


@command("watch", context_settings={"allow_interspersed_args": False})
def watch_command(
    argv: Annotated[Optional[list[str]], typer.Argument(
        help="A command to run and watch (after --): sampling ends when it ends; gputopo exits with its code.",
        metavar="[-- COMMAND ...]")] = None,
    interval: Annotated[float, typer.Option("--interval", "-i", help="Seconds between samples.", metavar="S")] = 1.0,
    count: Annotated[Optional[int], typer.Option("--count", "-c", help="Stop after N intervals (default: until "
                                                 "Ctrl-C, or until the command ends).", metavar="N")] = None,
    json_output: JsonOption = False,
    prometheus: Annotated[Optional[str], typer.Option(
        "--prometheus", help="Write node_exporter textfile metrics to FILE (atomically) each interval.",
        metavar="FILE")] = None,
    planned_gpus: Annotated[Optional[str], typer.Option(
        "--planned-gpus", help="The GPUs a plan chose (as `recommend` printed them, e.g. 0,1,2,3): the summary "
        "says whether their NVLinks carried the traffic or PCIe did.", metavar="LIST")] = None,
    plan_file: Annotated[Optional[str], typer.Option(
        "--plan", help="The plan file `recommend --save` wrote: this host's GPUs in it are the planned ones.",
        metavar="FILE")] = None,
    gpus: Annotated[Optional[int], typer.Option(
        "--gpus", "-n", help="The plan is the group of N GPUs `recommend` picks (of --from, else this host).",
        metavar="N")] = None,
    from_files: FromOption = None,
) -> None:
    """Live NVLink and PCIe traffic (GB/s, % of line rate) and link errors of every GPU, from NVML's
    counters; with `-- COMMAND` a summary of what the command moved over which links."""
    from gputopo.notation import parse_gpu_list

    if not MIN_INTERVAL_S <= interval <= MAX_INTERVAL_S:
        raise InputError(f"--interval must be between {MIN_INTERVAL_S} and {MAX_INTERVAL_S:g} seconds (got {interval:g})")
    if count is not None and count < 1:
        raise InputError(f"--count must be 1 or more (got {count})")
    given = [flag for flag, value in (("--planned-gpus", planned_gpus), ("--plan", plan_file), ("--gpus", gpus))
             if value is not None]
    if len(given) > 1:
        raise InputError(f"{' and '.join(given)} each name the plan; give one of them")
    if from_files and not given:
        raise InputError("--from is the topology a plan is judged on; give --gpus K (or --plan, --planned-gpus)")
    planned = None
    if planned_gpus is not None:
        planned = _Plan(parse_gpu_list(planned_gpus, "--planned-gpus"), "--planned-gpus")
    elif plan_file is not None:
        planned = _plan_of_file(plan_file)
    if given:
        planned = _with_topology(planned, gpus, list(from_files or ()))
    if prometheus is not None:  # a bad target refused before anything starts (review: the command ran first)
        from gputopo.fileio import write_target

        write_target(prometheus)
    code = _watch(list(argv or []), interval, count, json_output, prometheus, planned)
    if code:
        raise typer.Exit(code)


class _Plan:
    """The planned GPUs, where they came from, and the topology their causes are read on (or None)."""

    def __init__(self, gpus: list[int], source: str, topology: Any = None) -> None:
        self.gpus, self.source, self.topology = gpus, source, topology


def _plan_of_file(path: str) -> _Plan:
    """This host's GPUs in a plan file: its only host's, else the entries named as this host is."""
    import socket

    from gputopo.fileio import read_text_input
    from gputopo.model.cluster_plan import plan_from_json

    plan = plan_from_json(read_text_input(path, "plan file"), path)
    names = plan.host_names
    if len(names) == 1:
        host = names[0]
    else:
        me = socket.gethostname()
        host = next((n for n in names if n in (me, me.split(".")[0])), None)
        if host is None:
            shown = ", ".join(names[:8]) + (" ..." if len(names) > 8 else "")
            raise InputError(f"plan file {path} has no entry for this host ({me}; its hosts: {shown}); "
                             "give this host's GPUs with --planned-gpus")
    gpus = sorted({g for entry in plan.hosts if entry.host == host for g in entry.gpus})
    return _Plan(gpus, f"plan file {path} (host {host})")


def _with_topology(planned: _Plan | None, gpus: int | None, from_files: list[str]) -> _Plan:
    """The topology the causes are read on (``--from``, else this host's through NVML when --gpus
    asks recommend), and with ``--gpus K`` the group recommend picks of every GPU, busy or not (the
    watched job is what makes them busy)."""
    from gputopo.analysis import topology_for
    from gputopo.sources import TopologyRequest

    if planned is not None and not from_files:
        return planned
    topology = topology_for(TopologyRequest(from_files=tuple(from_files)))
    if planned is not None:
        planned.topology = topology
        return planned
    from gputopo.analysis.recommend import recommend

    assert gpus is not None
    picked = recommend(topology, gpus, alternatives=0).groups[0].gpus
    where = f" of {from_files[0]}" if len(from_files) == 1 else ""
    return _Plan(sorted(picked), f"recommend --gpus {gpus}{where}", topology)


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _start(argv: list[str], json_output: bool) -> subprocess.Popen[bytes]:
    """The watched command, bound to this process (it gets SIGTERM when gputopo dies); with --json
    its standard output goes to standard error, so gputopo's is JSON only."""
    from gputopo.train.lifeline import die_with, libc_prctl

    stdout = None
    if json_output:
        try:
            stdout = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # stderr replaced (a test runner): the process's own
            stdout = 2
    try:
        return subprocess.Popen(argv, preexec_fn=die_with(os.getpid(), libc_prctl()), stdout=stdout)
    except FileNotFoundError:
        raise InputError(f"cannot run {argv[0]!r}: no such command") from None
    except PermissionError:
        raise InputError(f"cannot run {argv[0]!r}: permission denied") from None


def _terminated(signum: int, frame: object) -> None:
    """SIGTERM or SIGHUP to gputopo while it watches a command: stop the command as Ctrl-C does
    (``_stop``: SIGTERM, then SIGKILL after the grace), then end with 128 + the signal. The kernel's
    parent-death SIGTERM alone can be ignored by the child (review: a `trap "" TERM` outlived
    gputopo; review 3: so did it on SIGHUP, a closed terminal or ssh session)."""
    name = signal.Signals(signum).name
    error = Terminated(f"terminated ({name}): the watched command was stopped")
    error.exit_code = 128 + signum
    raise error


# The watched command's keeper, a small process of its own (its own session: no terminal signal
# reaches it): it holds a pidfd of the command and the read end of a pipe only gputopo writes. A byte
# means gputopo ended the command itself; end of file without one means gputopo died without
# stopping it (SIGKILL, the OOM killer): the keeper sends SIGTERM, then SIGKILL after the grace, as
# ``_stop`` would have. A pidfd names that one process: never another that took its number.
_KEEPER = r"""
import os, select, signal, sys
fd, pidfd, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
    signal.signal(s, signal.SIG_IGN)
while True:
    try:
        data = os.read(fd, 1)
    except InterruptedError:
        continue
    break
if not data:
    poll = select.poll()
    poll.register(pidfd, select.POLLIN)
    for sig, wait_ms in ((signal.SIGTERM, grace * 1000), (signal.SIGKILL, 0)):
        try:
            signal.pidfd_send_signal(pidfd, sig)
        except ProcessLookupError:
            break
        if wait_ms and poll.poll(wait_ms):
            break
"""


class _Keeper:
    """The keeper of one watched command (``_KEEPER``); nothing where there is no pidfd (not Linux,
    a kernel before 5.3): the parent-death SIGTERM is all there is then."""

    def __init__(self, child: subprocess.Popen[bytes]) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        self.write_fd: int | None = None
        try:
            pidfd = os.pidfd_open(child.pid)  # before any wait: the command is there, or a zombie of ours
        except (AttributeError, OSError):
            return
        read_fd, write_fd = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _KEEPER, str(read_fd), str(pidfd), str(STOP_GRACE_S)],
                pass_fds=(read_fd, pidfd), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                start_new_session=True, close_fds=True,
            )  # fmt: skip
            self.write_fd, write_fd = write_fd, -1
        except OSError:
            pass
        finally:
            os.close(read_fd)
            os.close(pidfd)
            if write_fd >= 0:
                os.close(write_fd)

    def release(self) -> None:
        """gputopo stopped the command (or it ended): the keeper ends without a signal."""
        if self.write_fd is not None:
            try:
                os.write(self.write_fd, b"x")
            except OSError:
                pass
            os.close(self.write_fd)
            self.write_fd = None
        if self.process is not None:
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.process = None


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _exit_code(child: subprocess.Popen[bytes] | None) -> int | None:
    if child is None or child.returncode is None:
        return None
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


def _wait(child: subprocess.Popen[bytes] | None, seconds: float) -> bool:
    """Wait one interval; True when the child ended in it."""
    if child is None:
        time.sleep(seconds)
        return False
    try:
        child.wait(seconds)
    except subprocess.TimeoutExpired:
        return False
    return True


def _watch(argv: list[str], interval: float, count: int | None, json_output: bool, prometheus: str | None,
           planned: _Plan | None) -> int:
    from gputopo.analysis.causes.finding_kinds import with_kinds
    from gputopo.analysis.watch.watch import frame
    from gputopo.analysis.watch.watch_summary import Summary
    from gputopo.sources.host import nvml_counters

    summary = Summary()
    child = None
    with nvml_counters.reader() as reader:
        gpus = reader.gpus or reader.open()
        if planned is not None and any(i >= len(gpus) for i in planned.gpus):
            raise InputError(f"the plan ({planned.source}) names a GPU this host does not have ({len(gpus)} GPUs)")
        labels = {g.index: {"gpu": g.index, "name": g.name, "bus_id": g.bus_id} for g in gpus}
        before = reader.sample()
        previous = ({sig: signal.signal(sig, _terminated) for sig in (signal.SIGTERM, signal.SIGHUP)}
                    if argv else None)  # (the main thread: typer's)
        child = _start(argv, json_output) if argv else None
        keeper = _Keeper(child) if child is not None else None
        screen = _Screen(json_output, prometheus, labels)
        try:
            while True:
                ended = _wait(child, interval)
                after = reader.sample()
                current = frame(gpus, before, after)
                with_kinds(current.findings)
                before = after
                summary.add(current)
                screen.show(current, summary)
                if ended or (count is not None and summary.frames >= count):
                    break
            if child is not None:
                screen.note("sampling done; waiting for the command to end" if child.poll() is None else None)
                child.wait()
        finally:
            screen.close()
            if child is not None:
                _stop(child)  # (on SIGTERM too: a child that ignores the kernel's SIGTERM is killed after the grace)
            if keeper is not None:
                keeper.release()
            if previous is not None:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)
    if child is not None or planned is not None:
        _print_summary(summary, argv or None, _exit_code(child), planned, gpus, json_output)
    return _exit_code(child) or 0


class _Screen:
    """Where each interval goes: a JSON line on stdout, a live table on stderr, the Prometheus file."""

    def __init__(self, json_output: bool, prometheus: str | None, labels: dict[int, dict[str, Any]]) -> None:
        self.json_output, self.prometheus, self.labels = json_output, prometheus, labels
        self.live: Any = None
        self.write_failing = False  # the last Prometheus write failed (said once, until one succeeds)

    def show(self, current: Any, summary: Any) -> None:
        if self.prometheus:
            self._write_prometheus(current, summary)
        if self.json_output:
            from gputopo.views.common import print_json_text
            from gputopo.views.watch import frame_json, json_line

            print_json_text(json_line(frame_json(current, _now())))
            return
        from gputopo.views.common import err
        from gputopo.views.watch import live_table

        table = live_table(current, f"gputopo watch  {_now()}  every {current.interval_s:g} s  (Ctrl-C stops)")
        console = err()
        if not console.is_terminal:
            console.print(table)
            return
        if self.live is None:
            from rich.live import Live

            self.live = Live(table, console=console, auto_refresh=False, transient=False)
            self.live.start()
        self.live.update(table, refresh=True)

    def _write_prometheus(self, current: Any, summary: Any) -> None:
        """The metrics file, atomically. A failed write (the folder full or gone) never ends the
        watch, nor the command it watches (review 3: a full disk killed the training): it is said once
        on stderr, and the next interval tries again; the target was checked before anything started."""
        from gputopo import fileio
        from gputopo.errors import GputopoError
        from gputopo.quoting import terminal_safe
        from gputopo.views.watch_prometheus import prometheus_text

        try:
            fileio.atomic_write_text(self.prometheus, prometheus_text(current, summary, self.labels))
        except GputopoError as exc:
            if not self.write_failing:
                typer.echo(terminal_safe(f"gputopo: warning: {exc}; the watch goes on, the next interval tries again"),
                           err=True)
            self.write_failing = True
            return
        if self.write_failing:
            typer.echo(terminal_safe(f"gputopo: {self.prometheus} written again"), err=True)
        self.write_failing = False

    def note(self, text: str | None) -> None:
        if text and not self.json_output:
            typer.echo(text, err=True)

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _print_summary(summary: Any, argv: list[str] | None, exit_code: int | None, planned: _Plan | None,
                   gpus: list[Any], json_output: bool) -> None:
    from gputopo.analysis.causes.finding_kinds import with_kinds
    from gputopo.analysis.watch.watch_plan import judge_plan
    from gputopo.views.watch import summary_json, summary_text

    plan = None
    verdict_text = None
    if planned is not None:
        judged = judge_plan(summary, planned.gpus, planned.source, gpus, os.environ, planned.topology)
        for finding in with_kinds(judged.findings):
            summary.findings[(finding.code, tuple(finding.gpus))] = finding
        plan = judged.to_dict()
        verdict_text = {"nvlink": "the planned GPUs' NVLinks carried their traffic",
                        "idle": "the planned GPUs moved nothing", "unknown": "no NVLink counters to judge by",
                        "pcie": "PCIe carried the traffic while the planned NVLinks idled"}[judged.verdict]
        verdict_text = f"GPUs {','.join(map(str, judged.gpus))} ({planned.source}): {verdict_text}" + (
            f"; link errors +{judged.link_errors}" if judged.link_errors else "")
    if json_output:
        from gputopo.views.common import print_json_text
        from gputopo.views.watch import json_line

        print_json_text(json_line(summary_json(summary, argv, exit_code, plan)))
        return
    for line in summary_text(summary, exit_code, verdict_text):
        typer.echo(line, err=True)
