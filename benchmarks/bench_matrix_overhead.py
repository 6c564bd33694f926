"""A full bench-p2p matrix on logical CPU devices: wall time against the copies it contains, and
peak memory against TensorFlow's own, each in a fresh process as a user runs it.

Targets (issue 14):
- wall time of the run <= 2x the summed duration of its warm-up and timed copies. bench-p2p's JSON
  says both: ``wall_s`` (the measuring run, TensorFlow's import excluded) and
  ``copy_seconds_total`` (every warm-up and timed interval, syncs at their ends included); the
  rest is what the run spends around the copies: tracing, instantiating the function on each pair,
  making source tensors, the step threads.
- peak memory about two buffers (a source and its copy) per copy in flight above TensorFlow's
  baseline. The both-ways step has two copies in flight (two sources, two copies), so the
  expected (peak - baseline) / (2 x size) is about 2. Peak RSS is the child's ``ru_maxrss``
  (``os.wait4``); the baseline is a child that only imports TensorFlow and configures the devices,
  and (finer) the same bench-p2p run at 4 KiB, whose buffers are nothing: what is left is TF's
  runtime, the traced functions and their executors.

With ``--baseline DIR`` (another checkout's root, e.g. from ``git archive``) its bench-p2p runs
too, alternating with this one's (so drifting load hits both alike): before/after figures.

Run:  .venv/bin/python benchmarks/bench_matrix_overhead.py [--cpu-devices 8] [--size 64MiB]
      [--repeats 1] [--baseline DIR] [-- other bench-p2p options, e.g. --min-sample-ms 1]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gputopo.notation import format_size, parse_size  # noqa: E402

PY = sys.executable
MB = 1e6


@dataclass
class Child:
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    stdout: str


def run_child(cmd: list[str], root: Path = REPO) -> Child:
    """Run ``cmd`` on the gputopo in ``root``; its wall time, CPU time and peak RSS (this child's
    own, from ``os.wait4``)."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", "PYTHONPATH": str(root)}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=root, stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        wall_s = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({proc.returncode}): {err.read().decode()[-800:]}")
        return Child(wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, out.read().decode())


def baseline_child(cpu_devices: int) -> Child:
    """A process that only imports TensorFlow and configures the logical devices, as bench-p2p does."""
    code = (
        "from gputopo.bench.engine import prepare_environment; prepare_environment(); "
        "from gputopo.tfruntime import configure_logical_cpu_devices; "
        f"configure_logical_cpu_devices({cpu_devices})"
    )
    return run_child([PY, "-c", code])


def bench_child(cpu_devices: int, size: str, extra: list[str], root: Path = REPO) -> tuple[Child, dict]:
    child = run_child(
        [PY, "-m", "gputopo", "bench-p2p", "--cpu-devices", str(cpu_devices), "--size", size, "--json", *extra],
        root,
    )
    return child, json.loads(child.stdout)


def report(label: str, runs: list[tuple[Child, dict]], size_bytes: int, floors: dict[str, int]) -> None:
    """Medians of the runs: wall against copies (where the JSON has them), peak RSS against floors."""
    data = runs[0][1]
    wall_s = statistics.median(j["wall_s"] for _, j in runs)
    process_s = statistics.median(c.wall_s for c, _ in runs)
    gbps = statistics.median(p["gbps"] for p in data["pairs"] if p["gbps"])
    print(f"{label}, median of {len(runs)}:")
    print(f"  wall {wall_s:.1f} s (process {process_s:.1f} s with TensorFlow's import); uni GB/s median {gbps:.2f}")
    if "copy_seconds_total" in data:
        copy_s = statistics.median(j["copy_seconds_total"] for _, j in runs)
        ratio = statistics.median(j["wall_s"] / j["copy_seconds_total"] for _, j in runs)
        calls = statistics.median(j["copy_calls_total"] for _, j in runs)
        print(f"  warm-up + timed copies {copy_s:.1f} s in {calls:.0f} calls; wall / copies = {ratio:.2f} (target <= 2)")
    peak = max(c.peak_rss_bytes for c, _ in runs)
    for floor_label, floor in floors.items():
        print(
            f"  peak RSS {peak / MB:.0f} MB; above the {floor_label} {(peak - floor) / MB:.0f} MB = "
            f"{(peak - floor) / (2 * size_bytes):.2f} x (2 x {format_size(size_bytes)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cpu-devices", type=int, default=8)
    parser.add_argument("--size", default="64MiB")
    parser.add_argument("--repeats", type=int, default=1, help="full runs (medians are printed)")
    parser.add_argument("--baseline", type=Path, help="another checkout's root to compare with")
    parser.add_argument("extra", nargs="*", help="other bench-p2p options (after --)")
    args = parser.parse_args()
    size_bytes = parse_size(args.size)
    n = args.cpu_devices

    print(f"host: {os.cpu_count()} CPUs; load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    base = baseline_child(n)
    print(
        f"TensorFlow baseline (import + {n} logical CPU devices): peak RSS {base.peak_rss_bytes / MB:.0f} MB, "
        f"{base.wall_s:.1f} s wall"
    )
    tiny, tiny_json = bench_child(n, "4KiB", args.extra)
    print(
        f"bench-p2p --cpu-devices {n} --size 4KiB: peak RSS {tiny.peak_rss_bytes / MB:.0f} MB "
        f"(runtime, traced functions, executors); run {tiny_json['wall_s']:.1f} s"
    )
    floors = {"TF baseline": base.peak_rss_bytes, "4 KiB run": tiny.peak_rss_bytes}
    roots = {"this checkout": REPO, **({f"baseline {args.baseline}": args.baseline} if args.baseline else {})}
    runs: dict[str, list[tuple[Child, dict]]] = {label: [] for label in roots}
    for _ in range(args.repeats):
        for label, root in roots.items():
            runs[label].append(bench_child(n, args.size, args.extra, root))
    data = runs["this checkout"][0][1]
    print(
        f"bench-p2p --cpu-devices {n} --size {args.size}: {len(data['pairs'])} pairs one way, "
        f"{len(data['pairs']) // 2} both ways, latency; {data['repeats']} repeats, {data['warmup']} warm-up"
        f"{'; ' + ' '.join(args.extra) if args.extra else ''}"
    )
    for label, results in runs.items():
        report(label, results, size_bytes, floors)
    print(
        "  memory target: about 1 x (2 x size) per copy in flight; the both-ways step has 2 in flight, "
        "so about 2"
    )


if __name__ == "__main__":
    main()
