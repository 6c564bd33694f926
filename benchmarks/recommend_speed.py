"""How fast is `recommend`, and is it exact? Prints figures; asserts nothing about time.

Times ``recommend()`` in process (median of several runs, after one warm-up that fills nothing:
every call builds its own problem) on:
- the 8-GPU reference machines, the 16-GPU DGX-2 and the 72-GPU GB200 NVL72;
- random 8- and 16-GPU topologies (mixed NVLink/PCIe words, two NUMA nodes);
- a random 72-GPU topology without symmetry (where the node budget may stop the search).
Beside each figure it checks the answer against brute force (every subset, every ring order) where
that is feasible, and says whether the search proved its answer optimal. Targets from issue 4:
under 50 ms for 8 GPUs, under 1 s for 72.

Then the targets of issue 14, each as its worst case, CPU time (``time.process_time``, what the
machine being shared does not inflate) beside wall time:
- every reference machine and every real capture in the test corpus (the ``tests/fixtures`` topo
  texts that parse), every k from 1 to n: proven optimal, under 1 s each;
- random 16-GPU topologies, every k: proven, under 0.5 s each;
- ``--jobs 2`` exact on 16 GPUs in groups of 8: under 0.5 s.

And the target of issue 21: random 72-GPU topologies (5 seeds), k = 4 and 8, proven optimal within 1 s.

Then, side by side with go-gpuallocator's best-effort policy (``analysis/recommend/gpuallocator.py``) on the
reference machines and the shared fixtures: both picks, each ring's slowest hop, both run times.

Run: ``.venv/bin/python benchmarks/recommend_speed.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import glob
import math
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the brute-force oracle

from recommend_oracles import brute_force_best_key  # noqa: E402

from gputopo.analysis.recommend import recommend  # noqa: E402
from gputopo.model import Gpu, Topology, make_link  # noqa: E402
from gputopo.sources.reference import load_reference  # noqa: E402

WORDS = ["NV1", "NV2", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]
TARGET_S = {8: 0.050, 16: None, 72: 1.0}
BRUTE_FORCE_MAX_WORK = 3_000_000  # subsets x ring orders


def random_topology(n: int, seed: int) -> Topology:
    rng = random.Random(seed)
    gpus = [Gpu(index=i, numa_node=i * 2 // n, nvlink_version="2.0", pcie_gen_current=3, pcie_width_current=16)
            for i in range(n)]
    links = []
    for a in range(n):
        for b in range(a + 1, n):
            ok = rng.random() > 0.2
            links.append(make_link(a, b, rng.choice(WORDS), p2p_read="ok" if ok else "TNS", p2p_write="ok" if ok else "TNS"))
    return Topology(gpus=gpus, links=links, source="benchmark")


def time_call(topo: Topology, k: int, repeats: int) -> tuple[float, float, object]:
    """Median wall seconds, median CPU seconds, and the answer."""
    rec = recommend(topo, k)  # warm-up (imports, caches of the interpreter)
    samples = []
    cpu_samples = []
    for _ in range(repeats):
        start, cpu = time.perf_counter(), time.process_time()
        rec = recommend(topo, k)
        samples.append(time.perf_counter() - start)
        cpu_samples.append(time.process_time() - cpu)
    return statistics.median(samples), statistics.median(cpu_samples), rec


def brute_force_work(n: int, k: int) -> int:
    return math.comb(n, k) * math.factorial(max(k - 1, 1))


def row(name: str, topo: Topology, k: int, repeats: int = 5) -> None:
    n = len(topo.gpus)
    seconds, cpu_seconds, rec = time_call(topo, k, repeats)
    if brute_force_work(n, k) <= BRUTE_FORCE_MAX_WORK:
        exact = "matches" if brute_force_best_key(topo, k) == rec.best.key else "DIFFERS"
    else:
        exact = "n/a (too big)"
    target = TARGET_S.get(n)
    verdict = "" if target is None else ("  ok" if cpu_seconds < target else "  SLOWER THAN TARGET")
    print(
        f"{name:<22} {n:>3} GPUs  k={k:<3} {seconds * 1000:9.2f} ms {cpu_seconds * 1000:9.2f} ms CPU  "
        f"proven={str(rec.proven_optimal):<5}  "
        f"brute force: {exact:<14}{verdict}"
    )


def main() -> None:
    print("recommend() in process, median of 5 runs (wall, then CPU time)")
    print(f"{'topology':<22} {'size':>8}  {'ask':<5} {'wall':>12} {'CPU':>12}")
    for machine in ("dgx1", "pcie-8gpu", "dgx-a100", "dgx-h100"):
        topo = load_reference(machine)
        for k in (2, 4, 6):
            row(machine, topo, k)
    for seed in range(3):
        topo = random_topology(8, seed)
        for k in (3, 4, 5):
            row(f"random-8 #{seed}", topo, k)
    dgx2 = load_reference("dgx2")
    for k in (4, 8, 12):
        row("dgx2", dgx2, k)
    for seed in range(2):
        topo = random_topology(16, 100 + seed)
        for k in (3, 4, 6, 8):
            row(f"random-16 #{seed}", topo, k, repeats=3)
    nvl72 = load_reference("gb200-nvl72")
    for k in (4, 8, 16, 36, 72):
        row("gb200-nvl72", nvl72, k)
    topo = random_topology(72, 999)
    for k in (2, 4, 8):
        row("random-72 (no symmetry)", topo, k, repeats=1)


def timed(call):
    """``call()``'s result, its CPU seconds and its wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    result = call()
    return result, time.process_time() - cpu, time.perf_counter() - wall


