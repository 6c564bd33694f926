"""bench-p2p's host-memory figure against a plain NumPy copy of the same bytes, in one run.

Why: on logical CPU devices bench-p2p must report what copying memory really costs. A ratio far
above 1 would mean a zero-copy op (tf.identity between logical CPU devices reports hundreds of
GB/s); far below 1 would mean TensorFlow's dispatch, not the copy, dominates the clock. Target
(issue 14): at least 0.9x NumPy's multi-threaded copy at 64 MiB and 256 MiB. Also prints the wall
time of a full 8x8 matrix (default size, repeats and warm-up) on 8 logical devices beside the
summed duration of its warm-up and timed copies (benchmarks/bench_matrix_overhead.py runs it as a
fresh process and adds peak memory).

TensorFlow's DeepCopy splits a large copy over its thread pool while ``np.copyto`` uses one thread,
so a second NumPy column copies the same bytes in one chunk per CPU on threads (NumPy releases the
GIL while copying): the ratio against it is the like-for-like one.

Run:  .venv/bin/python benchmarks/bench_p2p_vs_numpy.py [--sizes 4MiB,64MiB,256MiB] [--repeat 7]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from gputopo.bench.engine import CopyBench, prepare_environment  # noqa: E402
from gputopo.bench.options import DEFAULT_MIN_SAMPLE_S, BenchConfig  # noqa: E402
from gputopo.bench.run import cpu_bench_devices, run_benchmark  # noqa: E402
from gputopo.notation import MIB, format_size, parse_size_sweep  # noqa: E402
from gputopo.tfruntime import configure_logical_cpu_devices, import_tensorflow  # noqa: E402

TARGET_SIZES = (64 * MIB, 256 * MIB)  # where bench-p2p must reach 0.9x NumPy's multi-threaded copy


class NumpyCopy:
    """``np.copyto`` of ``size_bytes`` into a preallocated array; ``threads`` > 1 copies one slice
    per thread (NumPy releases the GIL while copying)."""

    def __init__(self, size_bytes: int, threads: int = 1) -> None:
        self.size_bytes = size_bytes
        self.src = np.random.randint(0, 256, size_bytes, dtype=np.uint8)
        self.dst = np.empty_like(self.src)
        bounds = [size_bytes * k // threads for k in range(threads + 1)]
        self.chunks = [(self.dst[lo:hi], self.src[lo:hi]) for lo, hi in zip(bounds, bounds[1:])]
        self.pool = ThreadPoolExecutor(threads) if threads > 1 else None

    def copy(self) -> None:
        if self.pool is None:
            np.copyto(self.dst, self.src)
        else:
            list(self.pool.map(lambda pair: np.copyto(*pair), self.chunks))

    def sample_gbps(self, warmup: int, min_sample_s: float) -> float:
        """One sample taken as bench-p2p takes one: warm-up, calibrate the call count, time."""
        for _ in range(warmup + 1):
            self.copy()
        t0 = time.perf_counter()
        self.copy()
        first_s = time.perf_counter() - t0
        calls = max(1, math.ceil(min_sample_s / max(first_s, 1e-9)))
        t0 = time.perf_counter()
        for _ in range(calls):
            self.copy()
        return self.size_bytes / ((time.perf_counter() - t0) / calls) / 1e9

    def close(self) -> None:
        if self.pool is not None:
            self.pool.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4MiB,64MiB,256MiB")
    parser.add_argument("--repeat", type=int, default=7, help="rounds (one sample of each column per round)")
    parser.add_argument("--skip-matrix", action="store_true", help="skip the full 8x8 matrix timing")
    args = parser.parse_args()
    sizes = parse_size_sweep(args.sizes)

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    prepare_environment()  # as `gputopo bench-p2p` does before importing TensorFlow
    names = configure_logical_cpu_devices(8)
    tf = import_tensorflow()
    devices = cpu_bench_devices(names, None)
    threads = os.cpu_count() or 1
    print(
        f"host: {threads} CPUs; TensorFlow {tf.__version__}; NumPy {np.__version__}; "
        f"TF_CPU_ALLOCATOR_USE_BFC={os.environ.get('TF_CPU_ALLOCATOR_USE_BFC')}"
    )
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on the host adds noise)")
    print(
        f"bench-p2p CPU 0 -> 1 vs np.copyto of the same bytes: {args.repeat} rounds, each one sample of every "
        "column in turn (so drifting load hits all alike); medians"
    )
    print(
        f"{'size':>10} {'bench-p2p GB/s':>15} {'numpy 1 thr':>12} {'ratio':>6} "
        f"{f'numpy {threads} thr':>12} {'ratio':>6}"
    )
    cancel = threading.Event()
    for size in sizes:
        # The engine bench-p2p runs, one sample per round (repeat=1), same warm-up and sample length.
        config = BenchConfig(sizes_bytes=[size], repeat=1, warmup=2)
        bench = CopyBench(tf, devices[:2], "CPU", config)
        single, multi = NumpyCopy(size), NumpyCopy(size, threads)
        columns: dict[str, list[float]] = {"bench": [], "numpy1": [], "numpyN": []}
        for _ in range(args.repeat):
            seconds = bench.measure_uni(devices[0].tf_name, devices[1].tf_name, size, cancel)[0]
            columns["bench"].append(size / seconds / 1e9)
            columns["numpy1"].append(single.sample_gbps(2, DEFAULT_MIN_SAMPLE_S))
            columns["numpyN"].append(multi.sample_gbps(2, DEFAULT_MIN_SAMPLE_S))
        bench.drop_sources()
        single.close()
        multi.close()
        bench_gbps, numpy_gbps, numpy_mt_gbps = (statistics.median(columns[k]) for k in ("bench", "numpy1", "numpyN"))
        target = "  (target >= 0.90)" if size in TARGET_SIZES else ""
        print(
            f"{format_size(size):>10} {bench_gbps:15.2f} {numpy_gbps:12.2f} {bench_gbps / numpy_gbps:6.2f} "
            f"{numpy_mt_gbps:12.2f} {bench_gbps / numpy_mt_gbps:6.2f}{target}"
        )

    if not args.skip_matrix:
        config = BenchConfig()  # what `gputopo bench-p2p --cpu-devices 8` does by default
        started = time.perf_counter()
        result = run_benchmark(tf, devices, "CPU", config)
        wall_s = time.perf_counter() - started
        figures = sorted(p.headline().uni_gbps.median for p in result.pairs.values() if p.headline())
        latencies = sorted(p.latency_us.median for p in result.pairs.values() if p.latency_us)
        print(
            f"full 8x8 matrix at {format_size(config.sizes_bytes[0])} "
            f"(uni + bidir + latency, {config.repeat} repeats): "
            f"{wall_s:.1f} s wall; uni GB/s min {figures[0]:.2f} median {statistics.median(figures):.2f} "
            f"max {figures[-1]:.2f}; latency us median {statistics.median(latencies):.0f}"
        )
        print(
            f"  warm-up + timed copies {result.copy_seconds_total:.1f} s in {result.copy_calls_total} calls; "
            f"wall / copies = {result.wall_s / result.copy_seconds_total:.2f} (target <= 2)"
        )


if __name__ == "__main__":
    main()
