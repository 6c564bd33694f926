"""How scan, recommend, report and the multi-host plan grow with the machine: seconds (wall and
CPU) and peak memory against GPU count and host count, each in a cold process as a user runs it,
with the fitted growth exponent (the slope of log(time) against log(size)).

Inputs are generated here (nothing to download):
- an NVLink domain of N GPUs (8, 72, 144, 288, 576) after the reference GB200 NVL72 pattern
  (four GPUs per tray, two Grace CPUs per tray, NV18 to every GPU of the domain): a snapshot
  (`scan --from`, `recommend --from`, `report --from`) and an `nvidia-smi topo -m` text of the
  same N columns (`scan --from topo.txt`);
- H hosts (2, 64, 1000): H snapshots of the reference DGX H100 with host names, for
  `recommend --from x H --gpus 8*H --save plan.json --format slurm`.

Targets (issue 21; cold process on a 2-core machine): 576-GPU `scan --json` <= 2 s, `recommend
--gpus 8` proven optimal <= 2 s, `report` <= 5 s; a 1000-host plan <= 10 s; peak memory < 1 GB.
The CPU is shared: the CPU seconds (user + system, the child's own) say what the work costs when
the wall clock is stretched by other processes.

With ``--baseline DIR`` (another checkout's root: ``git worktree add /tmp/base <commit>``) each
command also runs on that code, alternating with this one's: before/after side by side. A command
over ``--limit`` seconds is killed and shown as ``>limit``. With ``--repeat N`` each command runs N
times (this and baseline alternating every time): the row shows the run of least CPU time (the one
other processes disturbed least, as ``timeit`` advises) and the range of CPU seconds over the N runs;
the growth exponents use the least times.

Run:  .venv/bin/python benchmarks/scale.py [--gpus 8,72,144,288,576] [--hosts 2,64,1000]
      [--baseline DIR] [--limit 120] [--repeat 3] [--only "scan --json,recommend"]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gputopo.sources.reference import load_reference  # noqa: E402

PY = sys.executable
MB = 1 << 20
TRAY = 4  # GPUs per GB200 compute tray


@dataclass
class Child:
    wall_s: float
    cpu_s: float
    peak_rss_bytes: int
    ok: bool
    note: str = ""


def run_child(args: list[str], root: Path, limit_s: float) -> Child:
    """``python -m gputopo ARGS`` on the gputopo in ``root``: wall time, CPU time (user + system)
    and peak RSS of that child alone (``os.wait4``); killed after ``limit_s``."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "120"}
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen([PY, "-m", "gputopo", *args], cwd=root, stdout=out, stderr=err, env=env)
        deadline = started + limit_s
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() > deadline:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                return Child(limit_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, False, "timeout")
            time.sleep(0.01)
        wall_s = time.perf_counter() - started
        code = os.waitstatus_to_exitcode(status)
        err.seek(0)
        note = "" if code in (0, 1) else f"exit {code}: {err.read().decode(errors='replace').strip()[-200:]}"
        out.seek(0)
        if code in (0, 1) and args[0] == "recommend" and "--json" in args and "--from" in args:
            note = _proof_note(out.read().decode(errors="replace"))
        return Child(wall_s, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024, code in (0, 1), note)


def _proof_note(stdout: str) -> str:
    """'optimal' or 'NOT proven' from a recommend --json answer."""
    try:
        data = json.loads(stdout)
    except ValueError:
        return "no JSON"
    proven = data.get("proven_optimal", data.get("optimal"))
    return "" if proven is None else ("optimal" if proven else "NOT proven")


# --- inputs --------------------------------------------------------------------------------------


def domain_snapshot(n: int) -> dict:
    """An NVLink domain of ``n`` GPUs after the GB200 NVL72 reference: GPU i is the reference's GPU
    i % 72 on tray i // 4; NV18 through the switches to every GPU; a PCIe path only within a tray."""
    ref = load_reference("gb200-nvl72").to_dict()
    template = {(link["a"], link["b"]): link for link in ref["links"]}
    gpus = []
    for i in range(n):
        gpu = dict(ref["gpus"][i % 72], index=i, host=f"tray{i // TRAY:03d}")
        gpu["uuid"] = f"GPU-{i:08x}-0000-0000-0000-000000000000"
        gpus.append(gpu)
    links = []
    for a in range(n):
        for b in range(a + 1, n):
            same_tray = a // TRAY == b // TRAY
            ta, tb = a % 72, b % 72
            link = dict(template[(ta, tb)] if same_tray else template[(0, TRAY)], a=a, b=b)
            links.append(link)
    ref.update(gpus=gpus, links=links, diagnostics=[], source="snapshot", is_reference=False,
               source_detail=None, label=f"generated {n}-GPU NVLink domain (GB200 NVL72 pattern)",
               fabric=domain_fabric(n))
    return ref