def verdict(seconds: float, target_s: float, proven: bool = True) -> str:
    return ("ok" if seconds < target_s else "SLOWER THAN TARGET") + ("" if proven else ", NOT PROVEN")


def corpus_topologies() -> list[tuple[str, Topology]]:
    """Every reference machine, and every topology text of the test corpus that parses."""
    from gputopo.errors import InputError
    from gputopo.sources import TopologyRequest, resolve
    from gputopo.sources.reference import MACHINES

    root = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
    cases = [(m, load_reference(m)) for m in MACHINES]
    for pattern in ("corpus/topo/*.txt", "shared/topo/*.txt", "topo/*.txt"):
        for path in sorted(glob.glob(str(root / pattern))):
            try:
                cases.append((Path(path).name, resolve(TopologyRequest(from_files=(path,)))))
            except InputError:
                pass  # deliberately broken captures (garbage, truncated) are not machines
    return cases


def worst_of_every_k(cases):
    """Every k of every (name, topology): the slowest ask as (CPU s, wall s, "name k=K"), and the
    asks that did not end proven optimal."""
    worst = (0.0, 0.0, "")
    unproven = []
    for name, topo in cases:
        for k in range(1, len(topo.gpus) + 1):
            rec, cpu, wall = timed(lambda: recommend(topo, k))
            if not rec.proven_optimal:
                unproven.append(f"{name} k={k}")
            if cpu > worst[0]:
                worst = (cpu, wall, f"{name} k={k}")
    return worst, unproven


