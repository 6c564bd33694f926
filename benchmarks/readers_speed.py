"""How the readers of other tools' outputs scale: every real capture of tests/fixtures/corpus is
repeated until the paste is 1, 4 and 16 MiB (the bound of an input is 64 MiB), and the registry's
whole door (every sniff, then every matching reader and the merge) reads it. Linear readers take
about 4x as long for 4x the text; the figures and the ratios are printed, nothing is asserted.
Adversarial lines are timed too: one NCCL-looking line of 4000 characters of `a:1:` repeated, and a
paste of 200,000 `Link N: <inactive>` lines without a GPU line, an `nvidia-smi -q` block of
4000 lines of 1000 blanks each, and the rows of a real 8-GPU `topo -m` repeated 375 and 1500 times
without a header (every row line is a candidate header: reading below each one was quadratic).

Usage: python benchmarks/readers_speed.py [--sizes 1 4 16]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from gputopo.errors import InputError  # noqa: E402
from gputopo.sources.registry import read_text  # noqa: E402

CORPUS = REPO / "tests/fixtures/corpus"
KINDS = ("p2pbw", "nvbandwidth", "nccl_log", "nccl_tests", "nvlink", "nccl_xml")
MIB = 1024 * 1024


def _time(text: str) -> tuple[float, str]:
    start = time.perf_counter()
    try:
        read_text(text, "bench")
        outcome = "read"
    except InputError as exc:
        outcome = f"refused: {str(exc)[:60]}"
    return time.perf_counter() - start, outcome


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16], help="paste sizes in MiB")
    args = parser.parse_args()
    for kind in KINDS:
        for path in sorted((CORPUS / kind).glob("*")):
            if path.name in ("EXPECTED.json", "SOURCES.md") or path.suffix == ".json":
                continue
            one = path.read_text(encoding="utf-8")
            times = []
            for size in args.sizes:
                text = (one + "\n") * max(1, size * MIB // (len(one) + 1))
                seconds, outcome = _time(text)
                times.append(seconds)
                print(f"{kind:12} {path.name[:48]:48} {size:3d} MiB {seconds * 1000:9.1f} ms  {outcome}")
            ratios = " ".join(f"{b / a:.1f}x" for a, b in zip(times, times[1:]) if a > 0)
            print(f"{'':12} {'':48} growth per 4x text: {ratios}")
    adversarial = {
        "long NCCL-looking lines": ("a:1:" * 1000 + " NCCL INFO x\n") * 2000,
        "200k inactive links, no GPU": "\t Link 0: <inactive>\n" * 200_000,
        "-q block of 1000-blank lines": "GPU 0000:01:00.0\n" + ("    Ab" + " " * 1000 + "c\n") * 4000,
    }
    topo_rows = [line for line in (CORPUS / "topo/dgx_a100_8gpu_nv12_compact_spacing.txt").read_text().splitlines()
                 if line.startswith("GPU")]
    for times in (375, 1500):
        adversarial[f"topo -m rows x{times}, no header"] = "\n".join(topo_rows * times)
    for label, text in adversarial.items():
        seconds, outcome = _time(text)
        print(f"adversarial  {label:48} {len(text) / MIB:5.1f} MiB {seconds * 1000:9.1f} ms  {outcome}")


if __name__ == "__main__":
    main()