def domain_fabric(n: int) -> dict:
    """The domain's fabric graph as a snapshot holds it: each GPU's 18 NVLinks to the one NVSwitch
    fabric node (the switch trays' chips not told apart), ``n`` edges rather than a record per pair."""
    switch = {"id": "nvswitch:fabric", "kind": "nvswitch", "parent": None}
    nodes = [switch] + [{"id": f"gpu:{i}", "kind": "gpu", "parent": None, "gpu": i} for i in range(n)]
    edges = [{"a": f"gpu:{i}", "b": "nvswitch:fabric", "kind": "nvlink", "count": 18, "active": 18} for i in range(n)]
    return {"nodes": nodes, "edges": edges}


def domain_topo_text(n: int) -> str:
    """``nvidia-smi topo -m`` of ``n`` GPUs all NV18 to each other, two NUMA nodes by halves."""
    cols = [f"GPU{i}" for i in range(n)]
    lines = ["\t" + "\t".join(cols) + "\tCPU Affinity\tNUMA Affinity"]
    for a in range(n):
        cells = [" X " if a == b else "NV18" for b in range(n)]
        node = 0 if a < n // 2 else 1
        cpus = "0-71" if node == 0 else "72-143"
        lines.append(f"GPU{a}\t" + "\t".join(cells) + f"\t{cpus}\t{node}")
    lines += ["", "Legend:", "", "  X    = Self", "  NV#  = Connection traversing a bonded set of # NVLinks", ""]
    return "\n".join(lines)


def host_snapshots(folder: Path, hosts: int) -> list[str]:
    """``hosts`` snapshots of the reference DGX H100, host names node0000..."""
    ref = load_reference("dgx-h100").to_dict()
    ref.update(source="snapshot", is_reference=False, diagnostics=[], label=None, source_detail=None)
    paths = []
    for h in range(hosts):
        data = dict(ref, host=f"node{h:04d}")
        data["gpus"] = [dict(g, host=f"node{h:04d}", uuid=f"GPU-{h:04x}{g['index']:04x}-0-0-0-0") for g in ref["gpus"]]
        path = folder / f"node{h:04d}.json"
        path.write_text(json.dumps(data))
        paths.append(str(path))
    return paths


# --- the runs ------------------------------------------------------------------------------------


def write_inputs(folder: Path, gpu_counts: list[int], host_counts: list[int]) -> None:
    """Every input file (run in a child process: a child forked from a parent holding a 576-GPU
    domain in memory would start with its pages, and its peak RSS would count them)."""
    for n in gpu_counts:
        (folder / f"domain{n}.json").write_text(json.dumps(domain_snapshot(n)))
        (folder / f"domain{n}.txt").write_text(domain_topo_text(n))
    for h in host_counts:
        (folder / f"hosts{h}").mkdir()
        host_snapshots(folder / f"hosts{h}", h)


def cases(folder: Path, gpu_counts: list[int], host_counts: list[int]) -> list[tuple[str, int, list[str]]]:
    """(what, size, gputopo args) for every command and size (the inputs written already)."""
    result = []
    for n in gpu_counts:
        snap, topo = folder / f"domain{n}.json", folder / f"domain{n}.txt"
        result += [
            ("scan --json (snapshot)", n, ["scan", "--from", str(snap), "--json"]),
            ("scan text (snapshot)", n, ["scan", "--from", str(snap)]),
            ("scan --json (topo -m)", n, ["scan", "--from", str(topo), "--json"]),
            ("recommend --gpus 8", n, ["recommend", "--from", str(snap), "--gpus", "8", "--json"]),
            ("report", n, ["report", "--from", str(snap), "-o", str(folder / f"report{n}.html")]),
        ]
    for h in host_counts:
        paths = [str(folder / f"hosts{h}" / f"node{k:04d}.json") for k in range(h)]
        args = ["recommend"]
        for p in paths:
            args += ["--from", p]
        args += ["--gpus", str(8 * h), "--save", str(folder / f"plan{h}.json"), "--format", "slurm"]
        result.append(("plan (recommend --from xH)", h, args))
    return result


