"""The figure of every pair of candidate GPUs, in hundredths of a GB/s: the matrix the search sees.

A pair's figure is its measurement where it has one, else the estimate of its link, which depends
only on the link's kind (``Topology.link_table``: its word, NVLink count, NVSwitch, PCIe path and
P2P words) and on what the estimate reads of its two GPUs (``estimate_key_of_gpu``, and how many
NVLinks each must have). A 576-GPU domain has 165,600 pairs and a handful of such classes: figures
are made once per class and spread over the links in whole columns; only measured pairs and pairs
doctor found unhealthy are figured one by one. Where TensorFlow's peer view filled in P2P facts
(links copied with other words than the topology's), every pair is figured on its own.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gputopo.analysis.bandwidth import estimate_link, implied_nvlinks
from gputopo.analysis.estimates import pair_classes
from gputopo.analysis.measured import best_estimate
from gputopo.errors import InputError
from gputopo.model import Gpu, Link, Topology
from gputopo.model.link_table import LinkTable

# Bandwidths are compared as integers in hundredths of a GB/s, so sums and ties are exact.
CENTI = 100
# A pair whose path `gputopo doctor` found unhealthy (``Link.health``: ACS redirect, a link trained
# down, NVLinks down) counts a quarter of its estimate: its copies go through the root complex, or at
# a fraction of the lanes. A problem of every pair alike (the IOMMU translating, P2P turned off by a
# variable) ranks no pair below another and is left out (its fix is in the answer's caveat); a
# measured figure already shows what the fault costs and is not divided again.
UNHEALTHY_DIVISOR = 4
EVERY_PAIR_ALIKE = frozenset({"iommu", "p2p-disabled"})


@dataclass
class PairWeights:
    """``weight[p][q]``: the figure of the pair at positions ``p``, ``q`` (0 on the diagonal);
    ``basis[(a, b)]``: how a pair's figure was had ("measured", "estimated", "assumed": the low end
    of a range), by GPU numbers in either order; ``measured_pairs``: how many pairs are measured."""

    weight: list[list[int]]
    basis: Any  # a Mapping from (a, b) to its basis
    measured_pairs: int


def figure(link: Link, gpu_a: Gpu | None, gpu_b: Gpu | None, fewest: int, topology: Topology | None = None) -> tuple[int, str]:
    """A pair's figure and its basis: measured GB/s win (judged first: a figure of a broken P2P path
    is set aside for the healthy state, ``measured.best_estimate``), else the estimate; an unhealthy
    path below healthy ones; a pair a TF log alone says cannot peer just below an unnamed one."""
    est = (best_estimate(link, gpu_a, gpu_b, fewest, topology) if link.measured is not None
           else estimate_link(link, gpu_a, gpu_b, fewest))
    weight = round(est.gbps * CENTI)
    if est.basis != "measured" and set(link.health) - EVERY_PAIR_ALIKE:  # doctor found this pair's path
        weight = max(1, weight // UNHEALTHY_DIVISOR)  # unhealthy (ACS, a link down, ...): below healthy pairs
    if link.type == "UNKNOWN" and link.can_peer is False:  # a TF log alone: where the estimates
        weight -= 1  # tie, a pair it says cannot peer ranks below an unnamed one
    # "assumed": the figure is the low end of a range (a fact it depends on is not in the source)
    return weight, "assumed" if est.basis != "measured" and est.assumption else est.basis


def _fewest(topology: Topology, link: Link) -> int:
    """The larger of the two GPUs' implied NVLink counts, for an NVLinked pair (``fewest_nvlinks``)."""
    if not link.is_nvlink:
        return 0
    return max(implied_nvlinks(topology, link.a) or 0, implied_nvlinks(topology, link.b) or 0)


class PairBasis:
    """``basis[(a, b)]`` of the pairs of ``links`` (a mapping from either order), figured when asked
    (the search asks it of the hops of the groups it names, not of every pair)."""

    def __init__(self, topology: Topology, links: Any, gpus: dict[int, Gpu]):
        self.topology, self.links, self.gpus = topology, links, gpus

    def __getitem__(self, pair: tuple[int, int]) -> str:
        link = self.links[pair]
        return figure(link, self.gpus.get(link.a), self.gpus.get(link.b), _fewest(self.topology, link), self.topology)[1]


def pair_weights(topology: Topology, index: Sequence[int], links: dict[tuple[int, int], Link], gpus: dict[int, Gpu],
                 filled: int) -> PairWeights:
    """The figures of every pair of ``index`` (GPU numbers, in position order); ``links``: the link
    map the figures are read from (TF's peer view filled in ``filled`` of them); ``InputError`` where a
    pair has no link."""
    if filled or not pair_classes(topology).complete:  # (complete: every link's GPUs are the topology's, in ``gpus``)
        return _pair_by_pair(topology, index, links, gpus)
    return _by_class(topology, index, links, gpus)


