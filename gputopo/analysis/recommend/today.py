"""What a group gets *today*, on the box as it is, beside the healthy state the search ranks on.

The ranking is the healthy state's (a benchmark taken on a broken box must not steer it), but the
words and the environment advice must be right for today, and never contradict the user's own
measurements. Per pair (``pair_today``):

- **broken, measured**: the tool copied slower with P2P on than staged through host memory, by more
  than the tool's noise (a pair slower by more than ``measured.P2P_SLOWER_RATIO`` also ranks on its
  healthy estimate: its measurement is set aside);
- **not broken**: a pair the measurement shows copying with P2P at least as fast as staged (within the
  tool's noise), whatever a finding covering the host (doctor's ``acs``/``iommu`` on ``Link.health``)
  says of it; its P2P works today;
- **broken, inferred**: not measured against staged copies, under such a finding: likely broken, an
  inference (said so), its P2P figure today unknown (the IOMMU or an ACS redirect can hang or crawl).

Per group (``group_today``): the slowest hop as it is (NCCL as it connects each pair: P2P where it
would, host memory beyond its P2P level), over the ring the advice describes and every broken pair
NCCL would copy over with P2P (its own rings know nothing of the fault), against the ring's slowest
hop with ``NCCL_P2P_DISABLE=1`` (every hop staged); the variable is advised only where such a broken
pair is in the group and it makes the group faster today, beyond the noise. ``tiebreak`` orders groups the healthy ranking
ties: fewer GPUs whose memory another process held (a TF log's past state), then today's figure.
"""

from __future__ import annotations

import itertools
import math
import operator
from dataclasses import dataclass, field
from typing import Sequence

from gputopo.analysis.recommend.problem import CENTI, Problem
from gputopo.analysis.recommend.weights import P2P_PATH_FAULTS, today_gpus_of



@dataclass(frozen=True)
class PairToday:
    """One pair today. ``broken``: ``"measured"``, ``"inferred"`` or None; ``p2p_gbps``: what NCCL
    gets as it connects the pair today, without any variable (None: unknown, P2P likely broken);
    ``staged_gbps``: with ``NCCL_P2P_DISABLE=1`` (host memory), ``staged_basis`` how known;
    ``cleared``: the doctor faults over the pair that its measurement shows P2P working despite."""

    broken: str | None
    p2p_gbps: float | None
    staged_gbps: float
    staged_basis: str
    cleared: tuple[str, ...] = ()
    p2p_basis: str = "measured"
    nccl_p2p: bool = True  # NCCL connects the pair with P2P (within its P2P level, the pair can peer)


@dataclass
class GroupToday:
    """A group's ring today: ``broken`` pairs of the group (measured, inferred), ``cleared`` pairs
    (a doctor fault the measurement contradicts), whether ``NCCL_P2P_DISABLE=1`` is advised, and per
    hop (in ring order) the figure today with that advice followed, with its basis."""

    broken: list[tuple[int, int]] = field(default_factory=list)
    inferred: list[tuple[int, int]] = field(default_factory=list)
    cleared: list[tuple[int, int]] = field(default_factory=list)
    ring_broken: list[tuple[int, int]] = field(default_factory=list)
    p2p_risk: list[tuple[int, int]] = field(default_factory=list)  # broken pairs NCCL connects with P2P
    disable_advised: bool = False
    as_is_gbps: float | None = None  # the ring's slowest hop without the variable (None: unknown)
    staged_gbps: float = 0.0  # with NCCL_P2P_DISABLE=1
    hops: list[tuple[float, str]] = field(default_factory=list)  # (GB/s today, basis) per ring hop

    @property
    def gbps(self) -> float | None:
        """The ring's slowest hop today, with the advice followed."""
        return self.staged_gbps if self.disable_advised else self.as_is_gbps


def noise_of(problem: Problem) -> float:
    """The widest noise assumed of the problem's measured figures (the default where none)."""
    from gputopo.analysis.expect.measured import DEFAULT_NOISE

    return max(problem.noise.values(), default=DEFAULT_NOISE)


def pair_today(problem: Problem, a: int, b: int) -> PairToday:
    """GPUs ``a`` and ``b`` (GPU numbers) today; kept in ``problem.today_cache``."""
    key = (a, b) if a < b else (b, a)
    found = problem.today_cache.get(key)
    if found is None:
        found = problem.today_cache[key] = _pair_today(problem, *key)
    return found


