"""A topology's links as JSON rows, fast: what ``strict_json_text(topology.to_dict())`` writes for
each link of a large document (one compact line per link), made once per class of equal links.

A 576-GPU NVLink domain has 165,600 links and a handful of kinds: every link with no measurement and
no health finding is ``{"a": A, "b": B, `` followed by the text of its other fields, which links of
one kind share. Those are encoded once per kind; a link with a measurement or a health finding is
encoded on its own (``plain_data``, a non-finite figure written as null as ``strict_json_text``
does). Writing a domain this way takes a fraction of building its 165,600 dicts and encoding them.
"""

from __future__ import annotations

import dataclasses
import json
import operator
from collections.abc import Callable, Iterator
from typing import Any

from gputopo.model.json_text import EncodedRows, LazyRows, finite_or_null
from gputopo.model.link_table import KIND_FIELDS, LinkTable
from gputopo.model.parts import Link

_ENCODER = json.JSONEncoder(allow_nan=False)
_FIELDS = tuple(f.name for f in dataclasses.fields(Link))
# The fields written after the ends, for a link without measurement or health: plain values.
_SHARED = tuple(name for name in _FIELDS if name not in ("a", "b", "measured", "health"))
_SHARED_FACTS = operator.attrgetter(*_SHARED)


def link_rows(links: list[Link], plain: Callable[[Any], Any], table: LinkTable | None = None) -> EncodedRows | LazyRows | None:
    """Each link as its compact JSON text (``_ENCODER.encode(plain(link))``, non-finite figures as
    null), in order; None where the fields are not the ones this module knows how to write (a
    subclass, an end that is no plain integer, a value that is not a plain scalar). ``table``: the
    links' ``LinkTable`` where the topology has it (its kinds are the fields written once per kind)."""
    if _FIELDS[:2] != ("a", "b") or _FIELDS[-2:] != ("measured", "health") or {type(link) for link in links} - {Link}:
        return None
    if table is not None and (_SHARED != KIND_FIELDS or len(table.kind_of) != len(links)):
        table = None
    ends_a, ends_b = (table.ends_a, table.ends_b) if table is not None else \
        (list(map(operator.attrgetter("a"), links)), list(map(operator.attrgetter("b"), links)))
    if set(map(type, ends_a)) | set(map(type, ends_b)) != {int}:
        return None
    healths = list(map(operator.attrgetter("health"), links))
    if not any(map(operator.attrgetter("measured"), links)) and set(map(type, healths)) == {list} and not any(healths):
        if table is not None:  # every link: one of a few kinds, each written once
            tails = [_tail(example, plain) for example in table.examples]
            if None in tails:
                return None
            return RowsByKind(ends_a, ends_b, table.kind_of, tails)  # type: ignore[arg-type]
        return _shared_rows(links, ends_a, ends_b, plain)
    tails: dict[tuple[Any, ...], str | None] = {}
    rows = EncodedRows()
    try:
        for link, a, b in zip(links, ends_a, ends_b):
            if link.measured is None and not link.health and type(link.health) is list:
                facts = _SHARED_FACTS(link)
                tail = tails[facts] if facts in tails else tails.setdefault(facts, _tail(link, plain))
                if tail is None:
                    return None
                rows.append(f'{{"a": {a}, "b": {b}, {tail}')
            else:
                rows.append(_ENCODER.encode(finite_or_null(plain(link))))
    except TypeError:  # an unhashable value where a word belongs
        return None
    return rows


class RowsByKind(LazyRows):
    """The rows of links that all have no measurement and no health finding, each ``{"a": A, "b": B, ``
    and its kind's tail, made ``BLOCK_ROWS`` at a time as the text is written."""

    def __init__(self, ends_a: list[int], ends_b: list[int], kind_of: list[int], tails: list[str]):
        self.ends_a, self.ends_b, self.kind_of, self.tails = ends_a, ends_b, kind_of, tails

    def __len__(self) -> int:
        return len(self.ends_a)

    def joined(self, separator: str) -> Iterator[str]:
        tail_of = self.tails.__getitem__
        for start in range(0, len(self.ends_a), BLOCK_ROWS):
            end = start + BLOCK_ROWS
            if start:
                yield separator
            yield separator.join([f'{{"a": {a}, "b": {b}, {tail}' for a, b, tail in
                                  zip(self.ends_a[start:end], self.ends_b[start:end], map(tail_of, self.kind_of[start:end]))])


# Rows made at once when writing a domain's links: a block's text is about a megabyte.
BLOCK_ROWS = 4096


def _shared_rows(links: list[Link], ends_a: list[int], ends_b: list[int], plain: Callable[[Any], Any]) -> EncodedRows | None:
    """The rows of links that all have no measurement and no health finding, in whole columns."""
    try:
        facts = list(map(_SHARED_FACTS, links))
        first = dict(zip(facts, links))  # one link of each kind (the last; any will do)
    except TypeError:
        return None
    tails = {key: _tail(link, plain) for key, link in first.items()}
    if None in tails.values():
        return None
    return EncodedRows([f'{{"a": {a}, "b": {b}, {tail}' for a, b, tail in zip(ends_a, ends_b, map(tails.__getitem__, facts))])


def _tail(link: Link, plain: Callable[[Any], Any]) -> str | None:
    """The text of ``link``'s row after ``{"a": A, "b": B, ``; None where the row does not start so."""
    text = _ENCODER.encode(finite_or_null(plain(link)))
    head = f'{{"a": {link.a}, "b": {link.b}, '
    return text[len(head):] if text.startswith(head) else None