def issue_14_targets() -> None:
    """The issue 14 targets, each as its worst case over the asks it covers."""
    print()
    print("issue 14 targets: worst case per set of asks (one run each; CPU time beside wall time)")
    cases = corpus_topologies()
    worst, unproven = worst_of_every_k(cases)
    print(
        f"  {len(cases)} reference machines and corpus captures, every k: worst {worst[0] * 1000:7.1f} ms CPU "
        f"({worst[1] * 1000:7.1f} ms wall) at {worst[2]}; unproven: {len(unproven)}  "
        f"[target < 1 s, proven: {verdict(worst[0], 1.0, not unproven)}]"
    )
    seeds = range(100, 106)
    worst, unproven = worst_of_every_k([(f"#{seed - 100}", random_topology(16, seed)) for seed in seeds])
    print(
        f"  random 16-GPU topologies ({len(seeds)} seeds), every k: worst {worst[0] * 1000:7.1f} ms CPU "
        f"({worst[1] * 1000:7.1f} ms wall) at {worst[2]}; unproven: {len(unproven)}  "
        f"[target < 0.5 s, proven: {verdict(worst[0], 0.5, not unproven)}]"
    )
    for name, topo in [("dgx2", load_reference("dgx2"))] + [(f"random-16 #{s - 100}", random_topology(16, s)) for s in range(100, 108)]:
        rec, cpu, wall = timed(lambda: recommend(topo, 8, jobs=2))
        print(
            f"  --jobs 2 --gpus 8 on {name:<14} {cpu * 1000:7.1f} ms CPU ({wall * 1000:7.1f} ms wall)  "
            f"exact={str(rec.jobs_proven_optimal):<5} [target < 0.5 s: {verdict(cpu, 0.5, rec.jobs_proven_optimal)}]"
        )
    print("issue 21 target: random 72-GPU topologies (no symmetry), k = 4 and 8, proven optimal within 1 s")
    for seed in RANDOM_72_SEEDS:
        topo = random_topology(72, seed)
        for k in (4, 8):
            rec, cpu, wall = timed(lambda topo=topo, k=k: recommend(topo, k))
            print(
                f"  random-72 #{seed:<4} k={k}: {cpu * 1000:7.1f} ms CPU ({wall * 1000:7.1f} ms wall)  "
                f"[target < 1 s, proven: {verdict(cpu, 1.0, rec.proven_optimal)}]"
            )


RANDOM_72_SEEDS = (999, 0, 1, 2, 3)


def compare_with_gpuallocator() -> None:
    """Side by side with go-gpuallocator's best-effort policy: its pick, ours, each ring's slowest
    hop, and both run times, on the reference machines and the shared fixtures."""
    from gputopo.analysis.recommend import gpuallocator
    from gputopo.analysis.recommend import Problem
    from gputopo.sources import TopologyRequest, resolve
    from gputopo.sources.reference import MACHINES

    fixtures = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "shared" / "topo"  # copies of shared/
    cases = [(m, load_reference(m)) for m in MACHINES if len(MACHINES[m].build().gpus) <= gpuallocator.MAX_GPUS]
    cases += [(f.name, resolve(TopologyRequest(from_files=(str(f),)))) for f in sorted(fixtures.glob("*.txt"))]
    print()
    print("go-gpuallocator best-effort (score sum) vs recommend (ring bottleneck); GB/s = slowest ring hop")
    print(f"{'topology':<42} {'k':>2}  {'go-gpuallocator':<22} {'GB/s':>6} {'ms':>7}   {'recommend':<22} {'GB/s':>6} {'ms':>6}")
    differ = 0
    for name, topo in cases:
        problem = Problem.from_topology(topo, topo.gpu_indices)
        for k in range(2, len(topo.gpus)):
            start = time.perf_counter()
            theirs = gpuallocator.allocate(topo, k)
            their_ms = (time.perf_counter() - start) * 1000
            start = time.perf_counter()
            ours = recommend(topo, k).best
            our_ms = (time.perf_counter() - start) * 1000
            their_gbps = problem.ring(tuple(problem.pos[g] for g in theirs))[0] / 100
            mark = ""
            if their_gbps < ours.bottleneck_gbps:
                mark = "  <- bottleneck view is faster"
                differ += 1
            print(
                f"{name:<42} {k:>2}  {','.join(map(str, theirs)):<22} {their_gbps:6.1f} {their_ms:7.1f}   "
                f"{','.join(map(str, ours.gpus)):<22} {ours.bottleneck_gbps:6.1f} {our_ms:6.1f}{mark}"
            )
    print(f"asks where the ring-bottleneck pick is faster than the score-sum pick: {differ}")


if __name__ == "__main__":
    main()
    issue_14_targets()
    compare_with_gpuallocator()
