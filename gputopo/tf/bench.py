"""``bench-p2p``'s measuring engine: copy bandwidth, latency and all-reduce with TensorFlow ops.

Why TensorFlow and not CUDA: users train with TensorFlow, so what matters is the bandwidth TF's own
cross-device copies reach. Each copy is a ``tf.function`` that takes a tensor living on the source
device and returns a copy made by an op placed (``tf.device``) on the destination:

- GPUs: ``tf.identity`` on the destination GPU; TF inserts a Send/Recv pair that is a real
  device-to-device DMA (peer-to-peer where the driver allows it, staged by the driver otherwise).
- Logical CPU devices: ``tf.identity`` would hand over the same buffer (zero-copy, hundreds of
  fantasy GB/s), so ``tf.raw_ops.DeepCopy`` (a stateful op: never pruned or merged) copies bytes.

Only the device names and the copy op differ, so the CPU tests exercise the code GPUs run.

Timing: the source tensor is made on the source device from random data and passed as an argument
(nothing to constant-fold), the result is returned (nothing to prune). Each sample is
``sync_devices(); t0; N calls; sync_devices(); t1`` - the calls only enqueue device work and nothing
is read back to the host, so the clock covers the copies (and TF's dispatch of them) and nothing
else. N is chosen from a calibration call so that each sample lasts at least ``min_sample_s``.

Robustness: every step (one pair, one size, one kind of figure) runs in a worker thread that the
main thread waits on with a timeout; a hang or an out-of-memory error fails that step with a
message and the run goes on. Ctrl-C stops the run and returns the partial results.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Protocol

from gputopo.errors import InputError
from gputopo.model import Topology, normalize_pci_bus_id
from gputopo.notation import format_size
from gputopo.numbering import tf_gpu_indices
from gputopo.tf.bench_options import (
    DEFAULT_MIN_SAMPLE_S,
    DEFAULT_REPEAT,
    DEFAULT_SIZE_BYTES,
    DEFAULT_STEP_TIMEOUT_S,
    DEFAULT_WARMUP,
)
from gputopo.tf.bench_results import (
    AllReduceResult,
    BenchDevice,
    BenchResult,
    PairResult,
    busbw_factor,
    gbps_stat,
    us_stat,
)

LATENCY_SIZE_BYTES = 4  # one float, like CUDA's p2pBandwidthLatencyTest
MAX_CALLS_PER_SAMPLE = 2000
HOST_DEVICE = "/device:CPU:0"
# How long an interrupted or cancelled worker gets to notice before we return without it.
_CANCEL_GRACE_S = 2.0


def prepare_environment() -> None:
    """Settings TensorFlow reads once, at start-up: call before it is imported (later they come too
    late; GPUs are joined to NVML by PCI bus id anyway). A value the user set is respected.

    - ``CUDA_DEVICE_ORDER=PCI_BUS_ID``: TF numbers GPUs in PCI bus order, as NVML and nvidia-smi
      do. CUDA's default, FASTEST_FIRST, may make TF's ``GPU:0`` nvidia-smi's GPU 3.
    - ``TF_CPU_ALLOCATOR_USE_BFC=true``: host memory comes from TF's pooling (BFC) allocator, as GPU
      memory always does. Without it every large copy result is a fresh ``mmap`` and the clock
      measures the kernel faulting in new pages (about half the copy speed at 64 MiB), not copying.
    """
    os.environ.setdefault("CUDA_DEVICE_ORDER", "PCI_BUS_ID")
    os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")


@dataclass
class BenchConfig:
    """What to measure and how carefully."""

    sizes_bytes: list[int] = field(default_factory=lambda: [DEFAULT_SIZE_BYTES])
    repeat: int = DEFAULT_REPEAT
    warmup: int = DEFAULT_WARMUP
    via_host: bool = False
    allreduce: bool = False
    latency_size_bytes: int = LATENCY_SIZE_BYTES
    min_sample_s: float = DEFAULT_MIN_SAMPLE_S
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S

    def validate(self) -> None:
        if not self.sizes_bytes:
            raise InputError("no message size given")
        if self.repeat < 1:
            raise InputError(f"--repeat must be at least 1, got {self.repeat}")
        if self.warmup < 0:
            raise InputError(f"--warmup must not be negative, got {self.warmup}")
        if not 0 < self.step_timeout_s < math.inf:  # inf would overflow the wait; nan is no number
            raise InputError(f"--timeout must be a positive number of seconds, got {self.step_timeout_s}")


class Progress(Protocol):
    """Where the engine reports progress (the CLI passes a rich progress bar)."""

    def start(self, total_steps: int) -> None: ...

    def step(self, description: str) -> None: ...

    def advance(self) -> None: ...


class StepTimeout(Exception):
    """A step did not finish within the timeout (a hung copy or a wedged device)."""


class BenchStepError(Exception):
    """A step cannot be measured as asked (e.g. TF put the source tensor on another device)."""


class _Cancelled(Exception):
    """Raised inside a worker whose step was abandoned (timeout or Ctrl-C)."""


# --- devices ------------------------------------------------------------------------------------


def tf_gpus_with_bus_ids(tf: Any) -> list[tuple[str, str | None]]:
    """TensorFlow's GPUs in ordinal order, each with its PCI bus id where TF reports it."""
    names = [d.name for d in tf.config.list_logical_devices("GPU")]
    bus_ids: dict[str, str | None] = {}
    try:
        from tensorflow.python.client import device_lib

        for dev in device_lib.list_local_devices():
            match = re.search(r"pci bus id: ([0-9a-fA-F:.]+)", dev.physical_device_desc or "")
            if match:
                bus_ids[dev.name] = normalize_pci_bus_id(match.group(1))
    except Exception:  # device_lib is TF-internal; without it we fall back to ordinal order
        pass
    return [(name, bus_ids.get(name)) for name in names]


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
    """The devices named by ``--gpus`` (in that order), or all; at least two are needed."""
    if wanted is not None:
        by_index = {d.index: d for d in devices}
        missing = [i for i in wanted if i not in by_index]
        if missing:
            known = ", ".join(str(d.index) for d in devices) or "none"
            raise InputError(f"no GPU {missing[0]} to measure (the devices here are {known})")
        devices = [by_index[i] for i in wanted]
    if len(devices) < 2:
        raise InputError(f"bench-p2p needs at least two devices, got {len(devices)}")
    return devices


