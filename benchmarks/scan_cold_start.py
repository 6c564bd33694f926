"""Cold start of `gputopo scan --machine dgx-h100 --json` against a bare `python -c pass`.

Why: `scan` is the command people run first and scripts run often; it must stay a light process
(no TensorFlow, no pynvml when a reference machine is asked for). Both commands run as fresh
processes of the same interpreter, interleaved, several times; the medians and their ratio are
printed. A separate run with `-X importtime` lists every module the scan imported, to confirm that
TensorFlow (and pynvml) stayed out.

Usage: python benchmarks/scan_cold_start.py [--repeats N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCAN = [sys.executable, "-m", "gputopo", "scan", "--machine", "dgx-h100", "--json"]
BARE = [sys.executable, "-c", "pass"]
MUST_NOT_IMPORT = ("tensorflow", "pynvml", "keras")


def run_once_s(cmd: list[str]) -> float:
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    elapsed_s = time.perf_counter() - start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.strip()}")
    return elapsed_s


def imported_modules(cmd: list[str]) -> tuple[set[str], dict]:
    """Top-level module names imported by ``cmd`` (from -X importtime) and its JSON output."""
    result = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=REPO, capture_output=True, text=True)
    if result.returncode != 0:
        raise SystemExit(f"scan failed: {result.stderr.strip()[-500:]}")
    modules = set()
    for line in result.stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name and name != "imported package":
                modules.add(name.split(".")[0])
    return modules, json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7, help="runs of each command (default 7)")
    args = parser.parse_args()

    run_once_s(SCAN)  # warm the OS file cache and __pycache__ so every measured run is alike
    run_once_s(BARE)
    scan_s, bare_s = [], []
    for _ in range(args.repeats):  # interleaved, so background load hits both alike
        bare_s.append(run_once_s(BARE))
        scan_s.append(run_once_s(SCAN))
    scan_median_s, bare_median_s = statistics.median(scan_s), statistics.median(bare_s)

    modules, topo = imported_modules(SCAN)
    leaked = [m for m in MUST_NOT_IMPORT if m in modules]

    print(f"interpreter: {sys.executable} (Python {sys.version.split()[0]})")
    print(f"repeats: {args.repeats} each, interleaved; medians of cold processes")
    print(f"{'python -c pass':<50}: {bare_median_s * 1000:7.1f} ms "
          f"(min {min(bare_s) * 1000:.1f}, max {max(bare_s) * 1000:.1f})")
    print(f"{'python -m gputopo scan --machine dgx-h100 --json':<50}: {scan_median_s * 1000:7.1f} ms "
          f"(min {min(scan_s) * 1000:.1f}, max {max(scan_s) * 1000:.1f})")
    print(f"ratio scan / bare python: {scan_median_s / bare_median_s:.1f}x "
          f"(scan's own cost {(scan_median_s - bare_median_s) * 1000:.1f} ms)")
    print(f"modules imported by scan: {len(modules)} top-level; output has {len(topo['gpus'])} GPUs, "
          f"{len(topo['links'])} links, {len(topo['diagnostics'])} findings")
    for name in MUST_NOT_IMPORT:
        print(f"  {name:<10} imported: {'YES' if name in modules else 'no'}")
    if leaked:
        raise SystemExit(f"FAIL: scan imported {', '.join(leaked)}")


if __name__ == "__main__":
    main()
