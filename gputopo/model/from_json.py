"""JSON -> dataclasses, checked field by field: a wrong field is a ``ValueError`` naming its path
(``gpus[3].index: must be an integer, got "x"``); NaN, Infinity and huge integers are refused."""

from __future__ import annotations

import dataclasses
import functools
import itertools
import operator
import json
import math
import types
import typing
from typing import Any, Callable

from gputopo.quoting import check_text, first_control

# Free text that gputopo itself writes (sentences, file paths, titles): shown through the views'
# terminal-safe output, never written into a script. Every other string (names, hosts, NIC names,
# bus ids, words, dictionary keys) is one line: a control character, newline included, is refused.
# Prose a source or a finding carries (a log's warning, a pasted line as evidence): shown as plain
# text and never used as a name, a path or a shell word, so a tab or newline in it is data. Every
# other string (names, bus ids, hosts, words) is one line of printable text.
FREE_TEXT_FIELDS = frozenset({"message", "fix", "label", "source_detail", "ignored", "source", "reason", "evidence",
                              "effect", "notes", "detail", "kept", "other", "kept_from", "other_from", "origin"})


def build(cls: type, data: Any, path: str = "", take: bool = False) -> Any:
    """A ``cls`` from JSON ``data``; a wrong field is a ``ValueError`` naming it (``gpus[3].index``).

    A fast pass first (one check per field, no paths built: a 576-GPU domain has 165,600 links);
    only where it meets a wrong value does the careful pass run again to name the field. ``take``:
    ``data`` is the caller's no longer (``json.loads``'s result, read once): the dicts of a long list
    of objects become those objects' attributes, not copied."""
    result = _fast_converter(cls, take)(data)
    if result is not _BAD:
        return result
    return _build_checked(cls, data, path)


def _build_checked(cls: type, data: Any, path: str = "") -> Any:
    if not isinstance(data, dict):
        raise ValueError(f"{path or 'the snapshot'}: must be an object, got {shown(data)}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            kwargs[f.name] = _value(data[f.name], _field_types(cls)[f.name], where, f.name in FREE_TEXT_FIELDS)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{where}: missing")
    return cls(**kwargs)


