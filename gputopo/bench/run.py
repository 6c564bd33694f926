"""``bench-p2p``'s run: which devices to measure, then every ordered pair (and the all-reduce), each
step in a worker thread with a timeout.

Robustness: every step (one pair, one size, one kind of figure) runs in a worker thread that the
main thread waits on with a timeout; a hang or an out-of-memory error fails that step with a
message and the run goes on. Ctrl-C stops the run and returns the partial results.
"""

from __future__ import annotations

import contextlib
import copy
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Protocol

from gputopo import tfruntime
from gputopo.bench.engine import BenchStepError, BytesMismatch, CopyBench, prepare_environment
from gputopo.bench.options import BenchConfig, check_pair_count
from gputopo.bench.plan import PairPlan, fill_inferred, full_plan, measure_concurrent
from gputopo.bench.results import (
    AllReduceResult,
    BenchDevice,
    BenchResult,
    PairResult,
    apply_measurements,
    busbw_factor,
    gbps_stat,
    placeholder_topology,
    us_stat,
)
from gputopo.errors import GputopoError, InputError
from gputopo.model import Topology
from gputopo.notation import format_size
from gputopo.numbering import tf_gpu_indices

# How long an interrupted or cancelled worker gets to notice before we return without it.
_CANCEL_GRACE_S = 2.0


class Progress(Protocol):
    """Where the run reports progress (the CLI passes a rich progress bar)."""

    def start(self, total_steps: int) -> None: ...

    def step(self, description: str) -> None: ...

    def advance(self) -> None: ...


class StepTimeout(Exception):
    """A step did not finish within the timeout (a hung copy or a wedged device)."""


# --- devices ------------------------------------------------------------------------------------


def map_gpus(
    tf_gpus: list[tuple[str, str | None]], topology: Topology | None, environ: Any = None
) -> tuple[list[BenchDevice], list[str]]:
    """TF's GPUs as ``BenchDevice``s named by the topology's (NVML) GPU indices (the join itself is
    ``numbering.tf_gpu_indices``: by PCI bus id, else by ``CUDA_VISIBLE_DEVICES``'s order)."""
    indices, note = tf_gpu_indices(topology, [bus for _, bus in tf_gpus], environ)
    devices = [BenchDevice(index, name, bus) for index, (name, bus) in zip(indices, tf_gpus)]
    return devices, [note] if note else []


def cpu_bench_devices(names: list[str], topology: Topology | None) -> list[BenchDevice]:
    """Logical CPU device k stands for the k-th GPU of the topology (or is just number k)."""
    if topology is None:
        return [BenchDevice(k, name) for k, name in enumerate(names)]
    if len(names) > len(topology.gpus):
        raise InputError(
            f"--cpu-devices {len(names)} is more than the {len(topology.gpus)} GPUs of the topology given"
        )
    return [BenchDevice(topology.gpus[k].index, name) for k, name in enumerate(names)]


def choose_devices(devices: list[BenchDevice], wanted: list[int] | None) -> list[BenchDevice]:
    """The devices named by ``--devices`` (in that order), or all; at least two are needed."""
    if wanted is not None:
        by_index = {d.index: d for d in devices}
        missing = [i for i in wanted if i not in by_index]
        if missing:
            known = ", ".join(str(d.index) for d in devices) or "none"
            raise InputError(f"no GPU {missing[0]} to measure (the devices here are {known})")
        devices = [by_index[i] for i in wanted]
    if len(devices) < 2:
        raise InputError(f"bench-p2p needs at least two devices, got {len(devices)}")
    check_pair_count(len(devices))
    return devices


@dataclass
class BenchSetup:
    """TensorFlow, the devices to measure and the topology to compare with (and notes on the join)."""

    tf: Any
    device_kind: str  # "GPU" or "CPU"
    devices: list[BenchDevice]
    topology: Topology | None
    notes: list[str]


