"""The figure of every pair of candidate GPUs, in hundredths of a GB/s: the matrix the search sees.

A pair's figure is its measurement where it has one, else the estimate of its link, which depends
only on the link's kind (``Topology.link_table``: its word, NVLink count, NVSwitch, PCIe path and
P2P words) and on what the estimate reads of its two GPUs (``estimate_key_of_gpu``, and how many
NVLinks each must have). A 576-GPU domain has 165,600 pairs and a handful of such classes: figures
are made once per class and spread over the links in whole columns; only measured pairs and pairs
doctor found unhealthy are figured one by one. Where TensorFlow's peer view filled in P2P facts
(links copied with other words than the topology's), every pair is figured on its own.

A measured figure is known only to within its noise (``measured.noise_by_method``): the search ranks
each by the figure of its *noise class* (``ranking_figures``), so that measured figures closer than
the noise compare equal and locality decides between them; the raw figures are kept beside
(``PairWeights.measured``) for what is shown. Estimates are exact and rank as they are.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import operator
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Iterable

from gputopo.analysis.expect.bandwidth import host_staged_estimate, implied_nvlinks
from gputopo.analysis.expect.estimates import pair_classes
from gputopo.analysis.expect.measured import best_estimate, method_of, noise_by_method
from gputopo.analysis.expect.nccl_transport import nccl_estimate, nccl_level, uses_p2p
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
# Pairs NCCL connects through host memory (SHM, beyond its P2P level) get the staged figure whatever
# their path, so a PHB and a NODE pair would tie; the PHB pair, whose P2P path is the nearer (TF's own
# copies between devices, NCCL_P2P_LEVEL set higher), ranks first: NODE a hundredth of a GB/s less.
# (SYS's staged figure is lower already: the copies cross the SMP interconnect.)
SHM_PATH_STEP = {"NODE": 1}
EVERY_PAIR_ALIKE = frozenset({"iommu", "p2p-disabled"})


@dataclass
class PairWeights:
    """``weight[p][q]``: the figure of the pair at positions ``p``, ``q`` (0 on the diagonal);
    ``basis[(a, b)]``: how a pair's figure was had ("measured", "estimated", "assumed": the low end
    of a range), by GPU numbers in either order; ``measured_pairs``: how many pairs are measured;
    ``measured[(a, b)]``: a measured pair's own figure and the noise assumed of it (a share), where
    ``weight`` holds the figure of its noise class; ``noise``: the noise assumed per tool."""

    weight: list[list[int]]
    basis: Any  # a Mapping from (a, b) to its basis
    measured_pairs: int
    measured: dict[tuple[int, int], tuple[int, float]] = dataclasses.field(default_factory=dict)
    noise: dict[str, float] = dataclasses.field(default_factory=dict)
    # The GPUs of the pairs that may work otherwise today than in the healthy state (``today``).
    today_gpus: frozenset[int] = frozenset()


# doctor's pair problems that break P2P on a path until a fix (the copies go through the root complex).
P2P_PATH_FAULTS = frozenset({"acs", "iommu"})


def today_gpus_of(links: Iterable[Link]) -> frozenset[int]:
    """The GPUs of ``links`` (those measured or doctor found a fault on) whose pair may work otherwise
    today than in the healthy state: a PCIe pair under an ACS/IOMMU finding, or measured with P2P and
    staged copies both (``today.pair_today`` judges them)."""
    from gputopo.analysis.expect.measured import staged_gbps

    return frozenset(itertools.chain.from_iterable(
        (link.a, link.b) for link in links
        if not link.is_nvlink and (set(link.health) & P2P_PATH_FAULTS or staged_gbps(link.measured) is not None)))


def ranking_figures(measured: dict[int, float], estimates: set[int]) -> dict[int, int]:
    """``{measured figure: the figure it ranks by}``, given each measured figure's noise (a share)
    and the estimated figures (exact) beside them.

    The figures, fastest first, are cut into classes: a class starts at its fastest figure (its
    anchor) and takes every next figure closer to the anchor than the noise of either, so any two
    figures of a class differ by less than the noise; at most one estimate joins a class (estimates
    are exact: two different ones never tie). A class ranks by its estimate, else by its anchor; the
    classes keep their order, so a faster figure never ranks below a slower one."""
    ranked: dict[int, int] = {}
    members: list[int] = []
    anchor, anchor_noise, estimate = 0, 0.0, None

    def close() -> None:
        for value in members:
            if value in measured:
                ranked[value] = estimate if estimate is not None else anchor

    for value in sorted(set(measured) | estimates, reverse=True):
        noise = measured.get(value, 0.0)
        is_estimate = value in estimates
        if members and anchor - value < max(anchor_noise, noise) * anchor and not (is_estimate and estimate is not None):
            members.append(value)
        else:
            close()
            members, anchor, anchor_noise, estimate = [value], value, noise, None
        if is_estimate:
            estimate = value
    close()
    return ranked


def _rank_measured(weight: list[list[int]], position: dict[int, int], measured: list[tuple[int, int, int, float]],
                   estimates: set[int]) -> dict[tuple[int, int], tuple[int, float]]:
    """Put each measured pair's class figure into ``weight``; return the pairs' own figures and noise
    (by GPU numbers, both orders). ``measured``: ``(a, b, figure, noise)`` of the candidate pairs."""
    noise_of: dict[int, float] = {}
    for _, _, value, noise in measured:
        noise_of[value] = max(noise, noise_of.get(value, 0.0))
    ranked = ranking_figures(noise_of, estimates)
    own: dict[tuple[int, int], tuple[int, float]] = {}
    for a, b, value, noise in measured:
        i, j = position[a], position[b]
        weight[i][j] = weight[j][i] = ranked[value]
        own[(a, b)] = own[(b, a)] = (value, noise)
    return own


def figure(link: Link, gpu_a: Gpu | None, gpu_b: Gpu | None, fewest: int, topology: Topology | None = None) -> tuple[int, str]:
    """A pair's figure and its basis: measured GB/s win (judged first: a figure of a broken P2P path
    is set aside for the healthy state, ``measured.best_estimate``), else the estimate; an unhealthy
    path below healthy ones; a pair a TF log alone says cannot peer just below an unnamed one."""
    level = nccl_level(topology)  # NCCL's transport: pairs beyond its P2P level go through host memory
    est = (best_estimate(link, gpu_a, gpu_b, fewest, topology, level) if link.measured is not None
           else nccl_estimate(link, gpu_a, gpu_b, fewest, level))
    weight = round(est.gbps * CENTI)
    if est.basis != "measured" and link.can_peer is not False and not uses_p2p(link, level):
        weight -= SHM_PATH_STEP.get(link.type, 0)
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
    noise = noise_by_method(topology)
    measured: list[tuple[int, int, int, float]] = []
    estimates: set[int] = set()
    for i in range(n):
        for j in range(i + 1, n):
            a, b = index[i], index[j]
            link = links.get((a, b))
            if link is None:
                raise InputError(f"the topology has no link between GPU {a} and GPU {b}; cannot rank groups")
            value, how = figure(link, gpus.get(link.a), gpus.get(link.b), _fewest(topology, link), topology)
            weight[i][j] = weight[j][i] = value
            basis[(a, b)] = basis[(b, a)] = how
            if how == "measured":
                measured.append((a, b, value, noise[method_of(link.measured)]))
            else:
                estimates.add(value)
    own = _rank_measured(weight, {g: p for p, g in enumerate(index)}, measured, estimates)
    checked = list(links.values()) if isinstance(links, dict) else topology.links
    return PairWeights(weight, basis, len(measured), own, noise, today_gpus_of(checked))


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
    """Long because it is one pass in columns: each link's class of pair (``analysis.expect.estimates``), a
    figure per class, the measured and unhealthy links on their own, then the matrix."""
    classes = pair_classes(topology)
    table = topology.link_table()
    codes = classes.code_of
    figures = {}
    level = nccl_level(topology)
    one_of = classes.one_of
    for code in set(codes):
        example = table.examples[code % len(table.kinds)]  # (only its kind's fields are read)
        estimate = classes.estimate_of_code(code)
        if example.can_peer is not False and not uses_p2p(example, level):  # NCCL: through host memory (SHM)
            pair = code // len(table.kinds)
            estimate = host_staged_estimate(example, one_of[pair // len(one_of)], one_of[pair % len(one_of)])
            figures[code] = round(estimate.gbps * CENTI) - SHM_PATH_STEP.get(example.type, 0)  # as ``figure`` does
            continue
        figures[code] = round(estimate.gbps * CENTI)
        if example.type == "UNKNOWN" and example.can_peer is False:  # as ``figure`` does
            figures[code] -= 1
    values = list(map(figures.__getitem__, codes))
    every = topology.links
    positions = range(len(every))
    special = sorted(set(itertools.compress(positions, map(_MEASURED, every)))
                     | set(itertools.compress(positions, map(_HEALTH, every))))
    position = {g: p for p, g in enumerate(index)}
    noise = noise_by_method(topology)
    measured: list[tuple[int, int, int, float]] = []
    measured_at: set[int] = set()
    for k in special:  # measured, or doctor found the path unhealthy
        link = every[k]
        values[k], basis = figure(link, gpus[link.a], gpus[link.b], _fewest(topology, link), topology)
        if basis == "measured":
            measured_at.add(k)
            if link.a in position and link.b in position:
                measured.append((link.a, link.b, values[k], noise[method_of(link.measured)]))
    # (the figures of the links not measured: of every link, those of GPUs left out too)
    estimates = set(itertools.compress(values, map(operator.not_, map(measured_at.__contains__, positions)))) if measured else set()
    weight = _matrix(len(index), position, table, values)
    for i, row in enumerate(weight):
        row[i] = 0
        if None in row:  # the first pair without a link, in the order the pairs are ranked
            j = row.index(None)
            raise InputError(f"the topology has no link between GPU {index[min(i, j)]} and GPU {index[max(i, j)]}; "
                             "cannot rank groups")
    own = _rank_measured(weight, position, measured, estimates) if measured else {}
    return PairWeights(weight, PairBasis(topology, links, gpus), len(measured), own, noise,
                       today_gpus_of(every[k] for k in special))
