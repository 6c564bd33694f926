"""``bench-p2p``'s measuring engine: copy bandwidth, latency and all-reduce with TensorFlow ops.

Why TensorFlow and not CUDA: users train with TensorFlow, so what matters is the bandwidth TF's own
cross-device copies reach. Each copy is a ``tf.function`` that takes a tensor living on the source
device and returns a copy made by an op placed (``tf.device``) on the destination:

- GPUs: ``tf.identity`` on the destination GPU; TF inserts a Send/Recv pair that is a real
  device-to-device DMA (peer-to-peer where the driver allows it, staged by the driver otherwise).
- Logical CPU devices: ``tf.identity`` would hand over the same buffer (zero-copy, hundreds of
  fantasy GB/s), so ``tf.raw_ops.DeepCopy`` (a stateful op: never pruned or merged) copies bytes.

Only the device names and the copy op differ, so the CPU tests exercise the code GPUs run.

Timing: the source tensor is made on the source device (random data once per size, then copies of
it) and passed as an argument (nothing to constant-fold), the result is returned (nothing to
prune). One untimed call instantiates the function on the pair and allocates; then every interval
is ``t0; N calls; sync(step's devices); t1`` - the calls only enqueue device work and nothing is
read back to the host, so the clock covers the copies (and TF's dispatch of them) and nothing else.
The ``warmup`` calls are timed one by one but not reported; the last one sets N so that each of
the ``repeat`` samples lasts at least ``min_sample_s``. ``copy_seconds_total`` sums every warm-up
and timed interval, so a run can say how much of its wall time was copying.

Running every pair with step timeouts, Ctrl-C and error handling is ``gputopo.bench.run``'s job.
"""

from __future__ import annotations

import math
import os
import re
import threading
import time
from typing import Any, Callable

from gputopo.bench.options import BenchConfig
from gputopo.bench.results import BenchDevice

MAX_CALLS_PER_SAMPLE = 2000
HOST_DEVICE = "/device:CPU:0"
TINY_BYTES = 4  # what the untimed call that instantiates a copy function on a pair copies


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


class BenchStepError(Exception):
    """A step cannot be measured as asked (e.g. TF put the source tensor on another device)."""


class BytesMismatch(BenchStepError):
    """A timed copy's destination does not hold its source's bytes (checksums differ); ``which``:
    the positions of the step's copies that differ."""

    def __init__(self, message: str, which: list[int]):
        super().__init__(message)
        self.which = which