def _pair_by_pair(topology: Topology, index: Sequence[int], links: dict[tuple[int, int], Link],
                  gpus: dict[int, Gpu]) -> PairWeights:
    n = len(index)
    weight = [[0] * n for _ in range(n)]
    basis: dict[tuple[int, int], str] = {}
    for i in range(n):
        for j in range(i + 1, n):
            a, b = index[i], index[j]
            link = links.get((a, b))
            if link is None:
                raise InputError(f"the topology has no link between GPU {a} and GPU {b}; cannot rank groups")
            value, how = figure(link, gpus.get(link.a), gpus.get(link.b), _fewest(topology, link), topology)
            weight[i][j] = weight[j][i] = value
            basis[(a, b)] = basis[(b, a)] = how
    return PairWeights(weight, basis, sum(1 for value in basis.values() if value == "measured") // 2)


_MEASURED, _HEALTH = operator.attrgetter("measured"), operator.attrgetter("health")


def _matrix(n: int, position: dict[int, int], table: LinkTable, values: list[int]) -> list[list[Any]]:
    """The ``n`` x ``n`` matrix of ``values`` at the positions of each link's ends (None where no
    link): set in whole columns, through one flat list, where every end has a position and no pair
    has two links; else link by link (the later of two links wins), the links of GPUs left out skipped.
    Where every pair of the ``n`` has its link (a domain, ranked whole), every cell starts at the
    first link's figure and only the links of other figures are placed."""
    ends_a, ends_b = table.ends_a, table.ends_b
    if not (table.one_per_pair() and position.keys() >= table.gpus_of()):
        weight: list[list[Any]] = [[None] * n for _ in range(n)]
        for i, j, value in zip(map(position.get, ends_a), map(position.get, ends_b), values):
            if i is not None and j is not None:
                weight[i][j] = weight[j][i] = value
        return weight
    every_pair = bool(values) and len(values) == n * (n - 1) // 2
    flat: list[Any] = [values[0] if every_pair else None] * (n * n)
    if every_pair:  # only the links whose figure is not the first
        others = list(map(values[0].__ne__, values))
        ends_a, ends_b = list(itertools.compress(ends_a, others)), list(itertools.compress(ends_b, others))
        values = list(itertools.compress(values, others))
    rows_a = list(map(operator.mul, map(position.__getitem__, ends_a), itertools.repeat(n)))
    rows_b = list(map(operator.mul, map(position.__getitem__, ends_b), itertools.repeat(n)))
    collections.deque(map(flat.__setitem__, map(operator.add, rows_a, map(position.__getitem__, ends_b)), values), maxlen=0)
    collections.deque(map(flat.__setitem__, map(operator.add, rows_b, map(position.__getitem__, ends_a)), values), maxlen=0)
    return [flat[start:start + n] for start in range(0, n * n, n)]


def _by_class(topology: Topology, index: Sequence[int], links: Any, gpus: dict[int, Gpu]) -> PairWeights:
    """Long because it is one pass in columns: each link's class of pair (``analysis.estimates``), a
    figure per class, the measured and unhealthy links on their own, then the matrix."""
    classes = pair_classes(topology)
    table = topology.link_table()
    codes = classes.code_of
    figures = {}
    for code in set(codes):
        example = table.examples[code % len(table.kinds)]  # (only its kind's fields are read)
        figures[code] = round(classes.estimate_of_code(code).gbps * CENTI)
        if example.type == "UNKNOWN" and example.can_peer is False:  # as ``figure`` does
            figures[code] -= 1
    values = list(map(figures.__getitem__, codes))
    every = topology.links
    positions = range(len(every))
    special = sorted(set(itertools.compress(positions, map(_MEASURED, every)))
                     | set(itertools.compress(positions, map(_HEALTH, every))))
    measured = 0
    position = {g: p for p, g in enumerate(index)}
    for k in special:  # measured, or doctor found the path unhealthy
        link = every[k]
        values[k], basis = figure(link, gpus[link.a], gpus[link.b], _fewest(topology, link), topology)
        measured += basis == "measured" and link.a in position and link.b in position
    weight = _matrix(len(index), position, table, values)
    for i, row in enumerate(weight):
        row[i] = 0
        if None in row:  # the first pair without a link, in the order the pairs are ranked
            j = row.index(None)
            raise InputError(f"the topology has no link between GPU {index[min(i, j)]} and GPU {index[max(i, j)]}; "
                             "cannot rank groups")
    return PairWeights(weight, PairBasis(topology, links, gpus), measured)