def _value(value: Any, hint: Any, where: str, free: bool = False) -> Any:
    """A JSON ``value`` as the annotation ``hint`` wants it (nested dataclasses built), else a
    ``ValueError`` naming ``where``. NaN, Infinity and 1e400 (read as infinity) are no figures, and
    integers are 64-bit. ``free``: the value is (in) a free-text field, by the field's name; a
    dictionary's values never are, whatever their keys say (a key "message" names no field)."""
    expected, origin = hint, typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]  # our unions: X | None
        origin = typing.get_origin(hint)
    if origin is list and isinstance(value, list):
        return [_value(v, typing.get_args(hint)[0], f"{where}[{k}]", free) for k, v in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        return {check_text(k, f"{where} key"): _value(v, typing.get_args(hint)[1], f"{where}.{k}")
                for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _build_checked(hint, value, where)  # type: ignore[arg-type]
    if hint is Any:
        return _plain_json(value, where)
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint in (int, float) and is_number and isinstance(value, int) and not -(2**63) <= value < 2**63:
        # (a figure too: math.isfinite(10**400) raises OverflowError)
        raise ValueError(f"{where}: {shown(value)} is out of range")
    if hint is str and isinstance(value, str) and not free:
        check_text(value, where)
    if (
        (hint is float and is_number and math.isfinite(value))
        or (hint is int and is_number and isinstance(value, int))
        or (hint in (str, bool) and isinstance(value, hint))
    ):
        return value
    raise ValueError(f"{where}: must be {_type_text(expected)}, got {shown(value)}")


_BAD = object()  # the fast pass met a value the careful pass must name
_INT64 = 2**63
# How deeply an ``Any`` field (``ReadingNote.facts``) may nest its lists and objects.
MAX_PLAIN_DEPTH = 8


def _plain_json(value: Any, where: str, depth: int = 0) -> Any:
    """A field typed ``Any``: plain JSON values only (``ReadingNote.facts``). Its strings are data
    shown as text, so free text; keys are one line; figures finite, integers 64-bit; nested at most
    ``MAX_PLAIN_DEPTH`` deep."""
    kind = type(value)
    if kind in (str, bool) or value is None:
        return value
    if kind is int:
        if not -_INT64 <= value < _INT64:
            raise ValueError(f"{where}: {shown(value)} is out of range")
        return value
    if kind is float:
        if not math.isfinite(value):
            raise ValueError(f"{where}: must be a finite number, got {shown(value)}")
        return value
    if kind in (list, dict) and depth >= MAX_PLAIN_DEPTH:
        raise ValueError(f"{where}: nested more than {MAX_PLAIN_DEPTH} deep")
    if kind is list:
        return [_plain_json(v, f"{where}[{k}]", depth + 1) for k, v in enumerate(value)]
    if kind is dict:
        return {check_text(k, f"{where} key"): _plain_json(v, f"{where}.{k}", depth + 1) for k, v in value.items()}
    raise ValueError(f"{where}: must be a plain JSON value, got {shown(value)}")


def _fast_plain_json(value: Any, depth: int = 0) -> Any:
    """``_plain_json`` without paths: the value, or ``_BAD`` where the careful pass must name it."""
    kind = type(value)
    if kind in (str, bool) or value is None:
        return value
    if kind is int:
        return value if -_INT64 <= value < _INT64 else _BAD
    if kind is float:
        return value if math.isfinite(value) else _BAD
    if kind in (list, dict) and depth >= MAX_PLAIN_DEPTH:
        return _BAD
    if kind is list:
        out = [_fast_plain_json(v, depth + 1) for v in value]
        return _BAD if any(v is _BAD for v in out) else out
    if kind is dict:
        if value and first_control("".join(value)) is not None:
            return _BAD
        items = {k: _fast_plain_json(v, depth + 1) for k, v in value.items()}
        return _BAD if any(v is _BAD for v in items.values()) else items
    return _BAD


@functools.lru_cache(maxsize=None)
def _fast_converter(hint: Any, take: bool = False) -> Callable[[Any], Any]:
    """A function JSON value -> the value as ``hint`` wants it, or ``_BAD``; it accepts exactly
    what ``_value`` accepts (anything else goes to ``_value``, which names the field)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        convert = _fast_converter(inner, take)
        return lambda v: None if v is None else convert(v)
    if origin is list:
        item_hint = typing.get_args(hint)[0]
        item = _fast_converter(item_hint, take)
        columns = _columns_converter(item_hint, take) if dataclasses.is_dataclass(item_hint) else None

        def as_list(v: Any) -> Any:
            if type(v) is not list:
                return _BAD
            if columns is not None and len(v) > 16:
                out = columns(v)
                if out is not None:
                    return out
            out = [item(x) for x in v]
            return _BAD if any(x is _BAD for x in out) else out

        return as_list
    if origin is dict:
        item = _fast_converter(typing.get_args(hint)[1], take)

        def as_dict(v: Any) -> Any:
            if type(v) is not dict or (v and first_control("".join(v)) is not None):  # keys are one line too
                return _BAD
            out = {k: item(x) for k, x in v.items()}
            return _BAD if any(x is _BAD for x in out.values()) else out

        return as_dict
    if dataclasses.is_dataclass(hint):
        return _fast_dataclass(hint, take)
    if hint is Any:
        return _fast_plain_json
    if hint is int:
        return lambda v: v if type(v) is int and -_INT64 <= v < _INT64 else _BAD
    if hint is float:
        return lambda v: v if (type(v) is float and math.isfinite(v)) or (type(v) is int and -_INT64 <= v < _INT64) else _BAD
    if hint is str:  # a list item or a dict value: one line, as the careful pass checks
        return lambda v: v if type(v) is str and first_control(v) is None else _BAD
    if hint is bool:
        return lambda v: v if type(v) is bool else _BAD
    return lambda v: _BAD


def _fast_dataclass(cls: Any, take: bool) -> Callable[[Any], Any]:
    """One loop over the fields with the plain types checked inline (a call per field would double
    the time of a large snapshot); nested values go to their own converter."""
    hints = _field_types(cls)
    plan: list[tuple[str, frozenset[type], bool, Any]] = []
    nested: dict[str, Callable[[Any], Any]] = {}

    def convert(data: Any) -> Any:
        if type(data) is not dict:
            return _BAD
        if not plan:  # filled on first use: the field types may refer to this class
            plan.extend(_field_plan(cls, hints, nested, take))
        text_fields = _text_fields(cls)
        kwargs = {}
        for name, allowed, required, inner in plan:
            value = data.get(name, _BAD)
            if value is _BAD:
                if required:
                    return _BAD
                continue
            kind = type(value)
            if kind not in allowed:
                if inner is None:
                    return _BAD
                value = nested[name](value)
                if value is _BAD:
                    return _BAD
            elif kind is int and not -_INT64 <= value < _INT64:
                return _BAD
            elif kind is float and not math.isfinite(value):
                return _BAD
            elif kind is str and name in text_fields and first_control(value) is not None:
                return _BAD
            kwargs[name] = value
        return cls(**kwargs)

    return convert


def _columns_converter(cls: Any, take: bool) -> Callable[[list[Any]], Any]:
    """A long list of objects of one dataclass (a domain's links) checked column by column: the
    set of types of each field's values, the range of its integers, its distinct strings, each done
    in C; a nested value (``Link.measured``, ``Link.health``) is converted on its own only where it
    is not null or an empty list. None where that does not settle it (an unknown key, a missing
    field, a wrong value): the caller then converts item by item, and names what is wrong."""
    hints = _field_types(cls)
    nested: dict[str, Callable[[Any], Any]] = {}
    plan: list[tuple[str, frozenset[type], bool, Any]] = []

    def convert(items: list[Any]) -> Any:
        if not plan:
            plan.extend(_field_plan(cls, hints, nested, take))
        if set(map(type, items)) != {dict}:
            return None
        names = tuple(name for name, *_ in plan)
        columns: dict[str, Any] = {}
        if all(map(operator.eq, map(len, items), itertools.repeat(len(names)))):
            try:  # as many keys as fields, every field among them: every item has every field
                columns = dict(zip(names, zip(*map(operator.itemgetter(*names), items)))) if len(names) > 1 else {}
            except KeyError:
                pass
        whole = bool(columns)
        if not whole and not _keys_fit(items, frozenset(names), {name for name, _, needed, _ in plan if needed}):
            return None
        text_fields = _text_fields(cls)
        later: list[tuple[str, list[tuple[int, Any]] | None]] = []  # None: a new empty list each
        for name, allowed, _, inner in plan:
            column = columns.get(name) or (list(map(operator.itemgetter(name), items)) if whole
                                           else [d[name] for d in items if name in d])
            kinds = set(map(type, column))
            if kinds <= allowed:
                if not _plain_column_ok(column, kinds, name in text_fields):
                    return None
                continue
            if inner is None:
                return None
            if whole and kinds == {list} and name in _list_fields(cls) and not any(column):  # every one []
                if not take:
                    later.append((name, None))
                continue
            values = _nested_column(items, name, allowed, nested[name], name in _list_fields(cls))
            if values is None:
                return None
            later.append((name, values))
        made = _instances(cls, items, whole, take)
        apply_later(made, later)
        return made

    return convert


def apply_later(made: list[Any], later: list[tuple[str, list[tuple[int, Any]] | None]]) -> None:
    """Set the fields a column pass left for after the objects were made: ``None`` values mean every
    object gets a fresh ``[]``; else ``(position, value)`` pairs. Each changed object gets a new
    ``__dict__`` (a taken item stays as it was: the careful pass may read it)."""
    for name, values in later:
        if values is None:
            for obj in made:
                obj.__dict__[name] = []
            continue
        for position, value in values:
            obj = made[position]
            obj.__dict__ = {**obj.__dict__, name: value}


def _keys_fit(items: list[dict[str, Any]], every: frozenset[str], required: set[str]) -> bool:
    keys = list(map(dict.keys, items))
    return all(map(operator.ge, keys, itertools.repeat(required))) and all(map(operator.le, keys, itertools.repeat(every)))


def _plain_column_ok(column: list[Any], kinds: set[type], one_line: bool) -> bool:
    """Whether a column of plain values (types checked already) holds only what the careful pass
    takes: 64-bit integers, finite floats, and strings without control characters where they must
    be one line (each distinct string checked once)."""
    if int in kinds:
        ints = column if len(kinds) == 1 else [v for v in column if type(v) is int]
        if not (-_INT64 <= min(ints) and max(ints) < _INT64):
            return False
    if float in kinds and not all(map(math.isfinite, (v for v in column if type(v) is float))):
        return False
    if str in kinds and one_line:
        strings = set(column) if len(kinds) == 1 else {v for v in column if type(v) is str}
        if first_control("".join(strings)) is not None:
            return False
    return True


def _nested_column(items: list[dict[str, Any]], name: str, allowed: frozenset[type], convert: Callable[[Any], Any],
                   is_list: bool) -> list[tuple[int, Any]] | None:
    """``(position, value)`` for each item whose ``name`` is not a plain value the field takes as it
    is (null): converted by its own converter; an empty list becomes a new one (nothing to check).
    None where one is wrong."""
    result = []
    for position, d in enumerate(items):
        value = d.get(name, _BAD)
        if value is _BAD or type(value) in allowed:
            continue
        value = [] if is_list and type(value) is list and not value else convert(value)
        if value is _BAD:
            return None
        result.append((position, value))
    return result


def _instances(cls: Any, items: list[dict[str, Any]], whole: bool = False, take: bool = False) -> list[Any]:
    """``[cls(**d) for d in items]``; for a dataclass without ``__post_init__``, its objects are
    made with their ``__dict__`` directly (the same attributes, a fresh value from each default
    factory where the item has none): several times faster for a domain's 165,600 links. An item
    with every field becomes its object's ``__dict__`` itself where it is ``take``n, else a copy."""
    fields = dataclasses.fields(cls)
    plain = not hasattr(cls, "__post_init__") and all(f.init for f in fields)
    if not plain or cls.__dataclass_params__.frozen or getattr(cls, "__slots__", None) is not None:
        return [cls(**d) for d in items]
    new = object.__new__
    made = []
    if whole:
        made = list(map(new, itertools.repeat(cls, len(items))))
        for _ in map(setattr, made, itertools.repeat("__dict__"), items if take else map(dict, items)):
            pass
        return made
    defaults = {f.name: (None if f.default is dataclasses.MISSING else f.default) for f in fields}
    factories = [(f.name, f.default_factory) for f in fields if f.default_factory is not dataclasses.MISSING]
    for d in items:
        obj = new(cls)
        data = {**defaults, **d}
        for name, make in factories:
            if name not in d:
                data[name] = make()
        obj.__dict__ = data
        made.append(obj)
    return made


@functools.cache
def _list_fields(cls: Any) -> frozenset[str]:
    """The fields of ``cls`` that hold a list (or null)."""
    hints = _field_types(cls)
    return frozenset(name for name, hint in hints.items()
                     if any(typing.get_origin(arg) is list for arg in (typing.get_args(hint) or (hint,)))
                     or typing.get_origin(hint) is list)


@functools.lru_cache(maxsize=None)
def _text_fields(cls: Any) -> frozenset[str]:
    """The string fields of ``cls`` that must be one line (``check_text``): all but free text."""
    hints = _field_types(cls)
    names = set()
    for f in dataclasses.fields(cls):
        args = typing.get_args(hints[f.name]) if typing.get_origin(hints[f.name]) in (typing.Union, types.UnionType) \
            else (hints[f.name],)
        if str in args and f.name not in FREE_TEXT_FIELDS:
            names.add(f.name)
    return frozenset(names)


def _field_plan(cls: Any, hints: dict[str, Any], nested: dict[str, Callable[[Any], Any]],
                take: bool = False) -> list[tuple[str, frozenset[type], bool, Any]]:
    """(name, the JSON types taken as they are, required, whether another converter is needed)."""
    plain = {int: {int}, float: {float, int}, str: {str}, bool: {bool}}
    plan = []
    for f in dataclasses.fields(cls):
        hint = hints[f.name]
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else (hint,)
        inner_hints = [arg for arg in args if arg is not type(None)]
        allowed = {type(None)} if len(inner_hints) < len(args) else set()
        inner = inner_hints[0] if len(inner_hints) == 1 else None
        if inner in plain:
            allowed |= plain[inner]
            plan.append((f.name, frozenset(allowed), required, None))
        else:
            nested[f.name] = _fast_converter(inner, take) if inner is not None else (lambda v: _BAD)
            plan.append((f.name, frozenset(allowed), required, True))
    return plan


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