class StepCancelled(Exception):
    """Raised inside a worker whose step was abandoned (timeout or Ctrl-C)."""


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
        self._tiny: dict[str, Any] = {}
        self._functions: dict[tuple[str, ...], Any] = {}
        self._strategies: dict[str, tuple[Any, str]] = {}
        # What every measurement spent in its warm-up and timed intervals (see the module docstring).
        self._totals_lock = threading.Lock()
        self.copy_seconds_total = 0.0
        self.copy_calls_total = 0

    # tensors and functions

    def source_tensor(self, device: str, size_bytes: int) -> Any:
        """``size_bytes`` of random uint8 made on ``device`` itself (no host round trip, no constant)."""
        return self.step_sources([device], size_bytes)[0]

    def step_sources(self, devices: list[str], size_bytes: int) -> list[Any]:
        """The source tensors of one step, one per device in ``devices``; every other source is
        dropped, so a run holds only its current step's sources (its memory stays about two buffers
        per copy in flight). A missing one is a copy of one already there (milliseconds; random
        numbers take a quarter of a second per 64 MiB on a slow host), random data only at first."""
        kept = {key: self._sources[key] for key in [(d, size_bytes) for d in devices] if key in self._sources}
        origin = next(iter(kept.values()), None)
        if origin is None:
            origin = next((t for (_, size), t in self._sources.items() if size == size_bytes), None)
        for device in devices:
            if (device, size_bytes) not in kept:
                origin = kept[(device, size_bytes)] = self._new_source(device, size_bytes, origin)
        self._sources = kept
        return [kept[(d, size_bytes)] for d in devices]

    def _new_source(self, device: str, size_bytes: int, origin: Any) -> Any:
        tf = self.tf
        with tf.device(device):
            if origin is not None:  # random bytes already made at this size, copied onto ``device``
                data = self._copy(origin)
            else:
                words = math.ceil(size_bytes / 4)
                data = tf.random.uniform([words], minval=tf.int32.min, maxval=tf.int32.max, dtype=tf.int32)
                data = tf.reshape(tf.bitcast(data, tf.uint8), [-1])
                if words * 4 != size_bytes:
                    data = data[:size_bytes]
        # Soft placement would silently fall back to the CPU where a kernel is missing; a source
        # tensor anywhere else than asked would time the wrong copy.
        if not same_device(data.device, device):
            raise BenchStepError(f"TensorFlow made the source tensor on {data.device}, not on {device}")
        return data

    def drop_sources(self) -> None:
        """Free the source tensors (between sizes, so that a sweep never holds two sizes at once)."""
        self._sources = {}

    def tiny_source(self, device: str) -> Any:
        """4 bytes on ``device`` (made as the sources are): instantiating a copy function on a pair
        needs no more."""
        if device not in self._tiny:
            self._tiny[device] = self._new_source(device, TINY_BYTES, None)
        return self._tiny[device]

    # The copy functions take byte vectors of any length: one trace serves every size, and the
    # function instantiated on a pair with 4 bytes (see ``seconds_per_call``) serves them too.

    def uni_function(self, dst: str) -> Any:
        """``f(x)``: a copy of ``x`` (on its source device) made on ``dst``."""
        key = ("uni", dst)
        if key not in self._functions:
            tf, copy, bytes_spec = self.tf, self._copy, self._bytes_spec()

            @tf.function(autograph=False, input_signature=[bytes_spec])
            def copy_to(x: Any) -> Any:
                with tf.device(dst):
                    return copy(x)

            self._functions[key] = copy_to
        return self._functions[key]

    def bidir_function(self, a: str, b: str) -> Any:
        """``f(x_a, x_b)``: both copies at once; they have no dependency, so TF runs them together."""
        key = ("bidir", a, b)
        if key not in self._functions:
            tf, copy, bytes_spec = self.tf, self._copy, self._bytes_spec()

            @tf.function(autograph=False, input_signature=[bytes_spec, bytes_spec])
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
            tf, copy, host, bytes_spec = self.tf, self._copy, self.host_device, self._bytes_spec()

            @tf.function(autograph=False, input_signature=[bytes_spec])
            def via_host(x: Any) -> Any:
                with tf.device(host):
                    staged = copy(x)
                with tf.device(dst):
                    return copy(staged)

            self._functions[key] = via_host
        return self._functions[key]

    def _bytes_spec(self) -> Any:
        return self.tf.TensorSpec([None], self.tf.uint8)

    # timing

    def device_sync(self, devices: list[str] | None) -> Callable[[], None]:
        """A function that waits until ``devices`` (None: all) have finished their queued work.

        ``tf.test.experimental.sync_devices`` runs TF's SyncDevice op on every device, 8 of them on
        an 8-GPU box (about 0.3 ms on a slow host); a step only needs its own devices' (0.04 ms).
        With asynchronous eager execution (not bench-p2p's) TF's own function also drains its queue.
        """
        tf = self.tf
        if devices is None or not tf.config.experimental.get_synchronous_execution():
            return tf.test.experimental.sync_devices
        sync_op = tf.raw_ops.SyncDevice

        def sync() -> None:
            for device in devices:
                with tf.device(device):
                    sync_op()

        return sync

    def seconds_per_call(
        self,
        fn: Any,
        args: tuple[Any, ...],
        cancel: threading.Event,
        devices: list[str] | None = None,
        first_args: tuple[Any, ...] | None = None,
        check: Callable[[Any], None] | None = None,
    ) -> list[float]:
        """``repeat`` samples of the mean time of one call, each interval ending with a sync of
        ``devices`` (None: all), the one before it having ended with one too. The untimed first
        call, which instantiates the function on the devices, takes ``first_args`` (default:
        ``args``): for a copy, 4 bytes on each source device, so no large copy goes uncounted.

        Results are dropped as soon as a call returns, so one step holds its sources and one result
        per copy: the memory a run needs above TensorFlow's own is two buffers per copy in flight.
        The last timed call's result is kept and handed to ``check`` after the clock has stopped
        (the byte check: ``BytesMismatch`` where the copy is not its source).
        """
        sync = self.device_sync(devices)
        perf = time.perf_counter
        # A concrete function skips the per-call signature matching of a tf.function (hundreds of
        # microseconds on a slow host), so less of TF's dispatch lands inside the clock.
        fn = fn.get_concrete_function(*args)
        fn(*(first_args or args))  # instantiates the function on these devices; never timed
        sync()

        kept: list[Any] = []

        def interval_s(calls: int, keep: bool = False) -> float:
            t0 = perf()
            for _ in range(calls - 1 if keep else calls):
                fn(*args)
            if keep:
                kept.append(fn(*args))
            sync()
            return perf() - t0

        # Warm-up calls are timed one by one (the last sets the calls per sample); with none, one
        # call only calibrates. Neither is reported.
        warmup_s = [interval_s(1) for _ in range(max(1, self.config.warmup))]
        calls = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(self.config.min_sample_s / max(warmup_s[-1], 1e-9))))
        intervals_s: list[float] = []
        for k in range(self.config.repeat):
            if cancel.is_set():
                raise StepCancelled()
            intervals_s.append(interval_s(calls, keep=check is not None and k == self.config.repeat - 1))
        with self._totals_lock:
            self.copy_seconds_total += sum(warmup_s) + sum(intervals_s)
            self.copy_calls_total += len(warmup_s) + calls * len(intervals_s)
        if check is not None and kept:
            check(kept.pop())
        return [s / calls for s in intervals_s]

    # the byte check

    def checksum(self, device: str, x: Any) -> tuple[int, ...]:
        """A checksum of the bytes of ``x`` computed on ``device`` (where ``x`` lives: no copy to
        the host): the sum, the sum of squares and a position-weighted sum of its 32-bit words
        (wrapping, so the order of the additions does not matter), which zeros, all-0xFF, stale or
        shifted data all change. Three numbers come back to the host."""
        tf = self.tf
        if "checksum" not in self._functions:

            @tf.function(autograph=False, input_signature=[self._bytes_spec()])
            def checksum(data: Any) -> Any:
                size = tf.size(data)
                words = tf.cond(
                    tf.equal(size % 4, 0),
                    lambda: tf.reshape(tf.bitcast(tf.reshape(data, [-1, 4]), tf.int32), [-1]),
                    lambda: tf.cast(data, tf.int32),
                )
                weights = tf.range(tf.size(words), dtype=tf.int32) % 251 + 1
                return tf.stack([tf.reduce_sum(words), tf.reduce_sum(words * words), tf.reduce_sum(words * weights)])

            self._functions["checksum"] = checksum
        with tf.device(device):
            return tuple(int(v) for v in self._functions["checksum"](x).numpy())

    def byte_check(self, sources: list[tuple[str, Any]], destinations: list[str]) -> Callable[[Any], None]:
        """``check(result)`` for a step whose result is one copy (or a tuple of copies) of
        ``sources`` (device, tensor) made on ``destinations``: each copy's checksum, on its device,
        against its source's, on its own; ``BytesMismatch`` names the first pair that differs."""

        def check(result: Any) -> None:
            copies = result if isinstance(result, (tuple, list)) else (result,)
            wrong = [
                k for k, ((src, x), dst, copy) in enumerate(zip(sources, destinations, copies))
                if int(tf_size(copy)) != int(tf_size(x)) or self.checksum(dst, copy) != self.checksum(src, x)
            ]
            if wrong:
                (src, _), dst = sources[wrong[0]], destinations[wrong[0]]
                raise BytesMismatch(
                    f"the bytes copied to {dst} are not those of {src} (checksums differ); the figure is not reported",
                    wrong,
                )

        tf_size = self.tf.size
        return check

    def measure_uni(self, src: str, dst: str, size_bytes: int, cancel: threading.Event) -> list[float]:
        (x,) = self.step_sources([src], size_bytes)
        first = (self.tiny_source(src),)
        check = self.byte_check([(src, x)], [dst])
        return self.seconds_per_call(self.uni_function(dst), (x,), cancel, [src, dst], first, check)

    def measure_bidir(self, a: str, b: str, size_bytes: int, cancel: threading.Event) -> list[float]:
        x_a, x_b = self.step_sources([a, b], size_bytes)
        first = (self.tiny_source(a), self.tiny_source(b))
        check = self.byte_check([(b, x_b), (a, x_a)], [a, b])  # the function returns (to_a, to_b)
        return self.seconds_per_call(self.bidir_function(a, b), (x_a, x_b), cancel, [a, b], first, check)

    def measure_via_host(self, src: str, dst: str, size_bytes: int, cancel: threading.Event) -> list[float]:
        (x,) = self.step_sources([src], size_bytes)
        first = (self.tiny_source(src),)
        devices = [src, self.host_device, dst]
        check = self.byte_check([(src, x)], [dst])
        return self.seconds_per_call(self.via_host_function(dst), (x,), cancel, devices, first, check)

    def concurrent_function(self, pairs: list[tuple[str, str]]) -> Any:
        """``f(x_1, ..., x_n)``: each source copied to its destination, all at once (no dependency
        between them, so TF runs them together): a round of ``--concurrent``."""
        key = ("many", *(f"{src}>{dst}" for src, dst in pairs))
        if key not in self._functions:
            tf, copy, bytes_spec = self.tf, self._copy, self._bytes_spec()

            @tf.function(autograph=False, input_signature=[bytes_spec] * len(pairs))
            def all_at_once(*sources: Any) -> Any:
                copies = []
                for (_, dst), x in zip(pairs, sources):
                    with tf.device(dst):
                        copies.append(copy(x))
                return tuple(copies)

            self._functions[key] = all_at_once
        return self._functions[key]

    def measure_concurrent(self, pairs: list[tuple[str, str]], size_bytes: int, cancel: threading.Event) -> list[float]:
        """Seconds per call of one round: every pair (disjoint devices) copying ``size_bytes`` at once."""
        sources = self.step_sources([src for src, _ in pairs], size_bytes)
        first = tuple(self.tiny_source(src) for src, _ in pairs)
        devices = list(dict.fromkeys(d for pair in pairs for d in pair))
        check = self.byte_check([(src, x) for (src, _), x in zip(pairs, sources)], [dst for _, dst in pairs])
        return self.seconds_per_call(self.concurrent_function(pairs), tuple(sources), cancel, devices, first, check)

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