def open_devices(cpu_devices: int | None, topology: Topology | None, wanted: list[int] | None) -> BenchSetup:
    """Start TensorFlow and pick the devices: ``cpu_devices`` logical CPUs, else TF's GPUs joined to
    the topology (this machine's, probed here, when none was given; without one, a note says so)."""
    prepare_environment()
    tf = tfruntime.import_tensorflow()
    notes: list[str] = []
    if cpu_devices is not None:
        kind = "CPU"
        devices = cpu_bench_devices(tfruntime.configure_logical_cpu_devices(cpu_devices), topology)
    else:
        kind = "GPU"
        tf_gpus = tfruntime.tf_gpus_with_bus_ids(tf)
        if not tf_gpus:
            raise InputError("TensorFlow sees no GPU here; use --cpu-devices N to measure N logical CPU devices")
        if topology is None:
            from gputopo.analysis import topology_for
            from gputopo.sources import TopologyRequest

            try:
                topology = topology_for(TopologyRequest())
            except GputopoError as exc:
                notes.append(f"no topology to compare with ({exc})")
        devices, join_notes = map_gpus(tf_gpus, topology)
        notes.extend(join_notes)
    return BenchSetup(tf, kind, choose_devices(devices, wanted), topology, notes)


def save_measured_snapshot(result: BenchResult, topology: Topology | None, path: str) -> int:
    """Write a snapshot with the measured figures on its links (the topology's, or a placeholder
    one of the measured devices); returns how many links were measured."""
    from gputopo.sources.snapshot import save_snapshot

    snapshot = copy.deepcopy(topology) if topology is not None else placeholder_topology(result)
    updated = apply_measurements(snapshot, result)
    save_snapshot(snapshot, path)
    return len(updated)


# --- one step -----------------------------------------------------------------------------------


