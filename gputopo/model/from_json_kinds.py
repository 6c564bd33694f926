"""A long JSON list of objects that repeat most of their fields (a 576-GPU NVLink domain's 165,600
links: a handful of kinds, each link its kind plus its two ends), checked and built once per kind.

``build_kinds`` accepts exactly what ``from_json.build`` accepts for such a list, and makes the same
objects; it also says which kind each item is (the links' ``LinkTable`` is then made without a
second pass over them). The repeated (``shared``) fields are checked once per distinct value: equal
JSON values are the same value, except numbers (``18 == 18.0 == True``), whose types are therefore
checked over the whole column. The other fields are checked column by column as ``from_json`` does.
Anything it cannot settle (a missing or unknown key, a wrong value, an unhashable one) gives None:
the caller then builds item by item, and ``from_json`` names what is wrong.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass
from typing import Any

from gputopo.model.from_json import (
    _field_plan,
    _field_types,
    _instances,
    _list_fields,
    _nested_column,
    _plain_column_ok,
    _text_fields,
    apply_later,
)

_NUMBERS = frozenset({int, float, bool})


@dataclass
class Kinds:
    """``objects[i]`` made from item ``i``, of kind ``kind_of[i]``; ``kinds[k]``: the ``shared``
    fields' values of kind ``k`` (in order of first appearance), ``first[k]`` the position of its
    first item; ``columns``: the values of each plain field that is not shared, per item."""

    objects: list[Any]
    kind_of: list[int]
    kinds: list[tuple[Any, ...]]
    first: list[int]
    columns: dict[str, list[Any]]


def build_kinds(cls: Any, items: Any, shared: tuple[str, ...], take: bool = False) -> Kinds | None:
    """``items`` (JSON objects) as ``cls`` objects grouped by the values of their ``shared`` fields
    (plain fields, at least two), or None where that does not settle it (see the module's text).
    ``take``: the items are the caller's no longer (their dicts become the objects' attributes)."""
    nested: dict[str, Any] = {}
    plan = _field_plan(cls, _field_types(cls), nested, take)
    names = tuple(name for name, *_ in plan)
    by_name = {name: (allowed, inner) for name, allowed, _, inner in plan}
    if type(items) is not list or not items or len(shared) < 2 or not set(shared) <= set(names):
        return None
    if any(by_name[name][1] is not None for name in shared) or set(map(type, items)) != {dict}:
        return None
    if not all(map(operator.eq, map(len, items), itertools.repeat(len(names)))):
        return None  # (as many keys as fields, and every field found below: exactly the fields)
    try:
        keys = list(map(operator.itemgetter(*shared), items))
        first: dict[tuple[Any, ...], int] = {}
        at_first = list(map(first.setdefault, keys, itertools.count()))
    except (KeyError, TypeError):  # a field missing, an unhashable value
        return None
    kinds = list(first)
    text_fields = _text_fields(cls)
    for position, name in enumerate(shared):
        if not _shared_ok(items, name, [kind[position] for kind in kinds], by_name[name][0], name in text_fields):
            return None
    columns: dict[str, list[Any]] = {}
    later: list[tuple[str, list[tuple[int, Any]] | None]] = []
    try:
        for name in names:
            if name not in shared and not _column_ok(cls, items, name, by_name[name], nested, take, columns, later):
                return None
    except KeyError:  # a field missing, its count made up by an unknown key: the careful path names it
        return None
    objects = _instances(cls, items, True, take)
    apply_later(objects, later)
    number = {position: k for k, position in enumerate(first.values())}
    return Kinds(objects, list(map(number.__getitem__, at_first)), kinds, list(first.values()), columns)


def _shared_ok(items: list[dict[str, Any]], name: str, values: list[Any], allowed: frozenset[type],
               one_line: bool) -> bool:
    """Whether a shared field's values (one per kind) are all ``from_json`` takes; where they are
    numbers, whether every item's value is of the type of the kind's (else the whole column is
    checked as a plain column)."""
    kinds = set(map(type, values))
    if not kinds <= allowed:
        return False
    if kinds & _NUMBERS:
        column_types = set(map(type, map(operator.itemgetter(name), items)))
        if not column_types <= allowed:
            return False
        if len(column_types) > 1:  # 18 and 18.0 in one kind: every value checked
            column = list(map(operator.itemgetter(name), items))
            return _plain_column_ok(column, column_types, one_line)
    return _plain_column_ok(values, kinds, one_line)


def _column_ok(cls: Any, items: list[dict[str, Any]], name: str, field: tuple[frozenset[type], Any],
               nested: dict[str, Any], take: bool, columns: dict[str, list[Any]],
               later: list[tuple[str, list[tuple[int, Any]] | None]]) -> bool:
    """A field that is not shared, checked over its column as ``from_json``'s column pass does: a
    plain one kept in ``columns``; a nested one (``Link.measured``, ``Link.health``) converted per
    item where it is not null or an empty list (added to ``later``: an empty list stays the item's
    own where it is taken, else a new one)."""
    allowed, inner = field
    column = list(map(operator.itemgetter(name), items))
    kinds = set(map(type, column))
    if kinds <= allowed:
        columns[name] = column
        return _plain_column_ok(column, kinds, name in _text_fields(cls))
    if inner is None:
        return False
    is_list = name in _list_fields(cls)
    if kinds == {list} and is_list and not any(column):  # every one []
        if not take:
            later.append((name, None))
        return True
    values = _nested_column(items, name, allowed, nested[name], is_list)
    if values is None:
        return False
    later.append((name, values))
    return True
