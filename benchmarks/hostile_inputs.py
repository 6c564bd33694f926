"""Do the readers stay linear on hostile lines? Prints CPU seconds per MiB for every reader on each
hostile shape at a few sizes side by side; asserts nothing. Linear reading keeps s/MiB flat as the
size grows; a quadratic pattern multiplies it by the size ratio (4x per column at the default sizes).

Each shape is one long line (a paste can hold anything, and `docs/inputs.md` promises time linear in
the line): runs of blanks, tabs, digits, `| ` and `[` (alone, or after a line's usual start such as
`GPU 0: x`); a prefix repeated (`GPU 0: `, `Device: `, `<pci `, `Link 0: Remote `, `NCCL INFO `,
`lspci -s `, ...); unclosed, nested and endless tags after an NCCL XML's `<system>`; digits and `[`
inside an `nvbandwidth -j` object; or many blank lines (a `^\s*` pattern searched over the whole text
can cross them). A short lead (what makes a reader look at the text) comes first where needed.
Each reader is timed alone, `sniff` then `read` (the registry's readers), `parse_pasted` (doctor's
paste readers) and `parse_tf_log` (TF logs), plus the whole door (`registry.read_text`). A cell
whose reader already took more than `--budget` seconds at the previous size is skipped
(`skip`): a quadratic reader would otherwise stall the run. A `!` after a figure marks an exception
other than `InputError` (a bug).

Usage: python benchmarks/hostile_inputs.py [--sizes 64 256 1024] [--shapes SUB ...] [--readers SUB ...]
(sizes in KiB; the default run takes about two minutes on the shared 2-core machine)
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gputopo.errors import InputError  # noqa: E402
from gputopo.sources.evidence.pasted_health import parse_pasted  # noqa: E402
from gputopo.sources.registry import READERS, read_text  # noqa: E402
from gputopo.sources.tf.tflog import parse_tf_log  # noqa: E402

KIB = 1024
MIB = 1024 * 1024
XML_LEAD = '<system version="1">\n<cpu numaid="0">\n'

# name -> (lead, repeated unit, tail): the text is lead + unit * n + tail, n chosen for the size.
SHAPES: dict[str, tuple[str, str, str]] = {
    "blanks": ("", " ", "x\n"),
    "tabs": ("GPU0\tGPU1\n", "\t", "x\n"),
    "blanks after GPU 0: x": ("GPU 0: x", " ", "y\n"),
    "blanks after Device 0: x": ("Device 0: x", " ", "y\n"),
    "blank lines": ("x\n", "\n", "x\n"),
    "space lines": ("x\n", " \n", "x\n"),
    "digits": ("", "7", "\n"),
    "digits spaced": ("D\\D 0 1\n", "0 ", "\n"),
    "JSON digits": ('{"nvbandwidth": ', "7", "}\n"),
    "JSON [ runs": ('{"nvbandwidth": ', "[", "\n"),
    "| runs": ("", "| ", "\n"),
    "[ runs": ("", "[", "\n"),
    "GPU 0: x": ("", "GPU 0: x", "\n"),
    "GPU0 header": ("", "GPU0 ", "\n"),
    "Device: 0, ": ("", "Device: 0, ", "\n"),
    "Device 0: ": ("", "Device 0: ", "\n"),
    "Device=0 CAN": ("", "Device=0 CAN Access Peer ", "\n"),
    "P2P=Enabled ": ("", "P2P=Enabled ", "\n"),
    "memcpy CE": ("", "memcpy CE GPU(row) -> GPU(column) ", "\n"),
    "Link 0: Remote ": ("GPU 0: x\n", "Link 0: Remote ", "\n"),
    "Link 0, ": ("GPU 0: x\n", "Link 0, ", "\n"),
    "NCCL INFO ": ("", "x:1:2 [0] NCCL INFO ", "\n"),
    "NCCL ring ranks": ("x:1:2 [0] NCCL INFO Channel 00/08 :", " 0", "\n"),
    "NCCL host colons": ("", "a:", "1:2 [0] NCCL INFO Channel 00/08 :    0   1\n"),
    "key : value": ("GPU 00000000:01:00.0\n", "    Ab : ", "\n"),
    "<pci unclosed": (XML_LEAD, "<pci ", "\n"),
    "<pci nested": (XML_LEAD, '<pci busid="0000:01:00.0">', "\n"),
    "<aaaa cut XML": (XML_LEAD + "<", "a", "<x/>\n"),
    "<nvlink open": (XML_LEAD + '<gpu dev="0">', '<nvlink target="0000:01:00.0" ', "\n"),
    "lspci 01:00.0 ": ("", "01:00.0 ", "\n"),
    "lspci -s ": ("", "lspci -s ", "\n"),
    "ACSCtl: Src+ ": ("01:00.0 x\n", "ACSCtl: Src+ ", "\n"),
    "LnkSta: Speed ": ("01:00.0 x\n", "LnkSta: Speed 8GT/s, ", "\n"),
    "LnkSta no comma": ("01:00.0 x\n", "LnkSta: Speed 8GT/s ", "\n"),
    "NVRM: Xid": ("", "NVRM: Xid (PCI:0000:01:00): ", "\n"),
    "DMAR: [DMA Read ": ("", "DMAR: [DMA Read ", "\n"),
    "cmdline words": ("BOOT_IMAGE=/vmlinuz ", "a=b ", "\n"),
    "# Using devices": ("#  Rank  0 Group  0 Pid 1 on h device  0 [0x01] x\n", "#  Rank  0 ", "\n"),
    "size count type": ("", "size count type redop root time algbw busbw #wrong ", "\n"),
    "peer access ordinals": ("", "peer access not supported between device ordinals 0 and ", "\n"),
}


def _registry_reader(sniff: Callable[[str], bool], read: Callable[[str, str], object]) -> Callable[[str], None]:
    def run(text: str) -> None:
        sniff(text)
        read(text, "bench")
    return run


def readers() -> dict[str, Callable[[str], None]]:
    """Every reader timed: the registry's (each alone), doctor's paste readers, TF logs, the door."""
    chosen: dict[str, Callable[[str], None]] = {
        reader.kind: _registry_reader(reader.sniff, reader.read) for reader in READERS
    }
    chosen["doctor paste (parse_pasted)"] = parse_pasted
    chosen["TF log"] = lambda text: parse_tf_log(text, "bench")
    chosen["the door (read_text)"] = lambda text: read_text(text, "bench")
    return chosen


def hostile_text(shape: str, size_bytes: int) -> str:
    lead, unit, tail = SHAPES[shape]
    return lead + unit * max(1, (size_bytes - len(lead) - len(tail)) // len(unit)) + tail


def cpu_seconds(run: Callable[[str], None], text: str) -> tuple[float, str]:
    """CPU seconds of one read (other users of the machine do not inflate it), and a mark: "" read or
    refused in one line, "!" any other exception (a bug: the readers must only raise InputError)."""
    start = time.process_time()
    mark = ""
    try:
        run(text)
    except InputError:
        pass
    except Exception:  # noqa: BLE001 - measured and marked, not hidden: the property test fails on it
        mark = "!"
    return time.process_time() - start, mark


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[64, 256, 1024], help="line sizes in KiB")
    parser.add_argument("--shapes", nargs="*", default=[], help="only shapes whose name contains one of these")
    parser.add_argument("--readers", nargs="*", default=[], help="only readers whose name contains one of these")
    parser.add_argument("--budget", type=float, default=3.0, help="skip the larger sizes of a cell past this many s")
    args = parser.parse_args()
    sizes = sorted(args.sizes)
    chosen = {k: v for k, v in readers().items() if not args.readers or any(s in k for s in args.readers)}
    shapes = [s for s in SHAPES if not args.shapes or any(p in s for p in args.shapes)]
    head = "".join(f"{f'{size} KiB':>10}" for size in sizes)
    print(f"CPU s/MiB per reader and hostile line (flat = linear)\n{'shape':22} {'reader':30}{head}  growth")
    worst: list[tuple[float, str]] = []
    for shape in shapes:
        texts = [hostile_text(shape, size * KIB) for size in sizes]
        for name, run in chosen.items():
            cells, rates, last = [], [], 0.0
            for text in texts:
                if last > args.budget:
                    cells.append(f"{'skip':>10}")
                    continue
                last, mark = cpu_seconds(run, text)
                rates.append(last / (len(text) / MIB))
                cells.append(f"{rates[-1]:9.3f}{mark or ' '}")
            growth = rates[-1] / rates[0] if len(rates) > 1 and rates[0] > 0 else float("nan")
            stalled = len(rates) < len(texts)
            worst.append((float("inf") if stalled else growth, f"{shape} / {name}"))
            print(f"{shape[:22]:22} {name[:30]:30}{''.join(cells)}  {'stalled' if stalled else f'{growth:.1f}x'}")
    worst.sort(reverse=True)
    print("\nlargest growth of s/MiB, smallest to largest size:")
    for growth, label in worst[:8]:
        print(f"  {'stalled' if growth == float('inf') else f'{growth:.1f}x':>8}  {label}")


if __name__ == "__main__":
    main()
