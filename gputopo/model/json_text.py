"""JSON text as gputopo writes it (snapshots, plans, ``--json``): strict (a NaN or infinity becomes
null, which strict parsers read), indented like ``json.dumps(indent=2)``, except that a large
document has one compact line per item of its long lists (a 576-GPU domain's 165,600 links: 4x
smaller and about 10x faster than Python's indenting encoder, which writes a line per field)."""

from __future__ import annotations

import contextlib
import gc
import json
import math
from typing import Any, Iterator


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while building or writing a large document: JSON values make no
    cycles, and a 576-GPU domain's 165,600 link objects made the collector scan the heap again and
    again (a second of a five-second read-analyse-write). Restored as it was, whatever happens."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None, recursively (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite_or_null(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_null(v) for v in value]
    return value


# A document with more values than this is written with one compact line per item of its long
# lists (a 576-GPU domain's 165,600 links: 4x smaller, and 10x faster than one line per field,
# which is Python's slow indenting encoder); smaller ones exactly as json.dumps(indent=2) does.
LARGE_DOCUMENT_VALUES = 20_000
ROWS_FROM_ITEMS = 100


def strict_json_text(data: Any, indent: int = 2) -> str:
    """``data`` as strict JSON (a non-finite figure written as null), indented; in a large document
    each list of more than ``ROWS_FROM_ITEMS`` items has one compact item per line."""
    with gc_paused():
        try:
            return _json_text(data, indent) + "\n"
        except ValueError:  # NaN or infinity somewhere: replace them (a rare, slower path)
            return _json_text(finite_or_null(data), indent) + "\n"


def _count_values(data: Any, budget: int) -> int:
    """How much of ``budget`` is left after counting ``data``'s values (stops at 0)."""
    stack = [data]
    while stack and budget > 0:
        value = stack.pop()
        if isinstance(value, dict):
            budget -= len(value)
            stack.extend(v for v in value.values() if isinstance(v, (dict, list)))
        elif isinstance(value, list):
            budget -= len(value)
            stack.extend(v for v in value if isinstance(v, (dict, list)))
    return budget


_STRICT_ENCODER = json.JSONEncoder(allow_nan=False)


def _json_text(data: Any, indent: int) -> str:
    if _count_values(data, LARGE_DOCUMENT_VALUES) > 0:
        return json.dumps(data, indent=indent, allow_nan=False)
    return _rows_text(data, indent, "")


def _rows_text(data: Any, indent: int, margin: str) -> str:
    inner = margin + " " * indent
    if isinstance(data, list) and len(data) > ROWS_FROM_ITEMS:
        whole = _rows_of_objects(data, inner)
        if whole is not None:
            return "[\n" + whole + "\n" + margin + "]"
        encode = _STRICT_ENCODER.encode  # one encoder for every row (json.dumps makes one per call)
        rows = [inner + encode(item) for item in data]
    elif isinstance(data, list) and data:
        rows = [inner + _rows_text(item, indent, inner) for item in data]
    elif isinstance(data, dict) and data:
        rows = [inner + json.dumps(k) + ": " + _rows_text(v, indent, inner) for k, v in data.items()]
    else:
        return json.dumps(data, allow_nan=False)
    opening, closing = ("[", "]") if isinstance(data, list) else ("{", "}")
    return opening + "\n" + ",\n".join(rows) + "\n" + margin + closing


def _rows_of_objects(items: list[Any], inner: str) -> str | None:
    """A list of objects as rows from one call of the C encoder: the text between two items is
    ``}, {``, which becomes a line break. Only where that text occurs exactly between the items (no
    string or nested list holds it: the count says so); else None and the rows are made one by one."""
    if not all(type(item) is dict for item in items):
        return None
    text = _STRICT_ENCODER.encode(items)[1:-1]
    if text.count("}, {") != len(items) - 1:
        return None
    return inner + text.replace("}, {", "},\n" + inner + "{")
