"""A topology's links as a table: their ends as two columns of integers, and each link's kind.

Links of one kind have the same values in every field but their ends, measurement and health
(``KIND_FIELDS``: the link word, NVLink count, NVSwitch, PCIe path, P2P words). A 576-GPU NVLink
domain has 165,600 links and a handful of kinds, so what depends on those fields alone (an estimate,
a verdict, a row of JSON) is decided once per kind and spread over the links in whole columns,
without a Python object or call per link. Built once per topology (``Topology.cached``), like the
other facts about the whole topology: read it, never change it.
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
    _counted: dict[Any, int | None] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, links: list[Link]) -> LinkTable:
        first: dict[tuple[Any, ...], int] = {}  # kind -> the position of its first link (each hashed once)
        at_first = list(map(first.setdefault, map(_KIND_FACTS, links), itertools.count()))
        number = {position: k for k, position in enumerate(first.values())}
        return cls(list(map(END_A, links)), list(map(END_B, links)), list(map(number.__getitem__, at_first)),
                   list(first), [links[position] for position in first.values()])

    def kinds_where(self, wanted: Iterable[int]) -> list[bool]:
        """Per link, whether its kind is one of ``wanted``."""
        chosen = frozenset(wanted)
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
            self._counted["counts"] = per_kind  # type: ignore[assignment]
        return self._counted["counts"]  # type: ignore[return-value]

    def gpus_of(self, where: list[bool] | None = None) -> set[int]:
        """The GPUs at either end of the links (those ``where`` says, else all)."""
        if where is None:
            return set(self.ends_a) | set(self.ends_b)
        return set(itertools.compress(self.ends_a, where)) | set(itertools.compress(self.ends_b, where))

    def kind_fact(self, field: str) -> list[Any]:
        """Per kind, the value of ``field`` (one of ``KIND_FIELDS``)."""
        position = KIND_FIELDS.index(field)
        return [kind[position] for kind in self.kinds]

    def pairs_linked(self, where: list[bool] | None = None) -> int | None:
        """How many distinct pairs of two GPUs the links (those ``where`` says, else all) join, in
        either order, counted in whole columns (each pair as one number, ``low * width + high``);
        None where the ends are not numbers to count with (the caller looks pair by pair)."""
        ends_a, ends_b = self.ends_a, self.ends_b
        if where is not None:
            ends_a, ends_b = list(itertools.compress(ends_a, where)), list(itertools.compress(ends_b, where))
        if not ends_a:
            return 0
        if set(map(type, ends_a)) | set(map(type, ends_b)) != {int} or min(min(ends_a), min(ends_b)) < 0:
            return None
        width = max(max(ends_a), max(ends_b)) + 1
        if not all(map(operator.lt, ends_a, ends_b)):  # (a snapshot's links are a < b: no min and max per link)
            ends_a, ends_b = list(map(min, ends_a, ends_b)), list(map(max, ends_a, ends_b))
        numbers = set(map(operator.add, map(operator.mul, ends_a, itertools.repeat(width)), ends_b))
        return len(numbers - {g * width + g for g in set(ends_a) & set(ends_b)})  # (a link to itself is no pair)

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