# --- the engine ---------------------------------------------------------------------------------


def same_device(name_a: str, name_b: str) -> bool:
    """``/job:localhost/replica:0/task:0/device:GPU:1`` and ``/device:GPU:1`` are the same device."""

    def kind_and_index(name: str) -> tuple[str, int] | None:
        match = re.search(r"(?:device:)?([A-Za-z_]+):(\d+)$", name or "")
        return (match.group(1).upper(), int(match.group(2))) if match else None

    found = kind_and_index(name_a)
    return found is not None and found == kind_and_index(name_b)


class CopyBench:
    """Builds the copy functions for a set of devices and times them.

    ``copy_op`` is ``"Identity"`` on GPUs and ``"DeepCopy"`` on logical CPU devices (see the module
    docstring); it is a parameter so that a test can show what a zero-copy op would report.
    """

    def __init__(
        self,
        tf: Any,
        devices: list[BenchDevice],
        device_kind: str,
        config: BenchConfig,
        copy_op: str | None = None,
        host_device: str = HOST_DEVICE,
    ) -> None:
        self.tf = tf
        self.devices = devices
        self.device_kind = device_kind
        self.config = config
        self.host_device = host_device
        self.copy_op = copy_op or ("Identity" if device_kind == "GPU" else "DeepCopy")
        if self.copy_op == "Identity":
            self._copy: Callable[[Any], Any] = tf.identity
        elif self.copy_op == "DeepCopy":
            self._copy = lambda x: tf.raw_ops.DeepCopy(x=x)
        else:
            raise ValueError(f"unknown copy op {self.copy_op!r}")
        self._sources: dict[tuple[str, int], Any] = {}
        self._functions: dict[tuple[str, ...], Any] = {}
        self._strategies: dict[str, tuple[Any, str]] = {}

    # tensors and functions

    def source_tensor(self, device: str, size_bytes: int) -> Any:
        """``size_bytes`` of random uint8 made on ``device`` itself (no host round trip, no constant)."""
        key = (device, size_bytes)
        if key not in self._sources:
            tf = self.tf
            words = math.ceil(size_bytes / 4)
            with tf.device(device):
                data = tf.random.uniform([words], minval=tf.int32.min, maxval=tf.int32.max, dtype=tf.int32)
                data = tf.reshape(tf.bitcast(data, tf.uint8), [-1])
                if words * 4 != size_bytes:
                    data = data[:size_bytes]
            # Soft placement would silently fall back to the CPU where a kernel is missing; a source
            # tensor anywhere else than asked would time the wrong copy.
            if not same_device(data.device, device):
                raise BenchStepError(f"TensorFlow made the source tensor on {data.device}, not on {device}")
            self._sources[key] = data
        return self._sources[key]

    def drop_sources(self) -> None:
        """Free the source tensors (between sizes, so that a sweep never holds two sizes at once)."""
        self._sources.clear()

    def uni_function(self, dst: str) -> Any:
        """``f(x)``: a copy of ``x`` (on its source device) made on ``dst``."""
        key = ("uni", dst)
        if key not in self._functions:
            tf, copy = self.tf, self._copy

            @tf.function(autograph=False)
            def copy_to(x: Any) -> Any:
                with tf.device(dst):
                    return copy(x)

            self._functions[key] = copy_to
        return self._functions[key]

    def bidir_function(self, a: str, b: str) -> Any:
        """``f(x_a, x_b)``: both copies at once; they have no dependency, so TF runs them together."""
        key = ("bidir", a, b)
        if key not in self._functions:
            tf, copy = self.tf, self._copy

            @tf.function(autograph=False)
            def both_ways(x_a: Any, x_b: Any) -> Any:
                with tf.device(b):
                    to_b = copy(x_a)
                with tf.device(a):
                    to_a = copy(x_b)
                return to_a, to_b

            self._functions[key] = both_ways
        return self._functions[key]

    def via_host_function(self, dst: str) -> Any:
        """``f(x)``: copy to the host device, then from there to ``dst`` (what happens without P2P)."""
        key = ("via", dst)
        if key not in self._functions:
            tf, copy, host = self.tf, self._copy, self.host_device

            @tf.function(autograph=False)
            def via_host(x: Any) -> Any:
                with tf.device(host):
                    staged = copy(x)
                with tf.device(dst):
                    return copy(staged)

            self._functions[key] = via_host
        return self._functions[key]

    # timing

    def seconds_per_call(self, fn: Any, args: tuple[Any, ...], cancel: threading.Event) -> list[float]:
        """``repeat`` samples of the mean time of one call, each sample bracketed by device syncs."""
        sync = self.tf.test.experimental.sync_devices
        perf = time.perf_counter
        # A concrete function skips the per-call signature matching of a tf.function (hundreds of
        # microseconds on a slow host), so less of TF's dispatch lands inside the clock.
        fn = fn.get_concrete_function(*args)
        out = fn(*args)  # places the graph and allocates; never timed
        for _ in range(self.config.warmup):
            out = fn(*args)
        sync()
        t0 = perf()
        out = fn(*args)
        sync()
        first_s = perf() - t0
        calls = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(self.config.min_sample_s / max(first_s, 1e-9))))
        samples: list[float] = []
        for _ in range(self.config.repeat):
            if cancel.is_set():
                raise _Cancelled()
            sync()
            t0 = perf()
            for _ in range(calls):
                out = fn(*args)
            sync()
            samples.append((perf() - t0) / calls)
        del out
        return samples

    def measure_uni(self, src: str, dst: str, size_bytes: int, cancel: threading.Event) -> list[float]:
        x = self.source_tensor(src, size_bytes)
        return self.seconds_per_call(self.uni_function(dst), (x,), cancel)

    def measure_bidir(self, a: str, b: str, size_bytes: int, cancel: threading.Event) -> list[float]:
        x_a, x_b = self.source_tensor(a, size_bytes), self.source_tensor(b, size_bytes)
        return self.seconds_per_call(self.bidir_function(a, b), (x_a, x_b), cancel)

    def measure_via_host(self, src: str, dst: str, size_bytes: int, cancel: threading.Event) -> list[float]:
        x = self.source_tensor(src, size_bytes)
        return self.seconds_per_call(self.via_host_function(dst), (x,), cancel)

    # all-reduce

    def allreduce_candidates(self) -> list[str]:
        """The MirroredStrategy cross-device ops to try; "default" is whatever TF picks by itself."""
        names = ["NcclAllReduce"] if self.device_kind == "GPU" else []
        return names + ["HierarchicalCopyAllReduce", "ReductionToOneDevice", "default"]

    def _strategy(self, ops_name: str) -> tuple[Any, str]:
        if ops_name not in self._strategies:
            tf = self.tf
            ops = None if ops_name == "default" else getattr(tf.distribute, ops_name)()
            strategy = tf.distribute.MirroredStrategy(
                devices=[d.tf_name for d in self.devices], cross_device_ops=ops
            )
            label = ops_name
            if ops is None:
                chosen = getattr(strategy.extended, "_cross_device_ops", None)
                label = f"{type(chosen).__name__ if chosen is not None else 'TF'} (default)"
            self._strategies[ops_name] = (strategy, label)
        return self._strategies[ops_name]

    def measure_allreduce(
        self, ops_name: str, size_bytes: int, cancel: threading.Event
    ) -> tuple[str, int, list[float]]:
        """Sum ``size_bytes`` of float32 across all devices; returns (label, bytes, seconds per call)."""
        tf = self.tf
        strategy, label = self._strategy(ops_name)
        elements = max(1, size_bytes // 4)
        values = strategy.experimental_distribute_values_from_function(
            lambda ctx: tf.random.uniform([elements], dtype=tf.float32)
        )

        @tf.function(autograph=False)
        def all_reduce(v: Any) -> Any:
            def replica_fn(x: Any) -> Any:
                return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, x)

            return strategy.run(replica_fn, args=(v,))

        return label, elements * 4, self.seconds_per_call(all_reduce, (values,), cancel)


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


