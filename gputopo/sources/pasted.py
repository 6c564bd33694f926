"""What the readers of pasted tool outputs share: lines, numbers, PCI bus ids as each tool prints them,
and a Topology of GPUs whose pairs are linked ``UNKNOWN`` (the tool measured them, it did not say how
they are wired).

Every reader takes the whole paste and finds its own section by structure; unrelated lines are
skipped. All loops are single passes over the lines; sizes are bounded by ``MAX_GPUS``. Patterns look
at a line's first ``LINE_CAP_CHARS`` only (``capped``), and each is anchored, bounded or possessive,
so that no line costs more than a pass over its cut part (docs/inputs.md, "Bounds"); matrix rows,
split on blanks, are read whole.
"""

from __future__ import annotations

import math
import re

from gputopo.errors import InputError
from gputopo.model import Gpu, Link, Measurement, Topology, make_link
from gputopo.notation import ascii_int

MAX_GPUS = 1024  # more devices than any one host or job log shows; a bigger index is a misread
MAX_LINES = 2_000_000  # the bounded read (fileio) already caps the text; this caps the split
# A tool's own lines are a few hundred characters: a longer line is matched on its first 4 KiB only
# (a 1 MB line of other output is not searched to its end). The TF log and NCCL log readers cut so too.
LINE_CAP_CHARS = 4096


def lines_of(text: str) -> list[str]:
    """The text's lines without line ends (``\\r\\n``, ``\\r`` too), capped at ``MAX_LINES``."""
    return text.replace("\r\n", "\n").replace("\r", "\n").split("\n", MAX_LINES)[:MAX_LINES]


# What a paste puts before every line of a tool's output: a markdown quote (``> ``), a shell prompt
# (``$ ``), bold (``**``), a parallel shell's host label (pdsh/clush ``node-7: ``; a word and a colon
# before a digit is a tool's own ``Device: 0``, never a label).
_DECORATION_RE = re.compile(r"(?:[ \t]{0,8}+(?:>|\$|\*\*|[\w.\-]{1,64}+:(?=[ \t]+[^\s\d]))[ \t]?)++")


def undecorated_lines(text: str) -> list[str]:
    """The text's lines without the decoration every non-blank line shares (see ``_DECORATION_RE``; a
    quote's bare ``>`` counts as a blank line), and a closing ``**`` every one of them ends with. A
    prefix some lines lack is the tool's own text, and stays. One pass over the lines."""
    lines = lines_of(text)
    shown = [line for line in lines if line.strip()]
    # The first lines' decorations are the candidates (the first may carry more: a prompt before
    # the tool's own prompt line; a quote's bare '>' less); the longest that every line shows is the paste's.
    found = (_DECORATION_RE.match(capped(line)) for line in shown[:3])
    for prefix in sorted({m.group(0) for m in found if m}, key=len, reverse=True):
        bare = prefix.strip()
        if all(line.startswith(prefix) or line.strip() == bare for line in shown):
            break
    else:
        return lines
    out = [line[len(prefix):] if line.startswith(prefix) else "" for line in lines]
    kept = [line.rstrip() for line in out if line.strip()]
    if bare.endswith("**") and kept and all(line.endswith("**") for line in kept):
        out = [line.rstrip()[:-2] if line.strip() else line for line in out]
    return out


def capped(line: str) -> str:
    """The part of ``line`` patterns look at: its first ``LINE_CAP_CHARS``."""
    return line[:LINE_CAP_CHARS]


def number(token: str) -> float | None:
    """A finite, non-negative figure, or ``None`` (``N/A``, ``inf``, ``nan``, words, and digits of
    other scripts, which ``float`` reads: the tools print ASCII, as ``notation.ascii_int`` reads it)."""
    if not token.isascii():
        return None
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) and value >= 0 else None


def device_index(token: str) -> int | None:
    """A device number 0..MAX_GPUS-1, or ``None``."""
    value = ascii_int(token, 4)
    return value if value is not None and value < MAX_GPUS else None


def bus_id(domain: int, bus: int, device: int = 0, function: int = 0) -> str | None:
    """``dddd:bb:dd.f`` where the parts are in range, else ``None``."""
    if not (0 <= domain <= 0xFFFFFFFF and 0 <= bus <= 0xFF and 0 <= device <= 0x1F and 0 <= function <= 7):
        return None
    return f"{domain:04x}:{bus:02x}:{device:02x}.{function}"


def nccl_bus_id(value: str) -> str | None:
    """NCCL's int64 busId as it prints it in hex (``1b000``, ``101c0``, ``300000``) -> ``0000:1b:00.0``.

    NCCL packs ``dddd:bb:dd.f`` by dropping the separators, so the last digit is the function, the
    two before it the device, the two before those the bus and the rest the domain."""
    if not value or len(value) > 16 or not re.fullmatch(r"[0-9a-fA-F]+", value):
        return None
    packed = int(value, 16)
    return bus_id(packed >> 20, (packed >> 12) & 0xFF, (packed >> 4) & 0xFF, packed & 0xF)


def hex_bus_id(domain: str, bus: str, device: str = "0", function: str = "0") -> str | None:
    """Hex parts as printed (``0``, ``1b``, ``0``) -> ``0000:1b:00.0``; ``None`` if any is not hex."""
    try:
        return bus_id(int(domain, 16), int(bus, 16), int(device, 16), int(function, 16))
    except ValueError:
        return None


def with_all_pairs(gpus: list[Gpu], source: str, label: str, detail: str | None) -> Topology:
    """A Topology of ``gpus`` (sorted by index) with an ``UNKNOWN`` link for every pair."""
    if len(gpus) > MAX_GPUS:
        raise InputError(f"{detail or label}: {len(gpus)} GPUs is more than {MAX_GPUS}; not a real capture")
    gpus = sorted(gpus, key=lambda g: g.index)
    links = [make_link(a.index, b.index, "UNKNOWN") for i, a in enumerate(gpus) for b in gpus[i + 1 :]]
    return Topology(gpus=gpus, links=links, source=source, source_detail=detail, label=label)


def measurement_of(link: Link, method: str, origin: str | None) -> Measurement:
    """The link's measurement, created for ``method`` where it has none yet."""
    if link.measured is None:
        link.measured = Measurement(method=method, origin=origin)
    return link.measured


def set_directed(link: Link, src: int, value: float, forward: str, backward: str) -> None:
    """Store ``value`` measured from ``src`` to the other end of ``link`` in the field for that direction."""
    m = link.measured
    if m is not None:
        setattr(m, forward if src == link.a else backward, value)


def keep_worse(current: float | None, value: float) -> float:
    """The larger (worse) of two latencies, the first where there is no other."""
    return value if current is None else max(current, value)
