"""How gputopo reads and writes numbers for people: GPU and CPU lists, pairs, sizes, GB/s, plurals.

Pure functions of the standard library, at the bottom of the layers: every source, analysis, view
and command parses ``0-3,6`` and writes ``0-2, 0-3`` or ``64 MiB`` through this one module. Parsers
that check user options raise ``InputError`` (one line, exit code 2).
"""

from __future__ import annotations

import re
from typing import Iterable

from gputopo.errors import InputError

KIB = 1024
MIB = 1024**2
GIB = 1024**3

# The largest message we agree to allocate per device: beyond this the user has mistyped.
MAX_SIZE_BYTES = 64 * GIB
# A sweep longer than this is a typo (1B:64GiB doubling is 37 sizes).
MAX_SWEEP_SIZES = 64
# Findings list at most this many pairs, then "and N more".
MAX_PAIRS_LISTED = 8
# GPU lists: no GPU index above this and no list longer than MAX_GPUS (a typo such as
# 0-99999999999 would otherwise be expanded until memory runs out).
MAX_GPU_INDEX = 4095
MAX_GPUS = MAX_GPU_INDEX + 1
# CPU lists (Linux allows up to 8192 CPUs today): the same guard with room to spare.
MAX_CPU_NUMBER = 65535

# Binary units (K, Ki, KiB) are powers of 1024, as in nccl-tests' -b/-e; SI units (KB, MB, GB) are
# powers of 1000. A bare number is bytes.
_UNIT_BYTES = {
    "": 1,
    "b": 1,
    "k": KIB,
    "ki": KIB,
    "kib": KIB,
    "kb": 1000,
    "m": MIB,
    "mi": MIB,
    "mib": MIB,
    "mb": 1000**2,
    "g": GIB,
    "gi": GIB,
    "gib": GIB,
    "gb": 1000**3,
}
_SIZE_RE = re.compile(r"^\s*(\d{1,30}(?:\.\d{1,30})?)\s*([a-zA-Z]*)\s*$", re.ASCII)


def ascii_int(text: str, max_digits: int = 18) -> int | None:
    """``text`` as a whole number when it is 1 to ``max_digits`` ASCII digits, else None.

    ``str.isdigit`` is true for ``"²"`` and ``"٣"``, which ``int`` refuses or reads as another
    number; and ``int`` of 5000 digits raises: every number read from text goes through here."""
    if not (0 < len(text) <= max_digits and text.isascii() and text.isdigit()):
        return None
    return int(text)


def parse_json_object(text: str, what: str, advice: str = "") -> dict:
    """``text`` as a JSON object, or one ``InputError``: "{what} is nested too deeply", "is not JSON
    (reason)" or "is not a JSON object", each followed by ``advice`` (what the user can do). The
    one reader for the JSON documents gputopo takes from people (plan files, ``TF_CONFIG``)."""
    import json

    try:
        value = json.loads(text)
    except RecursionError:
        raise InputError(f"{what} is nested too deeply{advice}") from None
    except ValueError as exc:
        raise InputError(f"{what} is not JSON ({exc}){advice}") from None
    if not isinstance(value, dict):
        raise InputError(f"{what} is not a JSON object{advice}")
    return value


def parse_host_port(text: str) -> tuple[str, int]:
    """``"host:port"`` -> ``(host, port)``: a port of 1 to 65535 in ASCII digits, else one ``InputError``."""
    host, sep, port_text = text.strip().rpartition(":")
    port = ascii_int(port_text, 5)
    if not sep or not host or port is None or not 0 < port < 65536:
        raise InputError(f"worker address {text[:80]!r} is not host:port (e.g. 127.0.0.1:12345)")
    return host, port


# --- number lists (Linux cpulist / GPU list syntax) ----------------------------------------------


def expand_number_list(text: str, max_value: int = MAX_CPU_NUMBER, max_count: int = MAX_CPU_NUMBER + 1) -> list[int]:
    """``"0-3,6"`` -> ``[0, 1, 2, 3, 6]`` in the order written (Linux cpulist / GPU list syntax).

    Raises ``ValueError`` saying which part is wrong, and for a number above ``max_value`` or a
    list of more than ``max_count`` numbers (checked before a range is expanded). A lone negative
    number parses (callers decide whether it is allowed); empty parts are skipped.
    """

    def number(word: str, part: str) -> int:
        try:
            return int(word)
        except ValueError:
            raise ValueError(f"{_quoted(part)} is not a number or a range") from None

    numbers: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part[1:]:
            lo_text, hi_text = part.split("-", 1)
            lo, hi = number(lo_text, part), number(hi_text, part)
            if hi < lo:
                raise ValueError(f"range {_quoted(part)}: the end is before the start")
            count = hi - lo + 1
        else:
            lo = hi = number(part, part)
            count = 1
        if hi > max_value:
            raise ValueError(f"{hi} is above the largest allowed number, {max_value}")
        if len(numbers) + count > max_count:
            raise ValueError(f"more than {max_count} numbers")
        numbers.extend(range(lo, hi + 1))
    return numbers


