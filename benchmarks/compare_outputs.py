"""Do two checkouts of gputopo say the same things? Runs the same commands on both, as a user runs
them (a cold process each, ``COLUMNS=120``), and prints every difference in standard output,
standard error, exit code, or the file a command writes.

Commands: ``scan --json``, ``scan``, ``recommend --gpus 2, 4 and 8 --json`` and ``report -o FILE``
on every reference machine (``--machine``), every ``nvidia-smi topo -m`` capture of the test corpus
(``tests/fixtures/corpus/topo/``) and the generated NVLink domains of ``benchmarks/scale.py`` (8 and
72 GPUs, as a snapshot and as ``topo -m`` text).

Run:  .venv/bin/python benchmarks/compare_outputs.py --baseline DIR [--jobs 2] [--only PREFIX]
(DIR: the other checkout's root, e.g. ``git worktree add /tmp/base <commit>``). Exits 1 where
anything differs.
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gputopo.sources.reference import MACHINES  # noqa: E402

PY = sys.executable


def inputs(folder: Path) -> list[tuple[str, list[str]]]:
    """(name, the source options) of every input."""
    result = [(f"machine {name}", ["--machine", name]) for name in sorted(MACHINES)]
    result += [(f"corpus {path.name}", ["--from", str(path)])
               for path in sorted((REPO / "tests" / "fixtures" / "corpus" / "topo").glob("*.txt"))]
    subprocess.run([PY, str(REPO / "benchmarks" / "scale.py"), "--gpus", "8,72", "--hosts", "", "--write-inputs",
                    str(folder)], check=True)
    for n in (8, 72):
        result += [(f"domain{n}.json", ["--from", str(folder / f"domain{n}.json")]),
                   (f"domain{n}.txt", ["--from", str(folder / f"domain{n}.txt")])]
    return result


def commands(source: list[str]) -> list[tuple[str, list[str]]]:
    """(name, gputopo arguments; ``{out}`` for the file a command writes) of every command."""
    result = [("scan --json", ["scan", *source, "--json"]), ("scan", ["scan", *source])]
    result += [(f"recommend --gpus {k} --json", ["recommend", *source, "--gpus", str(k), "--json"]) for k in (2, 4, 8)]
    result.append(("report", ["report", *source, "-o", "{out}"]))
    return result


def run(root: Path, args: list[str], out: Path) -> tuple[int, str, str, str]:
    """(exit code, standard output, standard error, the written file or '') of one run."""
    env = {**os.environ, "PYTHONPATH": str(root), "COLUMNS": "120", "TERM": "dumb"}
    env.pop("FORCE_COLOR", None)
    done = subprocess.run([PY, "-m", "gputopo", *(a.replace("{out}", str(out)) for a in args)], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    written = out.read_text() if out.exists() else ""
    # The paths of this run's files are not what is compared.
    return done.returncode, done.stdout.replace(str(out), "{out}"), done.stderr.replace(str(out), "{out}"), written


def compare(name: str, mine: tuple[int, str, str, str], theirs: tuple[int, str, str, str]) -> list[str]:
    """Lines that say what differs (empty: nothing)."""
    lines = []
    for what, a, b in zip(("exit code", "stdout", "stderr", "file"), theirs, mine):
        if a == b:
            continue
        if what == "exit code":
            lines.append(f"{name}: exit code {a} -> {b}")
            continue
        diff = list(difflib.unified_diff(str(a).splitlines(), str(b).splitlines(), "baseline", "this", n=0, lineterm=""))
        lines.append(f"{name}: {what} differs ({len(diff)} diff lines)")
        lines += ["    " + line[:200] for line in diff[:12]]
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", type=Path, required=True, help="the other checkout's root")
    parser.add_argument("--jobs", type=int, default=2, help="runs at a time")
    parser.add_argument("--only", default="", help="only inputs whose name starts with this")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gputopo-compare-") as tmp:
        folder = Path(tmp)
        cases = [(f"{input_name} | {command_name}", command)
                 for input_name, source in inputs(folder) if input_name.startswith(args.only)
                 for command_name, command in commands(source)]

        def both(case: tuple[int, tuple[str, list[str]]]) -> list[str]:
            k, (name, command) = case
            mine = run(REPO, command, folder / f"this{k}.html")
            theirs = run(args.baseline.resolve(), command, folder / f"base{k}.html")
            return compare(name, mine, theirs)

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            results = list(pool.map(both, enumerate(cases)))
    differing = [lines for lines in results if lines]
    for lines in differing:
        print("\n".join(lines))
    print(f"{len(cases)} runs compared on both checkouts: {len(differing)} differ")
    sys.exit(1 if differing else 0)


if __name__ == "__main__":
    main()