def exponent(points: list[tuple[int, float]]) -> float | None:
    """Least-squares slope of log(seconds) against log(size) over the three largest sizes that
    finished (below those, Python's start-up dominates and flattens the slope). Against GPU count,
    2 is O(pairs); against host count, 1 is linear."""
    pts = [(math.log(n), math.log(max(s, 1e-3))) for n, s in sorted(points)[-3:]]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def show(child: Child | None, limit_s: float, cpu_range: tuple[float, float] | None = None) -> str:
    if child is None:
        return "-"
    if child.note == "timeout":
        return f">{limit_s:.0f} s (cpu {child.cpu_s:.1f})"
    if not child.ok:
        return child.note[:60]
    tail = f" {child.note}" if child.note else ""
    spread = f" ({cpu_range[0]:.2f}-{cpu_range[1]:.2f})" if cpu_range and cpu_range[0] != cpu_range[1] else ""
    return f"{child.wall_s:6.2f} s cpu {child.cpu_s:6.2f}{spread} {child.peak_rss_bytes / MB:5.0f} MiB{tail}"


def least(children: list[Child]) -> tuple[Child, tuple[float, float] | None]:
    """The run of least CPU time among those that finished (else the first), and the CPU range."""
    done = [c for c in children if c.ok]
    if not done:
        return children[0], None
    cpu = [c.cpu_s for c in done]
    return min(done, key=lambda c: c.cpu_s), (min(cpu), max(cpu))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gpus", default="8,72,144,288,576")
    parser.add_argument("--hosts", default="2,64,1000")
    parser.add_argument("--baseline", type=Path, help="another checkout's root: before/after side by side")
    parser.add_argument("--limit", type=float, default=120.0, help="seconds before a run is killed")
    parser.add_argument("--only", default="", help="comma-separated prefixes of the case names to run")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each command; the least CPU time is shown")
    parser.add_argument("--write-inputs", type=Path, help=argparse.SUPPRESS)  # the child that writes them
    args = parser.parse_args()
    gpu_counts = [int(x) for x in args.gpus.split(",") if x]
    host_counts = [int(x) for x in args.hosts.split(",") if x]
    if args.write_inputs:
        write_inputs(args.write_inputs, gpu_counts, host_counts)
        return
    only = [x.strip() for x in args.only.split(",") if x.strip()]
    roots = [("this", REPO)] + ([("baseline", args.baseline.resolve())] if args.baseline else [])
    with tempfile.TemporaryDirectory(prefix="gputopo-scale-") as tmp:
        subprocess.run([PY, __file__, "--gpus", args.gpus, "--hosts", args.hosts, "--write-inputs", tmp], check=True)
        runs = [c for c in cases(Path(tmp), gpu_counts, host_counts) if not only or c[0].startswith(tuple(only))]
        table: dict[tuple[str, str], list[tuple[int, Child]]] = {}
        skip: set[tuple[str, str]] = set()  # a size that timed out: larger ones would too
        for what, size, cmd in runs:
            tries: dict[str, list[Child]] = {name: [] for name, _ in roots}
            for _ in range(max(1, args.repeat)):
                for name, root in roots:
                    if (name, what) not in skip:
                        child = run_child(cmd, root, args.limit)
                        tries[name].append(child)
                        if child.note == "timeout":
                            skip.add((name, what))
            cells = []
            for name, _ in roots:
                shown, cpu_range = least(tries[name]) if tries[name] else (None, None)
                if shown is not None:
                    table.setdefault((name, what), []).append((size, shown))
                cells.append(f"{name}: {show(shown, args.limit, cpu_range)}")
            print(f"{what:28} {size:5}  " + "   ".join(cells), flush=True)
        print()
        for (name, what), points in table.items():
            done = [(n, c.wall_s) for n, c in points if c.ok]
            cpu = [(n, c.cpu_s) for n, c in points if c.ok]
            slope, cpu_slope = exponent(done), exponent(cpu)
            peak = max(c.peak_rss_bytes for _, c in points) / MB
            text = "n/a" if slope is None else f"{slope:.2f} (cpu {cpu_slope:.2f})"
            print(f"growth exponent  {name:8} {what:28} {text}   peak {peak:.0f} MiB")


if __name__ == "__main__":
    main()