def parse_cpu_list(text: str | None) -> list[int] | None:
    """Parse a Linux cpulist such as ``0-11,24-35`` into CPU numbers; ``None``/``N/A`` -> ``None``."""
    if text is None:
        return None
    text = text.strip()
    if not text or text.upper() == "N/A":
        return None
    return sorted(set(expand_number_list(text)))


def format_cpu_list(cpus: Iterable[int]) -> str:
    """``[0,1,2,3,8]`` -> ``"0-3,8"`` (the Linux cpulist form)."""
    ordered = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1] == ordered[j] + 1:
            j += 1
        parts.append(str(ordered[i]) if i == j else f"{ordered[i]}-{ordered[j]}")
        i = j + 1
    return ",".join(parts)


def _quoted(text: str, limit: int = 40) -> str:
    """``text`` quoted for a one-line message, cut to ``limit`` characters."""
    return repr(text if len(text) <= limit else text[: limit - 3] + "...")


def parse_gpu_list(text: str, what: str = "--gpus") -> list[int]:
    """``"0,2,3"`` or ``"0-3,6"`` -> the indices in the order given; duplicates are refused, and so
    are indices above ``MAX_GPU_INDEX``."""
    if text is None or not text.strip():
        raise InputError(f"{what} is empty: give GPU indices such as 0,2,3")
    try:
        indices = expand_number_list(text, max_value=MAX_GPU_INDEX, max_count=MAX_GPUS)
    except ValueError as exc:
        raise InputError(f"bad {what} {_quoted(text)}: {exc}") from None
    if any(i < 0 for i in indices):
        raise InputError(f"bad {what} {_quoted(text)}: GPU indices are not negative")
    seen: set[int] = set()
    for i in indices:
        if i in seen:
            raise InputError(f"bad {what} {_quoted(text)}: GPU {i} is given twice")
        seen.add(i)
    if not indices:
        raise InputError(f"{what} is empty: give GPU indices such as 0,2,3")
    return indices


def parse_count_list(text: str, what: str = "--scaling") -> list[int]:
    """``"1,2,4"`` -> ``[1, 2, 4]`` (device counts), each at least 1, sorted, no duplicates."""
    numbers = [ascii_int(part.strip(), 4) for part in text.split(",") if part.strip()]
    if any(n is None for n in numbers):
        raise InputError(f"{what} expects device counts like 1,2,4, got {_quoted(text)}")
    values = sorted(set(n for n in numbers if n is not None))
    if not values or values[0] < 1:
        raise InputError(f"{what} expects device counts of at least 1, got {_quoted(text)}")
    if values[-1] > MAX_GPUS:
        raise InputError(f"{what}: {values[-1]} devices is more than {MAX_GPUS}")
    return values


# --- GPU lists and pairs in sentences ------------------------------------------------------------


def gpu_list(gpus: Iterable[int]) -> str:
    """``[3, 0, 1]`` -> ``"0,1,3"``: GPU indices as findings and messages write them (sorted)."""
    return ",".join(str(g) for g in sorted(gpus))


def number_list(numbers: Iterable[int]) -> str:
    """``[3, 0, 1]`` -> ``"3,0,1"``: numbers in the order given (a device order matters)."""
    return ",".join(str(n) for n in numbers)


def gpu_set(gpus: Iterable[int]) -> str:
    """``[0, 2, 3]`` -> ``"{0,2,3}"``: a group in prose, in the order given."""
    return "{" + number_list(gpus) + "}"


def gpus_word(gpus: list[int]) -> str:
    """``[2]`` -> ``"GPU 2"``; ``[3, 1]`` -> ``"GPUs 1,3"``."""
    return f"GPU {gpus[0]}" if len(gpus) == 1 else f"GPUs {gpu_list(gpus)}"


def pair_list(pairs: Iterable[tuple[int, int]], limit: int | None = MAX_PAIRS_LISTED, more: str = " and {n} more") -> str:
    """``[(0, 3), (0, 2)]`` -> ``"0-2, 0-3"`` (sorted), cut to ``limit`` pairs plus ``more``
    (``" and 2 more"``; ``" ..."`` where a sentence has no room). ``limit=None`` lists all."""
    ordered = sorted(pairs)
    shown = ordered if limit is None else ordered[:limit]
    text = ", ".join(f"{a}-{b}" for a, b in shown)
    if len(ordered) > len(shown):
        text += more.format(n=len(ordered) - len(shown))
    return text


def all_word(n: int, word: str, plural: str | None = None) -> str:
    """``both bridges``, ``all 3 bridges``, ``the one bridge``: never "all 2"."""
    if n == 1:
        return f"the one {word}"
    return f"both {plural or word + 's'}" if n == 2 else f"all {n} {plural or word + 's'}"


def count_word(n: int, word: str, plural: str | None = None) -> str:
    """``one host``, ``3 hosts``; ``plural`` for words that do not just take an s (``classes``)."""
    return f"one {word}" if n == 1 else f"{n} {plural or word + 's'}"


