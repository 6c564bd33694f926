"""Every link's estimate (``bandwidth.estimate_link``), made once per class of pair.

A link's estimate reads only its kind (``Topology.link_table``: word, NVLink count, NVSwitch, PCIe
path, P2P words) and, of its two GPUs, what ``estimate_key_of_gpu`` names and how many NVLinks each
must have (``implied_nvlinks``). Links of one kind between GPUs of the same two kinds are one class
of pair: a 576-GPU domain has 165,600 links and a handful of classes. ``PairClasses`` numbers them
in whole columns (``code_of``), once per topology; ``estimate_of`` gives one link's estimate and
``estimate_column`` every link's, in link order. Measurements are never read here.
"""

from __future__ import annotations

import itertools
import operator
from dataclasses import dataclass, field
from typing import Any

from gputopo.analysis.expect.bandwidth import (
    Estimate,
    estimate_key_of_gpu,
    estimate_link,
    implied_nvlinks,
)
from gputopo.model import Gpu, Link, Topology
from gputopo.model.link_table import KIND_FIELDS

_KIND_FACTS = operator.attrgetter(*KIND_FIELDS)


@dataclass
class PairClasses:
    """``code_of[i]``: the class of pair of link ``i`` (``kind + kinds * (gpu_kind_a * gpu_kinds +
    gpu_kind_b)``; read it, never change it: where the GPUs are of one kind, it is the link table's
    ``kind_of``); ``gpu_kind``: each GPU's kind, ``one_of[k]`` a GPU of kind ``k``. ``complete``:
    every link's two GPUs are in the topology's list (else ``code_of`` is empty: see ``estimate_of``)."""

    topology: Topology
    gpu_kind: dict[int, int]
    one_of: list[Gpu]
    code_of: list[int]
    complete: bool
    _estimates: dict[Any, Estimate] = field(default_factory=dict)

    def estimate_of_code(self, code: int) -> Estimate:
        """The estimate of every link of class ``code``."""
        found = self._estimates.get(code)
        if found is None:
            table = self.topology.link_table()
            pair, kind = divmod(code, len(table.kinds))
            gpu_a, gpu_b = self.one_of[pair // len(self.one_of)], self.one_of[pair % len(self.one_of)]
            found = self._estimates[code] = _estimate(self.topology, table.examples[kind], gpu_a, gpu_b)
        return found


def pair_classes(topology: Topology) -> PairClasses:
    """The topology's ``PairClasses``, made once (``Topology.cached``)."""
    return topology.cached("pair_classes", _pair_classes)


def _pair_classes(topology: Topology) -> PairClasses:
    gpus = {g.index: g for g in topology.gpus}
    kinds: dict[Any, int] = {}
    gpu_kind = {g: kinds.setdefault((estimate_key_of_gpu(gpu), implied_nvlinks(topology, g) or 0), len(kinds))
                for g, gpu in gpus.items()}
    first: dict[int, int] = {}
    for g, kind in gpu_kind.items():
        first.setdefault(kind, g)
    one_of = [gpus[first[kind]] for kind in range(len(kinds))]
    table = topology.link_table()
    complete = gpus.keys() >= table.gpus_of()
    codes: list[int] = []
    if complete and len(one_of) == 1:  # GPUs of one kind: a pair's class is its link's kind
        codes = table.kind_of
    elif complete:  # code = kind + kinds * (gpu_kind_a * gpu_kinds + gpu_kind_b), in two sums per link
        count, link_kinds = len(one_of), len(table.kinds)
        first = {g: kind * count * link_kinds for g, kind in gpu_kind.items()}
        second = {g: kind * link_kinds for g, kind in gpu_kind.items()}
        codes = list(map(operator.add, table.kind_of, map(operator.add, map(first.__getitem__, table.ends_a),
                                                              map(second.__getitem__, table.ends_b))))
    return PairClasses(topology, gpu_kind, one_of, codes, complete)


def _estimate(topology: Topology, link: Link, gpu_a: Gpu | None, gpu_b: Gpu | None) -> Estimate:
    """``estimate_link`` of ``link``'s kind between ``gpu_a`` and ``gpu_b`` (its measurement unread)."""
    fewest = 0
    if link.is_nvlink:
        fewest = max((implied_nvlinks(topology, g.index) or 0) if g is not None else 0 for g in (gpu_a, gpu_b))
    return estimate_link(link, gpu_a, gpu_b, fewest)


def estimate_of(topology: Topology, link: Link) -> Estimate:
    """``link``'s estimate, the same as ``bandwidth.pair_estimate`` gives, once per class of pair."""
    classes = pair_classes(topology)
    kind_a, kind_b = classes.gpu_kind.get(link.a), classes.gpu_kind.get(link.b)
    fewest = max(implied_nvlinks(topology, link.a) or 0, implied_nvlinks(topology, link.b) or 0) if link.nvlink_count > 0 else 0
    key = (_KIND_FACTS(link), kind_a, kind_b, fewest)
    found = classes._estimates.get(key)
    if found is None:
        gpu_a = None if kind_a is None else classes.one_of[kind_a]
        gpu_b = None if kind_b is None else classes.one_of[kind_b]
        found = classes._estimates[key] = estimate_link(link, gpu_a, gpu_b, fewest)
    return found


def distinct_estimates(topology: Topology, where: list[bool]) -> list[Estimate]:
    """The estimates of the links ``where`` says (one flag per link), each class of pair once."""
    classes = pair_classes(topology)
    if classes.complete:
        return [classes.estimate_of_code(code) for code in sorted(set(itertools.compress(classes.code_of, where)))]
    return list({id(estimate): estimate for estimate in itertools.compress(estimate_column(topology), where)}.values())


def estimate_column(topology: Topology) -> list[Estimate]:
    """Every link's estimate, in ``topology.links`` order (once per topology)."""
    return topology.cached("estimate_column", _estimate_column)


def _estimate_column(topology: Topology) -> list[Estimate]:
    classes = pair_classes(topology)
    if not classes.complete:
        return [estimate_of(topology, link) for link in topology.links]
    by_code = {code: classes.estimate_of_code(code) for code in set(classes.code_of)}
    return list(map(by_code.__getitem__, classes.code_of))


@dataclass(frozen=True)
class Span:
    """The span of every figure the pairs of one link word allow, GB/s per direction (a range by
    generation where the source gives none), and what the figures assume."""

    low_gbps: float
    high_gbps: float
    assumptions: tuple[str, ...] = ()


def word_spans(topology: Topology) -> dict[str, Span]:
    """``{link word: Span}`` over the pairs of each word the topology uses but ``UNKNOWN``, each
    class of pair once (``distinct_estimates``)."""
    table = topology.link_table()
    spans = {}
    for word in dict.fromkeys(kind[0] for kind in table.kinds):
        if word == "UNKNOWN":
            continue
        estimates = distinct_estimates(topology, table.kinds_where(k for k, kind in enumerate(table.kinds) if kind[0] == word))
        if estimates:
            spans[word] = Span(min(e.span[0] for e in estimates), max(e.span[1] for e in estimates),
                               tuple(sorted({e.assumption for e in estimates if e.assumption})))
    return spans
