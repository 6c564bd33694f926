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
    again (a second of a five-second read-analyse-write). Restored as it was, whatever happens.

    A block that made more than ``FREEZE_AFTER_OBJECTS`` objects leaves them to no collection
    (``gc.freeze``: they are the command's data, made of plain values; reference counting still
    frees them): else the first allocation after the block would scan them all, and each older
    generation again (half a second for a domain's links)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            if gc.get_count()[0] > FREEZE_AFTER_OBJECTS:
                gc.freeze()
            gc.enable()


# Tracked objects made in a ``gc_paused`` block past which they are frozen (``gc.freeze``) on leaving it.
FREEZE_AFTER_OBJECTS = 100_000


class EncodedRows(list):  # type: ignore[type-arg]
    """The items of a long list already written as compact JSON text, one string per item
    (``model.link_rows``): ``strict_json_text`` writes them one per line as they are, exactly as
    it writes such a list's items."""


class LazyRows:
    """Like ``EncodedRows``, but made a block at a time as the text is written (``strict_json_parts``):
    a 576-GPU domain's 165,600 rows are 35 MB of text, never held whole. ``joined(separator)``:
    the rows in order with ``separator`` between them, as a few long strings."""

    def __len__(self) -> int:
        raise NotImplementedError

    def joined(self, separator: str) -> Iterator[str]:
        raise NotImplementedError


def finite_or_null(value: Any) -> Any:
    """``value`` with every NaN or infinity replaced by None, recursively (strict JSON)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (EncodedRows, LazyRows)):  # strict already
        return value
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


def strict_json_text(data: Any, indent: int = 2, large: bool = False) -> str:
    """``data`` as strict JSON (a non-finite figure written as null), indented; in a large document
    each list of more than ``ROWS_FROM_ITEMS`` items has one compact item per line. ``large``: the
    caller knows the document is large (its ``EncodedRows`` stand for more values than it counts)."""
    return "".join(strict_json_parts(data, indent, large))


def strict_json_parts(data: Any, indent: int = 2, large: bool = False) -> Iterator[str]:
    """``strict_json_text`` in parts, to be written one after another: a ``LazyRows`` list is made
    as its parts are asked for (anything refused, a NaN, is refused before the first part)."""
    with gc_paused():
        try:
            parts = _json_parts(data, indent, large)
        except ValueError:  # NaN or infinity somewhere: replace them (a rare, slower path)
            parts = _json_parts(finite_or_null(data), indent, large)
    for part in parts:
        if type(part) is str:
            yield part
        else:
            yield from part
    yield "\n"


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


def _json_parts(data: Any, indent: int, large: bool = False) -> list[str | Iterator[str]]:
    """The text's parts: strings, and a ``LazyRows``' parts still to be made."""
    if not large and _count_values(data, LARGE_DOCUMENT_VALUES) > 0:
        return [json.dumps(data, indent=indent, allow_nan=False)]
    parts: list[str | Iterator[str]] = []
    _rows_text(data, indent, "", parts)
    return parts


def _rows_text(data: Any, indent: int, margin: str, parts: list[str | Iterator[str]]) -> None:
    """``data``'s text, after ``margin`` on its first line, appended to ``parts``."""
    inner = margin + " " * indent
    if isinstance(data, LazyRows):  # (one per line whatever its length: the caller chose it for a long list)
        parts += ("[\n", inner, data.joined(",\n" + inner), "\n", margin, "]") if len(data) else ("[]",)
        return
    if isinstance(data, list) and len(data) > ROWS_FROM_ITEMS:
        if type(data) is EncodedRows:
            whole = inner + (",\n" + inner).join(data)
        else:
            whole = _rows_of_objects(data, inner)
        if whole is None:
            encode = _STRICT_ENCODER.encode  # one encoder for every row (json.dumps makes one per call)
            whole = ",\n".join([inner + encode(item) for item in data])
        parts += ("[\n", whole, "\n", margin, "]")
        return
    if not (isinstance(data, (list, dict)) and data):
        parts.append(json.dumps(data, allow_nan=False))
        return
    opening, closing = ("[", "]") if isinstance(data, list) else ("{", "}")
    parts.append(opening)
    for k, item in enumerate(data.items() if isinstance(data, dict) else data):
        parts.append(("\n" if k == 0 else ",\n") + inner)
        if isinstance(data, dict):
            parts.append(json.dumps(item[0]) + ": ")
            item = item[1]
        _rows_text(item, indent, inner, parts)
    parts += ("\n", margin, closing)


def _rows_of_objects(items: list[Any], inner: str) -> str | None:
    """A list of objects as rows from one call of the C encoder: the text between two items is
    ``}, {``, which becomes a line break. Only where that text occurs exactly between the items (no
    string or nested list holds it: the count says so); else None and the rows are made one by one.
    A list of integers likewise (``scan --json``'s ``class_of_link``: no integer holds ``, ``)."""
    if all(type(item) is int for item in items):
        return inner + _STRICT_ENCODER.encode(items)[1:-1].replace(", ", ",\n" + inner)
    if not all(type(item) is dict for item in items):
        return None
    text = _STRICT_ENCODER.encode(items)[1:-1]
    if text.count("}, {") != len(items) - 1:
        return None
    return inner + text.replace("}, {", "},\n" + inner + "{")