def count_steps(device_count: int, config: BenchConfig, allreduce_ops: int) -> int:
    ordered = device_count * (device_count - 1)
    per_size = ordered + ordered // 2 + (ordered if config.via_host else 0)
    total = per_size * len(config.sizes_bytes) + ordered
    if config.allreduce:
        total += allreduce_ops * len(config.sizes_bytes)
    return total


def run_benchmark(
    tf: Any,
    devices: list[BenchDevice],
    device_kind: str,
    config: BenchConfig,
    progress: Progress | None = None,
    bench: CopyBench | None = None,
) -> BenchResult:
    """Measure every ordered pair of ``devices`` (and the all-reduce, if asked).

    Never raises for a failed pair: a timeout, out-of-memory or TF error is recorded on that pair.
    Ctrl-C returns the partial result with ``interrupted=True``.
    """
    config.validate()
    if len(devices) < 2:
        raise InputError(f"bench-p2p needs at least two devices, got {len(devices)}")
    bench = bench or CopyBench(tf, devices, device_kind, config)
    result = BenchResult(
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
    ops_names = bench.allreduce_candidates()
    total = count_steps(len(devices), config, len(ops_names))
    if progress is not None:
        progress.start(total)
    hung: set[int] = set()
    started = time.perf_counter()

    def step(
        description: str, involved: list[int], work: Callable[[threading.Event], Any], any_error: bool = False
    ) -> tuple[Any, str | None]:
        """Run one step; returns ``(value, None)`` or ``(None, why it failed)``.

        ``any_error``: any exception fails the step (TF refuses some cross-device ops on some device
        sets with plain Python errors); otherwise only TF's own errors do and the rest are bugs.
        """
        if progress is not None:
            progress.step(description)
        try:
            stuck = sorted(hung.intersection(involved))
            if stuck:
                return None, f"{description}: skipped, device {stuck[0]} hung in an earlier step"
            return _run_step(work, config.step_timeout_s), None
        except StepTimeout as exc:
            hung.update(involved)
            return None, f"{description}: {exc}"
        except BenchStepError as exc:
            return None, f"{description}: {exc}"
        except tf.errors.OpError as exc:
            return None, _describe_tf_error(tf, exc, description)
        except MemoryError:
            return None, f"{description}: out of host memory"
        except Exception as exc:
            if not any_error:
                raise
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
            return None, f"{description}: {type(exc).__name__}: {first[:200]}"
        finally:
            if progress is not None:
                progress.advance()

    def each_ordered_pair(
        description: str,
        measure: Callable[[str, str, threading.Event], list[float]],
        record: Callable[[PairResult, list[float]], None],
    ) -> None:
        """One step per ordered pair; ``description`` names the pair with ``{a}`` and ``{b}``."""
        for a in devices:
            for b in devices:
                if a is b:
                    continue
                seconds, error = step(
                    description.format(a=a.index, b=b.index),
                    [a.index, b.index],
                    lambda cancel, a=a, b=b: measure(a.tf_name, b.tf_name, cancel),
                )
                pair = result.pair(a.index, b.index)
                if error is not None:
                    pair.errors.append(error)
                else:
                    record(pair, seconds)

    try:
        for size in config.sizes_bytes:
            size_text = format_size(size)

            def record_uni(pair: PairResult, seconds: list[float], size: int = size) -> None:
                pair.point(size).uni_gbps = gbps_stat(size, seconds)

            def record_via_host(pair: PairResult, seconds: list[float], size: int = size) -> None:
                pair.point(size).via_host_gbps = gbps_stat(size, seconds)

            each_ordered_pair(
                f"{device_kind} {{a}} -> {{b}} {size_text}",
                lambda src, dst, cancel, size=size: bench.measure_uni(src, dst, size, cancel),
                record_uni,
            )
            for i, a in enumerate(devices):
                for b in devices[i + 1 :]:
                    seconds, error = step(
                        f"{device_kind} {a.index} <-> {b.index} {size_text}",
                        [a.index, b.index],
                        lambda cancel, a=a, b=b, size=size: bench.measure_bidir(a.tf_name, b.tf_name, size, cancel),
                    )
                    forward, backward = result.pair(a.index, b.index), result.pair(b.index, a.index)
                    if error is not None:
                        forward.errors.append(error)
                        backward.errors.append(error)
                    else:
                        # Both directions' bytes count, as in CUDA's p2pBandwidthLatencyTest.
                        forward.point(size).bidir_gbps = backward.point(size).bidir_gbps = gbps_stat(2 * size, seconds)
            if config.via_host:
                each_ordered_pair(
                    f"{device_kind} {{a}} -> host -> {{b}} {size_text}",
                    lambda src, dst, cancel, size=size: bench.measure_via_host(src, dst, size, cancel),
                    record_via_host,
                )
            bench.drop_sources()

        def record_latency(pair: PairResult, seconds: list[float]) -> None:
            pair.latency_us = us_stat(seconds)

        each_ordered_pair(
            f"{device_kind} {{a}} -> {{b}} latency",
            lambda src, dst, cancel: bench.measure_uni(src, dst, config.latency_size_bytes, cancel),
            record_latency,
        )
        bench.drop_sources()
        if config.allreduce:
            group = [d.index for d in devices]
            factor = busbw_factor(len(devices))
            seen_labels: set[str] = set()
            for ops_name in ops_names:
                for size in config.sizes_bytes:
                    value, error = step(
                        f"all-reduce {ops_name} {format_size(size)}",
                        group,
                        lambda cancel, ops_name=ops_name, size=size: bench.measure_allreduce(ops_name, size, cancel),
                        any_error=True,
                    )
                    if error is not None:
                        result.allreduce_results.append(AllReduceResult(ops_name, group, size, error=error))
                        continue
                    ops_label, size_bytes, seconds = value
                    if ops_name == "default" and ops_label.split(" ")[0] in seen_labels:
                        continue  # TF's default is one of the ops already measured
                    seen_labels.add(ops_label)
                    result.allreduce_results.append(
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
    except KeyboardInterrupt:
        result.interrupted = True
        result.notes.append("interrupted (Ctrl-C): the figures are those measured before it")
    result.wall_s = time.perf_counter() - started
    return result