def _run_step(work: Callable[[threading.Event], Any], timeout_s: float) -> Any:
    """Run ``work(cancel)`` in a worker thread; ``StepTimeout`` if it outlives ``timeout_s``.

    The main thread only waits, so Ctrl-C reaches it at once; a worker's exception (including a
    KeyboardInterrupt raised inside it) is re-raised here.
    """
    cancel = threading.Event()
    done = threading.Event()
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = work(cancel)
        except BaseException as exc:  # handed to the main thread
            box["error"] = exc
        finally:
            done.set()

    worker = threading.Thread(target=target, name="gputopo-bench-step", daemon=True)
    worker.start()
    try:
        finished = done.wait(timeout_s)
    except KeyboardInterrupt:
        cancel.set()
        done.wait(_CANCEL_GRACE_S)
        raise
    if not finished:
        cancel.set()
        raise StepTimeout(f"timed out after {timeout_s:g} s (a hung copy or a wedged device)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


def _describe_tf_error(tf: Any, exc: BaseException, where: str) -> str:
    """One line for a failed step: out-of-memory is said plainly, other TF errors by their first line."""
    if isinstance(exc, tf.errors.ResourceExhaustedError):
        return f"{where}: out of memory"
    message = getattr(exc, "message", None) or str(exc)
    first = message.strip().splitlines()[0] if message.strip() else type(exc).__name__
    return f"{where}: {type(exc).__name__}: {first[:200]}"


def count_steps(device_count: int, config: BenchConfig, allreduce_ops: int, plan: PairPlan | None = None,
                concurrent_rounds: int = 0) -> int:
    ordered = device_count * (device_count - 1) if plan is None else len(plan.measured)
    unordered = ordered // 2 if plan is None else len(plan.unordered())
    per_size = ordered + unordered + (ordered if config.via_host else 0)
    total = per_size * len(config.sizes_bytes) + ordered + concurrent_rounds
    if config.allreduce:
        total += allreduce_ops * len(config.sizes_bytes)
    return total


# --- the run ------------------------------------------------------------------------------------


class _Stop:
    """Which signal stopped the run (``SIGINT`` is Ctrl-C's)."""

    signal_name = "SIGINT"


@contextlib.contextmanager
def _sigterm_as_interrupt(stop: _Stop) -> Iterator[None]:
    """While measuring, SIGTERM (``kill``, a batch scheduler's time limit) stops the run as Ctrl-C
    does, so the figures measured so far are still printed and saved; its default would lose them."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        stop.signal_name = signal.Signals(signum).name
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_benchmark(
    tf: Any,
    devices: list[BenchDevice],
    device_kind: str,
    config: BenchConfig,
    progress: Progress | None = None,
    bench: CopyBench | None = None,
    plan: PairPlan | None = None,
    concurrent: bool = False,
) -> BenchResult:
    """Measure the ordered pairs of ``plan`` (default: every one) of ``devices``, then (``concurrent``)
    rounds of disjoint pairs at once, and the all-reduce, if asked.

    Never raises for a failed pair: a timeout, out-of-memory or TF error is recorded on that pair.
    Ctrl-C or SIGTERM returns the partial result with ``interrupted=True`` and ``stopped_by``.
    """
    config.validate()
    if len(devices) < 2:
        raise InputError(f"bench-p2p needs at least two devices, got {len(devices)}")
    bench = bench or CopyBench(tf, devices, device_kind, config)
    plan = plan or full_plan([d.index for d in devices])
    run = _PairRun(tf, devices, device_kind, config, bench, progress, plan)
    ops_names = bench.allreduce_candidates()
    rounds = len(devices) - 1 + len(devices) % 2 if concurrent else 0
    if progress is not None:
        progress.start(count_steps(len(devices), config, len(ops_names), plan, rounds))
    started = time.perf_counter()
    seconds_before, calls_before = bench.copy_seconds_total, bench.copy_calls_total
    stop = _Stop()
    try:
        with _sigterm_as_interrupt(stop):
            for size in config.sizes_bytes:
                run.measure_size(size)
            run.measure_latency()
            fill_inferred(run.result, plan)
            if concurrent:
                measure_concurrent(run, config.sizes_bytes[-1])
            if config.allreduce:
                run.measure_allreduce(ops_names)
    except KeyboardInterrupt:
        run.result.interrupted = True
        run.result.stopped_by = stop.signal_name
        how = "Ctrl-C" if stop.signal_name == "SIGINT" else stop.signal_name
        run.result.notes.append(f"interrupted ({how}): the figures are those measured before it")
    run.result.wall_s = time.perf_counter() - started
    run.result.copy_seconds_total = bench.copy_seconds_total - seconds_before
    run.result.copy_calls_total = bench.copy_calls_total - calls_before
    return run.result


class _PairRun:
    """One ``run_benchmark``: its steps, the devices that hung, and the result they fill in."""

    def __init__(
        self, tf: Any, devices: list[BenchDevice], device_kind: str, config: BenchConfig, bench: CopyBench,
        progress: Progress | None, plan: PairPlan,
    ) -> None:  # fmt: skip
        self.tf, self.devices, self.kind, self.config = tf, devices, device_kind, config
        self.bench, self.progress, self.plan = bench, progress, plan
        self.by_index = {d.index: d for d in devices}
        self.hung: set[int] = set()
        self.result = BenchResult(
            device_kind=device_kind,
            devices=list(devices),
            copy_op=bench.copy_op,
            host_device=bench.host_device,
            sizes_bytes=list(config.sizes_bytes),
            latency_size_bytes=config.latency_size_bytes,
            repeat=config.repeat,
            warmup=config.warmup,
            via_host=config.via_host,
            allreduce=config.allreduce,
        )

    def step(
        self, description: str, involved: list[int], work: Callable[[threading.Event], Any], any_error: bool = False,
        copies: list[tuple[int, int]] | None = None,
    ) -> tuple[Any, str | None]:
        """Run one step; returns ``(value, None)`` or ``(None, why it failed)``. ``copies``: the
        ordered pairs whose bytes it checks (default: the first two devices involved, one way);
        they are marked checked, or mismatched where the copied bytes were wrong.

        ``any_error``: any exception fails the step (TF refuses some cross-device ops on some device
        sets with plain Python errors); otherwise only TF's own errors do and the rest are bugs.
        """
        if self.progress is not None:
            self.progress.step(description)
        try:
            stuck = sorted(self.hung.intersection(involved))
            if stuck:
                return None, f"{description}: skipped, device {stuck[0]} hung in an earlier step"
            value = _run_step(work, self.config.step_timeout_s)
            for a, b in copies if copies is not None else [(involved[0], involved[1])]:
                self.result.pair(a, b).bytes_checked = True
            return value, None
        except StepTimeout as exc:
            self.hung.update(involved)
            return None, f"{description}: {exc}"
        except BytesMismatch as exc:
            checked = copies if copies is not None else [(involved[0], involved[1])]
            for k, (a, b) in enumerate(checked):
                self.result.pair(a, b).bytes_mismatch = self.result.pair(a, b).bytes_mismatch or k in exc.which
            return None, f"{description}: {exc}"
        except BenchStepError as exc:
            return None, f"{description}: {exc}"
        except self.tf.errors.OpError as exc:
            return None, _describe_tf_error(self.tf, exc, description)
        except MemoryError:
            return None, f"{description}: out of host memory"
        except Exception as exc:
            if not any_error:
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return None, f"{description}: {type(exc).__name__}: {first[:200]}"
        finally:
            if self.progress is not None:
                self.progress.advance()

    def each_ordered_pair(
        self,
        description: str,
        measure: Callable[[str, str, threading.Event], list[float]],
        record: Callable[[PairResult, list[float]], None],
    ) -> None:
        """One step per ordered pair of the plan; ``description`` names it with ``{a}`` and ``{b}``."""
        for a, b in ((self.by_index[x], self.by_index[y]) for x, y in self.plan.measured):
            seconds, error = self.step(
                description.format(a=a.index, b=b.index),
                [a.index, b.index],
                lambda cancel, a=a, b=b: measure(a.tf_name, b.tf_name, cancel),
            )
            pair = self.result.pair(a.index, b.index)
            if error is not None:
                pair.errors.append(error)
            else:
                record(pair, seconds)

    def measure_size(self, size: int) -> None:
        """One way, both ways and (if asked) through the host, every pair at ``size`` bytes."""
        bench, kind, size_text = self.bench, self.kind, format_size(size)

        def record_uni(pair: PairResult, seconds: list[float]) -> None:
            pair.point(size).uni_gbps = gbps_stat(size, seconds)

        def record_via_host(pair: PairResult, seconds: list[float]) -> None:
            pair.point(size).via_host_gbps = gbps_stat(size, seconds)

        self.each_ordered_pair(
            f"{kind} {{a}} -> {{b}} {size_text}",
            lambda src, dst, cancel: bench.measure_uni(src, dst, size, cancel),
            record_uni,
        )
        for a, b in ((self.by_index[x], self.by_index[y]) for x, y in self.plan.unordered()):
            seconds, error = self.step(
                f"{kind} {a.index} <-> {b.index} {size_text}",
                [a.index, b.index],
                lambda cancel, a=a, b=b: bench.measure_bidir(a.tf_name, b.tf_name, size, cancel),
                copies=[(b.index, a.index), (a.index, b.index)],  # the order of its byte check
            )
            forward, backward = self.result.pair(a.index, b.index), self.result.pair(b.index, a.index)
            if error is not None:
                forward.errors.append(error)
                backward.errors.append(error)
            else:
                # Both directions' bytes count, as in CUDA's p2pBandwidthLatencyTest.
                forward.point(size).bidir_gbps = backward.point(size).bidir_gbps = gbps_stat(2 * size, seconds)
        if self.config.via_host:
            self.each_ordered_pair(
                f"{kind} {{a}} -> host -> {{b}} {size_text}",
                lambda src, dst, cancel: bench.measure_via_host(src, dst, size, cancel),
                record_via_host,
            )
        bench.drop_sources()

    def measure_latency(self) -> None:
        def record_latency(pair: PairResult, seconds: list[float]) -> None:
            pair.latency_us = us_stat(seconds)

        size = self.config.latency_size_bytes
        self.each_ordered_pair(
            f"{self.kind} {{a}} -> {{b}} latency",
            lambda src, dst, cancel: self.bench.measure_uni(src, dst, size, cancel),
            record_latency,
        )
        self.bench.drop_sources()

    def measure_allreduce(self, ops_names: list[str]) -> None:
        """Each cross-device op at each size; TF's default is kept only where it is another op."""
        group = [d.index for d in self.devices]
        factor = busbw_factor(len(self.devices))
        seen_labels: set[str] = set()
        for ops_name in ops_names:
            for size in self.config.sizes_bytes:
                value, error = self.step(
                    f"all-reduce {ops_name} {format_size(size)}",
                    group,
                    lambda cancel, ops_name=ops_name, size=size: self.bench.measure_allreduce(ops_name, size, cancel),
                    any_error=True,
                )
                if error is not None:
                    self.result.allreduce_results.append(AllReduceResult(ops_name, group, size, error=error))
                    continue
                ops_label, size_bytes, seconds = value
                if ops_name == "default" and ops_label.split(" ")[0] in seen_labels:
                    continue  # TF's default is one of the ops already measured
                seen_labels.add(ops_label)
                self.result.allreduce_results.append(
                    AllReduceResult(
                        cross_device_ops=ops_label,
                        devices=group,
                        size_bytes=size_bytes,
                        time_us=us_stat(seconds),
                        algbw_gbps=gbps_stat(size_bytes, seconds),
                        # busbw = algbw * factor: the time shrinks by the factor.
                        busbw_gbps=gbps_stat(size_bytes, [s / factor for s in seconds]),
                    )
                )
