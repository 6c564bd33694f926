"""JSON -> dataclasses, checked field by field: a wrong field is a ``ValueError`` naming its path
(``gpus[3].index: must be an integer, got "x"``); NaN, Infinity and huge integers are refused."""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import types
import typing
from typing import Any

from gputopo.quoting import check_text

# Free text that gputopo itself writes (sentences, file paths, titles): shown through the views'
# terminal-safe output, never written into a script. Every other string (names, hosts, NIC names,
# bus ids, words, dictionary keys) is one line: a control character, newline included, is refused.
# Prose a source or a finding carries (a log's warning, a pasted line as evidence): shown as plain
# text and never used as a name, a path or a shell word, so a tab or newline in it is data. Every
# other string (names, bus ids, hosts, words) is one line of printable text.
FREE_TEXT_FIELDS = frozenset({"message", "fix", "label", "source_detail", "ignored", "source", "reason", "evidence",
                              "effect", "notes", "detail", "kept", "other", "kept_from", "other_from", "origin"})


def build(cls: type, data: Any, path: str = "") -> Any:
    """A ``cls`` from JSON ``data``; a wrong field is a ``ValueError`` naming it (``gpus[3].index``)."""
    if not isinstance(data, dict):
        raise ValueError(f"{path or 'the snapshot'}: must be an object, got {shown(data)}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            kwargs[f.name] = _value(data[f.name], _field_types(cls)[f.name], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{where}: missing")
    return cls(**kwargs)


def _value(value: Any, hint: Any, where: str) -> Any:
    """A JSON ``value`` as the annotation ``hint`` wants it (nested dataclasses built), else a
    ``ValueError`` naming ``where``. NaN, Infinity and 1e400 (read as infinity) are no figures, and
    integers are 64-bit."""
    expected, origin = hint, typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]  # our unions: X | None
        origin = typing.get_origin(hint)
    if origin is list and isinstance(value, list):
        return [_value(v, typing.get_args(hint)[0], f"{where}[{k}]") for k, v in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        return {check_text(k, f"{where} key"): _value(v, typing.get_args(hint)[1], f"{where}.{k}")
                for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return build(hint, value, where)  # type: ignore[arg-type]
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int and is_number and isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ValueError(f"{where}: {shown(value)} is out of range")
    if hint is str and isinstance(value, str) and where.rsplit(".", 1)[-1].split("[", 1)[0] not in FREE_TEXT_FIELDS:
        check_text(value, where)
    if (
        (hint is float and is_number and math.isfinite(value))
        or (hint is int and is_number and isinstance(value, int))
        or (hint in (str, bool) and isinstance(value, hint))
    ):
        return value
    raise ValueError(f"{where}: must be {_type_text(expected)}, got {shown(value)}")


def shown(value: Any) -> str:
    """A JSON value cut short for a one-line message."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _type_text(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(arg) for arg in args)
    if origin is list:
        return "a list" + (f" of {args[0].__name__}" if dataclasses.is_dataclass(args[0]) else "")
    words = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false", type(None): "null"}
    return words.get(hint, "an object")
