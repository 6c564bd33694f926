"""recommend's worst cases: seconds and budget steps against GPU count, with large --gpus and
--alternatives. Prints figures; asserts nothing.

Issue 36 found the search's budget bounded nodes, not work: a 512-GPU ``topo -m`` with ``--gpus
500`` took 121 s (every node could start ring searches of 50,000 steps each), a group of ~490 GPUs
crashed the ring search with a RecursionError, and ``--alternatives`` had no bound. Every search of
a call now counts its work in one budget (``gputopo/analysis/recommend/budget.py``), so the time
should stop growing with the size once the budget is what stops the search.

The machines are generated here (nothing to download), in a child process per case (a cold
``recommend()`` call, CPU seconds of the call alone, the topology built before the clock starts):

- ``random``: every pair a random link word (NV1..NV4, PIX, PXB, PHB, NODE, SYS; one pair in five
  without P2P), GPUs on two NUMA nodes: no two GPUs interchangeable, the search's hardest case;
- ``nvswitch``: every pair NV18 through NVSwitch, two NUMA nodes: twin classes settle it.

Each size runs with ``--gpus`` n - 8 and n / 2, ``--alternatives 100`` (the most allowed).
With ``--baseline DIR`` (another checkout, e.g. ``git worktree add /tmp/base main``) each case
also runs on that code; a case over ``--limit`` seconds is killed and shown as ``>limit``.

Run:  .venv/bin/python benchmarks/recommend_worst_case.py [--sizes 64,128,256,512]
      [--baseline DIR] [--limit 120] [--kinds random,nvswitch]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
WORDS = ["NV1", "NV2", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]

CHILD = r"""
import json, random, resource, sys, time
from gputopo.model import Gpu, Topology, make_link
from gputopo.analysis.recommend import recommend

kind, n, k, alternatives, words = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5].split(",")
rng = random.Random(n)
gpus = [Gpu(index=i, numa_node=i * 2 // n, nvlink_version="4.0", pcie_gen_current=4, pcie_width_current=16)
        for i in range(n)]
links = []
for a in range(n):
    for b in range(a + 1, n):
        if kind == "nvswitch":
            links.append(make_link(a, b, "NV18", p2p_read="ok", p2p_write="ok", nvswitch=True))
        else:
            ok = rng.random() > 0.2
            word = "ok" if ok else "TNS"
            links.append(make_link(a, b, rng.choice(words), p2p_read=word, p2p_write=word))
topology = Topology(gpus=gpus, links=links, source="benchmark")
sys.setrecursionlimit(10_000)  # (the code before issue 36 recursed once per GPU of a ring)
started = time.process_time()
rec = recommend(topology, k, alternatives=alternatives)
cpu_s = time.process_time() - started
print(json.dumps({"cpu_s": cpu_s, "steps": getattr(rec, "search_steps", None), "proven": rec.proven_optimal,
                  "groups": len(rec.groups), "bottleneck": rec.best.bottleneck_gbps}))
"""


def run_case(root: Path, kind: str, n: int, k: int, alternatives: int, limit_s: float) -> dict | None:
    """One cold ``recommend()`` on the code in ``root``; None where it ran past ``limit_s``."""
    env = {**os.environ, "PYTHONPATH": str(root)}
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, kind, str(n), str(k), str(alternatives), ",".join(WORDS)],
                              cwd=root, env=env, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        return None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": last[:60]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def cell(result: dict | None, limit_s: float) -> str:
    if result is None:
        return f">{limit_s:g} s"
    if "error" in result:
        return result["error"]
    steps = "-" if result["steps"] is None else f"{result['steps'] / 1e6:.1f}M"
    return f"{result['cpu_s']:7.2f} s {steps:>6} {'proven' if result['proven'] else 'best found'}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="64,128,256,512")
    parser.add_argument("--kinds", default="random,nvswitch")
    parser.add_argument("--baseline", type=Path, help="another checkout's root, run beside this one")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before a case is killed")
    parser.add_argument("--alternatives", type=int, default=100)
    args = parser.parse_args()
    sizes = [int(x) for x in args.sizes.split(",")]
    header = f"{'kind':9} {'GPUs':>5} {'--gpus':>6}  {'this checkout (CPU s, steps)':32}"
    if args.baseline:
        header += "  baseline (CPU s)"
    print(header)
    for kind in args.kinds.split(","):
        times: list[tuple[int, float]] = []
        for n in sizes:
            for k in sorted({max(1, n - 8), n // 2}, reverse=True):
                mine = run_case(REPO, kind, n, k, args.alternatives, args.limit)
                line = f"{kind:9} {n:5} {k:6}  {cell(mine, args.limit):32}"
                if args.baseline:
                    line += "  " + cell(run_case(args.baseline, kind, n, k, args.alternatives, args.limit), args.limit)
                print(line, flush=True)
                if mine and "cpu_s" in mine and k == max(1, n - 8):
                    times.append((n, mine["cpu_s"]))
        if len(times) >= 2 and times[0][1] > 0:
            (n0, t0), (n1, t1) = times[0], times[-1]
            print(f"{kind}: --gpus n-8 from {n0} to {n1} GPUs: time x{t1 / t0:.1f} for GPUs x{n1 / n0:g} "
                  f"(growth exponent {math.log(t1 / t0) / math.log(n1 / n0):.2f})")


if __name__ == "__main__":
    main()
