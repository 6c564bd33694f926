"""Cold start of gputopo's light commands against a bare `python -c pass`, side by side in one run.

Why: `scan` is the command people run first and scripts run often; it must stay a light process
(no TensorFlow, no pynvml when a file or a reference machine is asked for, no rich for --json).
Every command below runs as a fresh process of the same interpreter, interleaved (so background
load hits them alike), several times; the medians, their spread and their ratio to the bare
interpreter start are printed, against the targets of issue 14 (scan --json <= 4x, human <= 5x).
Then `-X importtime` runs of `scan --json` and the human `scan` list the slowest imports and
check that TensorFlow, pynvml and (for --json) rich stayed out.

Usage: python benchmarks/scan_cold_start.py [--repeats N] [--top N] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FIXTURE = str(REPO / "tests/fixtures/shared/topo/dgx1_v100_8gpu_mlx5.txt")
PY = sys.executable
GPUTOPO = [PY, "-m", "gputopo"]

# (label, argv, target ratio to the bare start or None)
COMMANDS: list[tuple[str, list[str], float | None]] = [
    ("python -c pass", [PY, "-c", "pass"], None),
    ('python -c "import gputopo"', [PY, "-c", "import gputopo"], None),
    ("scan --from dgx1.txt --json", [*GPUTOPO, "scan", "--from", FIXTURE, "--json"], 4.0),
    ("scan --from dgx1.txt (human, COLUMNS=120)", [*GPUTOPO, "scan", "--from", FIXTURE], 5.0),
    ("recommend --machine dgx1 --gpus 4 --json", [*GPUTOPO, "recommend", "--machine", "dgx1", "--gpus", "4", "--json"], None),
]
MUST_NOT_IMPORT = {
    "scan --json": ("tensorflow", "pynvml", "keras", "rich", "pydantic"),
    "scan (human)": ("tensorflow", "pynvml", "keras", "pydantic"),
}
ENV = {**os.environ, "COLUMNS": "120"}


def run_once_s(cmd: list[str], cwd: Path = REPO) -> tuple[float, float]:
    """Wall time and CPU time (user + system) of one fresh process; its output goes to /dev/null
    (as a script piping it would). On a shared machine the CPU time varies less than the wall time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    result = subprocess.run(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=ENV)
    elapsed_s = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({result.returncode}): {result.stderr.decode().strip()[-500:]}")
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed_s, cpu_s


def import_times(cmd: list[str]) -> list[tuple[int, int, str]]:
    """(cumulative us, self us, module) for every module ``cmd`` imported (``-X importtime``)."""
    result = subprocess.run([cmd[0], "-X", "importtime", *cmd[1:]], cwd=REPO, capture_output=True, text=True, env=ENV)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed: {result.stderr.strip()[-500:]}")
    rows = []
    for line in result.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[len("import time:"):].split("|"))
        if self_us.isdigit():
            rows.append((int(cumulative_us), int(self_us), name))
    return rows


def top_level_packages(rows: list[tuple[int, int, str]]) -> list[tuple[int, str]]:
    """The top-level packages, slowest first, by the cumulative time of their outermost import."""
    totals: dict[str, int] = {}
    for cumulative_us, _self_us, name in rows:
        top = name.strip().split(".")[0]
        totals[top] = max(totals.get(top, 0), cumulative_us)
    return sorted(((us, top) for top, us in totals.items()), reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9, help="runs of each command (default 9)")
    parser.add_argument("--top", type=int, default=15, help="how many slowest imports to list (default 15)")
    parser.add_argument("--baseline", type=Path, metavar="DIR",
                        help="also time the gputopo commands of another checkout (a folder holding gputopo/, e.g. "
                        "`git worktree add DIR HEAD~1`), interleaved in the same run")
    args = parser.parse_args()

    rows = [(label, cmd, target, REPO) for label, cmd, target in COMMANDS]
    if args.baseline:
        rows += [(f"[baseline] {label}", cmd, None, args.baseline.resolve())
                 for label, cmd, _target in COMMANDS if cmd[:3] == GPUTOPO]
    for _label, cmd, _target, cwd in rows:  # warm the OS file cache and __pycache__
        run_once_s(cmd, cwd)
    wall_s: dict[str, list[float]] = {label: [] for label, *_ in rows}
    cpu_s: dict[str, list[float]] = {label: [] for label, *_ in rows}
    for _ in range(args.repeats):
        for label, cmd, _target, cwd in rows:
            elapsed_s, used_cpu_s = run_once_s(cmd, cwd)
            wall_s[label].append(elapsed_s)
            cpu_s[label].append(used_cpu_s)
    bare = COMMANDS[0][0]
    bare_wall_s, bare_cpu_s = statistics.median(wall_s[bare]), statistics.median(cpu_s[bare])

    print(f"interpreter: {PY} (Python {sys.version.split()[0]}), {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"repeats: {args.repeats} each, interleaved; medians of cold processes, output to /dev/null")
    print(f"{'command':<55} {'wall':>8} {'min':>7} {'max':>7} {'ratio':>6} | {'CPU':>7} {'ratio':>6}  target (wall)")
    failed = []
    for label, _cmd, target, _cwd in rows:
        wall_median_s, cpu_median_s = statistics.median(wall_s[label]), statistics.median(cpu_s[label])
        ratio = wall_median_s / bare_wall_s
        verdict = ""
        if target is not None:
            verdict = f"<= {target:.0f}x {'met' if ratio <= target else 'NOT MET'}"
            if ratio > target:
                failed.append(label)
        print(f"{label:<55} {wall_median_s * 1000:6.1f}ms {min(wall_s[label]) * 1000:5.1f}ms "
              f"{max(wall_s[label]) * 1000:5.1f}ms {ratio:5.2f}x | {cpu_median_s * 1000:5.1f}ms "
              f"{cpu_median_s / bare_cpu_s:5.2f}x  {verdict}")

    for title, cmd in (("scan --json", COMMANDS[2][1]), ("scan (human)", COMMANDS[3][1])):
        rows = import_times(cmd)
        modules = {name.strip().split(".")[0] for _, _, name in rows}
        print(f"\n-X importtime, {title}: {len(rows)} modules, {len(modules)} top-level packages")
        print("  slowest top-level imports (cumulative):")
        for us, top in top_level_packages(rows)[: args.top]:
            print(f"    {us / 1000:7.1f} ms  {top}")
        print("  slowest modules by their own time:")
        for _cum, self_us, name in sorted(rows, key=lambda r: r[1], reverse=True)[: args.top]:
            print(f"    {self_us / 1000:7.1f} ms  {name.strip()}")
        leaked = [m for m in MUST_NOT_IMPORT[title] if m in modules]
        print(f"  must not import {', '.join(MUST_NOT_IMPORT[title])}: "
              f"{'LEAKED ' + ', '.join(leaked) if leaked else 'none imported'}")
        if leaked:
            failed.append(f"{title} imported {', '.join(leaked)}")
    if failed:
        print(f"\nnot met: {'; '.join(failed)}")


if __name__ == "__main__":
    main()
