"""Parsing ``bench-p2p``'s options: message sizes (``64MiB``, ``1KiB:1GiB``) and device lists.

Pure functions without TensorFlow, so bad input is refused in milliseconds, before the seconds it
takes to import TensorFlow. Every problem is an ``InputError`` (one line, exit code 2).
"""

from __future__ import annotations

import re

from gputopo.errors import InputError
from gputopo.model import expand_number_list

KIB = 1024
MIB = 1024**2
GIB = 1024**3

# Defaults of `bench-p2p` (here, in a module without TensorFlow, so the CLI can show them).
DEFAULT_SIZE_BYTES = 64 * MIB  # large enough that TF's per-call dispatch is small beside the copy
DEFAULT_REPEAT = 5
DEFAULT_WARMUP = 2
DEFAULT_MIN_SAMPLE_S = 0.02  # each timed sample repeats the copy until it lasts this long
DEFAULT_STEP_TIMEOUT_S = 120.0

# The largest message we agree to allocate per device: beyond this the user has mistyped.
MAX_SIZE_BYTES = 64 * GIB
# A sweep longer than this is a typo (1B:64GiB doubling is 37 sizes).
MAX_SWEEP_SIZES = 64

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
_SIZE_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$")


def parse_size(text: str) -> int:
    """``"64MiB"`` -> 67108864; ``"4KB"`` -> 4000; ``"1024"`` -> 1024 bytes."""
    match = _SIZE_RE.match(text or "")
    if not match:
        raise InputError(f"bad size {text!r}: expected a number of bytes with an optional unit, e.g. 64MiB")
    number, unit = match.group(1), match.group(2).lower()
    if unit not in _UNIT_BYTES:
        raise InputError(f"bad size {text!r}: unknown unit {match.group(2)!r} (use B, KiB, MiB, GiB, KB, MB, GB)")
    size_bytes = int(float(number) * _UNIT_BYTES[unit])
    if size_bytes < 1:
        raise InputError(f"bad size {text!r}: must be at least 1 byte")
    if size_bytes > MAX_SIZE_BYTES:
        raise InputError(f"size {text!r} is larger than the {MAX_SIZE_BYTES // GIB} GiB limit")
    return size_bytes


def parse_sizes(text: str) -> list[int]:
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
            try:
                factor = int(parts[2])
            except ValueError:
                raise InputError(f"bad --sizes factor {parts[2]!r}: expected an integer >= 2") from None
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


def parse_index_list(text: str, what: str = "--gpus") -> list[int]:
    """``"0,2,3"`` or ``"0-3,6"`` -> the indices in the order given; duplicates are refused."""
    if text is None or not text.strip():
        raise InputError(f"{what} is empty: give GPU indices such as 0,2,3")
    try:
        indices = expand_number_list(text)
    except ValueError as exc:
        raise InputError(f"bad {what} {text!r}: {exc}") from None
    if any(i < 0 for i in indices):
        raise InputError(f"bad {what} {text!r}: GPU indices are not negative")
    seen: set[int] = set()
    for i in indices:
        if i in seen:
            raise InputError(f"bad {what} {text!r}: GPU {i} is given twice")
        seen.add(i)
    if not indices:
        raise InputError(f"{what} is empty: give GPU indices such as 0,2,3")
    return indices


def format_size(size_bytes: int) -> str:
    """67108864 -> ``"64 MiB"``; 1000 -> ``"1000 B"`` (binary units where the size is exact)."""
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= scale and size_bytes % scale == 0:
            return f"{size_bytes // scale} {unit}"
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= scale:
            return f"{size_bytes / scale:.1f} {unit}"
    return f"{size_bytes} B"
