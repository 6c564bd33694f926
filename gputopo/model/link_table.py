"""A topology's links as a table: their ends as two columns of integers, and each link's kind.

Links of one kind have the same values in every field but their ends, measurement and health
(``KIND_FIELDS``: the link word, NVLink count, NVSwitch, PCIe path, P2P words). A 576-GPU NVLink
domain has 165,600 links and a handful of kinds, so what depends on those fields alone (an estimate,
a verdict, a row of JSON) is decided once per kind and spread over the links in whole columns,
without a Python object or call per link. Built once per topology (``Topology.cached``), like the
other facts about the whole topology: read it, never change it. What it works out of its columns
(the GPUs, each link's pair as a number, where a pair's link is) it keeps: they cannot go stale.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from gputopo.model.parts import Link

KIND_FIELDS = ("type", "nvlink_count", "nvswitch", "pcie_path", "p2p_read", "p2p_write", "p2p_atomics", "p2p_nvlink")
_KIND_FACTS = operator.attrgetter(*KIND_FIELDS)
END_A, END_B = operator.attrgetter("a"), operator.attrgetter("b")


@dataclass(frozen=True)
class LinkTable:
    """``ends_a[i]``, ``ends_b[i]``, ``kind_of[i]``: link ``i``'s GPUs and kind (``0..len(kinds)-1``,
    in order of first appearance); ``kinds[k]``: the values of ``KIND_FIELDS`` of kind ``k``, and
    ``examples[k]`` its first link."""

    ends_a: list[int]
    ends_b: list[int]
    kind_of: list[int]
    kinds: list[tuple[Any, ...]]
    examples: list[Link]
    _counted: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, links: list[Link]) -> LinkTable:
        first: dict[tuple[Any, ...], int] = {}  # kind -> the position of its first link (each hashed once)
        at_first = list(map(first.setdefault, map(_KIND_FACTS, links), itertools.count()))
        number = {position: k for k, position in enumerate(first.values())}
        return cls(list(map(END_A, links)), list(map(END_B, links)), list(map(number.__getitem__, at_first)),
                   list(first), [links[position] for position in first.values()])

    def kinds_where(self, wanted: Iterable[int]) -> list[bool]:
        """Per link, whether its kind is one of ``wanted`` (every kind or none: one value, no look per link)."""
        chosen = frozenset(wanted).intersection(range(len(self.kinds)))
        if len(chosen) in (0, len(self.kinds)):
            return [bool(chosen)] * len(self.kind_of)
        return list(map(chosen.__contains__, self.kind_of))

    def links_where(self, links: list[Link], wanted: Iterable[int]) -> list[Link]:
        """The links (of the topology this table is of, in order) whose kind is one of ``wanted``."""
        return list(itertools.compress(links, self.kinds_where(wanted)))

    def kind_counts(self) -> list[int]:
        """Per kind, how many links are of it (counted once, in C)."""
        if "counts" not in self._counted:
            per_kind = [0] * len(self.kinds)
            if len(self.kinds) <= 8:  # a few kinds: a count over the column each
                per_kind = list(map(self.kind_of.count, range(len(self.kinds))))
            else:
                for kind, count in Counter(self.kind_of).items():
                    per_kind[kind] = count
            self._counted["counts"] = per_kind
        return self._counted["counts"]

    def gpus_of(self, where: list[bool] | None = None) -> frozenset[int]:
        """The GPUs at either end of the links (those ``where`` says, else all: kept once made)."""
        if where is not None:
            return frozenset(itertools.compress(self.ends_a, where)).union(itertools.compress(self.ends_b, where))
        if "gpus" not in self._counted:
            self._counted["gpus"] = frozenset(self.ends_a).union(self.ends_b)
        return self._counted["gpus"]

    def gpus_of_kinds(self, wanted: Iterable[int]) -> frozenset[int]:
        """The GPUs at either end of the links whose kind is one of ``wanted`` (every kind: ``gpus_of()``)."""
        chosen = frozenset(wanted).intersection(range(len(self.kinds)))
        return self.gpus_of() if len(chosen) == len(self.kinds) else self.gpus_of(self.kinds_where(chosen))

    def kind_fact(self, field: str) -> list[Any]:
        """Per kind, the value of ``field`` (one of ``KIND_FIELDS``)."""
        position = KIND_FIELDS.index(field)
        return [kind[position] for kind in self.kinds]

    def pairs_linked(self, where: list[bool] | None = None) -> int | None:
        """How many distinct pairs of two GPUs the links (those ``where`` says, else all) join, in
        either order, counted in whole columns (``pair_numbers``); None where the ends are not
        numbers to count with (the caller looks pair by pair)."""
        numbered = self.pair_numbers()
        if numbered is None:
            return None
        width, numbers = numbered
        distinct = self._positions(numbers) if where is None else set(itertools.compress(numbers, where))
        return len(distinct) - sum(map(distinct.__contains__, range(0, width * width, width + 1)))  # (a link to itself is no pair)

    def pair_numbers(self) -> tuple[int, list[int]] | None:
        """``(width, numbers)``: each link's pair as one number, ``low * width + high`` (its lower GPU
        number, its higher), made once in whole columns; None where the ends are not numbers
        (non-negative integers) to count with."""
        if "numbers" not in self._counted:
            try:
                self._counted["numbers"] = _pair_numbers(self.ends_a, self.ends_b, self.gpus_of())
            except TypeError:  # an end that cannot be hashed
                self._counted["numbers"] = None
        return self._counted["numbers"]

    def position(self, a: int, b: int) -> int | None:
        """Where in the table the first link joining GPUs ``a`` and ``b`` (in either order) is; None
        where none does, or ``a`` is ``b``. A dict of the pairs' numbers, made once (in C) when first
        asked: a 576-GPU domain's 165,600 links, without a tuple or a call per link."""
        if a == b:
            return None
        numbered = self.pair_numbers()
        if numbered is None:  # ends that are no numbers (no source makes them): looked for link by link
            return next((k for k, ends in enumerate(zip(self.ends_a, self.ends_b)) if ends in ((a, b), (b, a))), None)
        width, numbers = numbered
        low, high = (a, b) if a < b else (b, a)
        if low < 0 or high >= width:
            return None
        return self._positions(numbers).get(low * width + high)

    def _positions(self, numbers: list[int]) -> dict[int, int]:
        """``{pair number: the place of its first link}`` of ``numbers`` (``pair_numbers``), made once."""
        if "positions" not in self._counted:  # (each number written last to first: the first link of a pair kept)
            self._counted["positions"] = dict(zip(reversed(numbers), range(len(numbers) - 1, -1, -1)))
        return self._counted["positions"]

    def one_per_pair(self) -> bool:
        """Whether no two links join the same pair of GPUs, and none joins a GPU to itself."""
        if None not in self._counted:
            self._counted[None] = self.pairs_linked()
        return self._counted[None] == len(self.ends_a)

    def covers_every_pair(self, gpus: list[int]) -> bool:
        """Whether every pair of distinct GPUs of ``gpus`` has a link (in either order)."""
        members = frozenset(gpus)
        if members not in self._counted:
            inside = list(map(operator.and_, map(members.__contains__, self.ends_a), map(members.__contains__, self.ends_b)))
            self._counted[members] = self.pairs_linked(inside)
        return self._counted[members] == len(members) * (len(members) - 1) // 2


def _pair_numbers(ends_a: list[Any], ends_b: list[Any], gpus: frozenset[Any]) -> tuple[int, list[int]] | None:
    """``LinkTable.pair_numbers`` of the columns ``ends_a``, ``ends_b`` (``gpus``: their GPUs, each
    checked once, not once per end)."""
    if any(type(g) is not int for g in gpus) or min(gpus, default=0) < 0:
        return None
    width = max(gpus, default=0) + 1
    if not all(map(operator.lt, ends_a, ends_b)):  # (a snapshot's links are a < b: no min and max per link)
        ends_a, ends_b = list(map(min, ends_a, ends_b)), list(map(max, ends_a, ends_b))
    return width, list(map(operator.add, map(operator.mul, ends_a, itertools.repeat(width)), ends_b))