def _pair_today(problem: Problem, a: int, b: int) -> PairToday:
    from gputopo.analysis.expect.bandwidth import host_staged_estimate
    from gputopo.analysis.expect.measured import measured_gbps, method_of, staged_gbps
    from gputopo.analysis.expect.nccl_transport import nccl_level, uses_p2p

    link = problem.links[(a, b)]
    own = problem.own_figure(a, b)[0] / CENTI
    staged = staged_gbps(link.measured)
    if staged is not None:
        staged_basis = "measured"
    else:
        estimate = host_staged_estimate(link, problem.gpus.get(link.a), problem.gpus.get(link.b))
        staged, staged_basis = min(estimate.gbps, own), "assumed" if estimate.assumption else "estimated"
    m = link.measured
    on = measured_gbps(link) if m is not None and m.p2p_enabled is True else None
    off = staged_gbps(m)
    faults = tuple(sorted(set(link.health) & P2P_PATH_FAULTS))
    broken: str | None = None
    cleared: tuple[str, ...] = ()
    if link.is_nvlink:
        pass  # NVLink never takes the PCIe path ACS or the IOMMU redirects
    elif on is not None and off is not None:
        noise = problem.noise.get(method_of(m), noise_of(problem))
        if on < off * (1 - noise):  # slower with P2P than staged, beyond the noise: host memory is faster
            broken = "measured"
        else:
            cleared = faults
    elif faults:
        broken = "inferred"
    p2p_basis, nccl_p2p = "measured", True
    if link.can_peer is False or (link.type != "UNKNOWN" and not uses_p2p(link, nccl_level(problem.topology))):
        p2p: float | None = staged  # through host memory whatever P2P does (NCCL's SHM)
        p2p_basis, nccl_p2p = staged_basis, False
    elif on is not None:
        p2p = on
    elif broken == "inferred":
        p2p = None
    else:
        p2p, p2p_basis = own, problem.estimate_basis[(a, b)]
    return PairToday(broken, p2p, staged, staged_basis, cleared, p2p_basis, nccl_p2p)


def group_today(problem: Problem, gpus: Sequence[int], ring: Sequence[int]) -> GroupToday:
    """``gpus`` (GPU numbers) on ``ring`` (their order) today; see the module text. NCCL knows nothing of
    a broken path: its own rings may copy over any pair of the group it connects with P2P, so each such
    broken pair (``p2p_risk``) counts against the group as it is, beside the ring's hops."""
    result = GroupToday()
    for a, b in itertools.combinations(sorted(gpus), 2):
        pair = pair_today(problem, a, b)
        if pair.broken is not None:
            result.broken.append((a, b))
            if pair.broken == "inferred":
                result.inferred.append((a, b))
            if pair.nccl_p2p:
                result.p2p_risk.append((a, b))
        elif pair.cleared:
            result.cleared.append((a, b))
    k = len(ring)
    hops = list(zip(ring, list(ring[1:]) + list(ring[:1]))) if k > 2 else [tuple(ring)] if k == 2 else []
    if not hops:
        return result
    days = [pair_today(problem, a, b) for a, b in hops]
    result.ring_broken = [tuple(sorted(hop)) for hop, day in zip(hops, days) if day.broken is not None]  # type: ignore[misc]
    known = [day.p2p_gbps for day in days] + [pair_today(problem, a, b).p2p_gbps for a, b in result.p2p_risk]
    result.as_is_gbps = None if None in known else min(known)  # type: ignore[type-var]
    result.staged_gbps = min(day.staged_gbps for day in days)
    result.disable_advised = bool(result.p2p_risk) and (
        result.as_is_gbps is None or result.staged_gbps > result.as_is_gbps * (1 + noise_of(problem)))
    if result.disable_advised:
        result.hops = [(day.staged_gbps, day.staged_basis) for day in days]
    else:
        result.hops = [(day.p2p_gbps if day.p2p_gbps is not None else 0.0, day.p2p_basis) for day in days]
    return result


def differs(problem: Problem) -> bool:
    """Whether any pair may work otherwise today than in the healthy state the search ranks on (a
    doctor fault on a PCIe pair's P2P path, a measurement of P2P against staged copies): only then do
    ties and the caveat look at today."""
    return bool(today_gpus(problem))


def today_gpus(problem: Problem) -> frozenset[int]:
    """The GPUs of the pairs ``differs`` looks for (kept): one pass in C over the links, then only
    the measured links and those doctor found a fault on."""
    found = problem.today_differs
    if found is None:  # (a problem made without ``pair_weights``': its links, once)
        links = problem.topology.links if problem.topology is not None else list(problem.links.values())
        special = itertools.chain(itertools.compress(links, map(_HEALTH, links)),
                                  itertools.compress(links, map(_MEASURED, links)))
        found = problem.today_differs = today_gpus_of(special)
    return found


_HEALTH, _MEASURED = operator.attrgetter("health"), operator.attrgetter("measured")  # (in C: no Python call per link)


def tiebreak(problem: Problem, members: tuple[int, ...]) -> tuple[int, int]:
    """How a group the healthy ranking ties with others orders among them, smaller first: how many of
    its GPUs another process held memory of (``Problem.held``), then minus its ring's slowest hop
    today (``today_gbps``) by noise band: figures closer than the noise assumed of the measurements
    fall in the same band most often, so a difference within it rarely decides."""
    found = problem.tiebreak_cache.get(members)
    if found is not None:
        return found
    held = sum(1 for i in members if problem.index[i] in problem.held)
    figure = today_gbps(problem, members)
    band = -math.floor(math.log(figure) / math.log1p(noise_of(problem))) if figure and figure > 0 else 0
    found = problem.tiebreak_cache[members] = (held, band)
    return found


def today_gbps(problem: Problem, members: tuple[int, ...]) -> float | None:
    """The slowest hop today of the best ring through ``members`` (positions), with the advice followed;
    None where nothing differs today (the healthy figure is today's) or for one GPU."""
    if not differs(problem) or len(members) < 2:
        return None
    _, order = problem.ring(members)
    return group_today(problem, [problem.index[i] for i in members], [problem.index[i] for i in order]).gbps


def tiebreaks(problem: Problem) -> bool:
    """Whether ties are ordered by ``tiebreak`` at all (else by the lowest GPU numbers only)."""
    return bool(problem.held) or differs(problem)