# --- sizes and rates -----------------------------------------------------------------------------


def parse_size(text: str) -> int:
    """``"64MiB"`` -> 67108864; ``"4KB"`` -> 4000; ``"1024"`` -> 1024 bytes."""
    match = _SIZE_RE.match(text or "")
    if not match:
        raise InputError(f"bad size {_quoted(text or '')}: expected a number of bytes with an optional unit, e.g. 64MiB")
    number, unit = match.group(1), match.group(2).lower()
    if unit not in _UNIT_BYTES:
        raise InputError(f"bad size {text!r}: unknown unit {match.group(2)!r} (use B, KiB, MiB, GiB, KB, MB, GB)")
    value = float(number) * _UNIT_BYTES[unit]
    if value > MAX_SIZE_BYTES:  # 30 digits at most: finite, and refused before int() sees it
        raise InputError(f"size {_quoted(text)} is larger than the {MAX_SIZE_BYTES // GIB} GiB limit")
    size_bytes = int(value)
    if size_bytes < 1:
        raise InputError(f"bad size {text!r}: must be at least 1 byte")
    if size_bytes > MAX_SIZE_BYTES:
        raise InputError(f"size {text!r} is larger than the {MAX_SIZE_BYTES // GIB} GiB limit")
    return size_bytes


def parse_size_sweep(text: str) -> list[int]:
    """A sweep ``"1KiB:1GiB"`` (doubling) or ``"1KiB:1GiB:4"`` (factor 4), or a list ``"4KiB,64MiB"``.

    A sweep runs from the first size, multiplying by the factor while the size stays <= the last,
    as nccl-tests' ``-b/-e/-f`` do. Sizes come back sorted and without duplicates.
    """
    if not text or not text.strip():
        raise InputError("--sizes is empty: give e.g. 1KiB:1GiB or 4KiB,64MiB")
    if ":" in text:
        parts = text.split(":")
        if len(parts) not in (2, 3):
            raise InputError(f"bad --sizes {text!r}: expected FIRST:LAST or FIRST:LAST:FACTOR")
        first, last = parse_size(parts[0]), parse_size(parts[1])
        factor = 2
        if len(parts) == 3:
            number = ascii_int(parts[2].strip(), 12)
            if number is None:
                raise InputError(f"bad --sizes factor {_quoted(parts[2])}: expected an integer >= 2")
            factor = number
            if factor < 2:
                raise InputError(f"bad --sizes factor {factor}: expected an integer >= 2")
        if first > last:
            raise InputError(f"bad --sizes {text!r}: the first size is larger than the last")
        sizes = []
        size = first
        while size <= last:
            sizes.append(size)
            if len(sizes) > MAX_SWEEP_SIZES:
                raise InputError(f"--sizes {text!r} gives more than {MAX_SWEEP_SIZES} sizes; use a larger factor")
            size *= factor
    else:
        sizes = [parse_size(part) for part in text.split(",") if part.strip()]
        if not sizes:
            raise InputError(f"bad --sizes {text!r}: no size given")
        if len(sizes) > MAX_SWEEP_SIZES:
            raise InputError(f"--sizes gives more than {MAX_SWEEP_SIZES} sizes")
    return sorted(set(sizes))


def format_size(size_bytes: int) -> str:
    """67108864 -> ``"64 MiB"``; 1000 -> ``"1000 B"`` (binary units where the size is exact)."""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"


def format_gbps(gbps: float) -> str:
    """``722.4`` -> ``"722"``, ``6.16`` -> ``"6.2"``: whole GB/s from 10 up, one decimal below."""
    return f"{gbps:.0f}" if gbps >= 10 else f"{gbps:.1f}"


# --- times ---------------------------------------------------------------------------------------

_UTC_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{1,6})?(?:Z|\+00:00)")


def utc_now_text() -> str:
    """Now as a snapshot records a time: UTC, ISO 8601, to the second (``2025-06-01T10:00:00Z``)."""
    from datetime import datetime, timezone

    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def check_utc_time(text: str, where: str) -> str:
    """``text`` if it is a UTC time in ISO 8601 (``2025-06-01T10:00:00Z``, ``+00:00``, fractions of a
    second), else a ``ValueError`` naming ``where``: no other offset, no local time, a real date."""
    from datetime import datetime

    if _UTC_TIME_RE.fullmatch(text):
        try:
            datetime.fromisoformat(text.replace("Z", "+00:00"))
            return text
        except ValueError:
            pass
    raise ValueError(f"{where}: not a UTC time in ISO 8601 (such as 2025-06-01T10:00:00Z), got {_quoted(text)}")


def shown_utc_time(text: str) -> str:
    """``2025-06-01T10:00:00Z`` -> ``2025-06-01 10:00:00 UTC`` (a time ``check_utc_time`` took)."""
    return f"{text[:10]} {text[11:19]} UTC"
