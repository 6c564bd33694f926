"""A group's P2P caveat, in words and figures: which of its pairs are broken today (measured, or
inferred from a doctor finding), which a finding covers but the user's measurement shows working,
whether ``NCCL_P2P_DISABLE=1`` makes its ring faster today (only then is it advised), and what each
ring hop carries today (``today.group_today``); said per group."""

from __future__ import annotations

from gputopo.analysis.recommend.problem import Problem
from gputopo.analysis.recommend.result import GroupAdvice
from gputopo.analysis.recommend.today import GroupToday, differs, group_today, pair_today
from gputopo.notation import format_gbps, pair_list

_FAULT_WORDS = {"acs": "an ACS redirect", "iommu": "the IOMMU translating"}


def p2p_caveat(problem: Problem, group: GroupAdvice) -> None:
    """Fill ``group``'s ``p2p_*`` fields, its caveat, today's figures and the bottleneck's words."""
    if not group.same_host or len(group.gpus) < 2 or not differs(problem):
        return
    today = group_today(problem, group.gpus, group.ring)
    group.p2p_broken_pairs = today.broken
    group.p2p_inferred_pairs = today.inferred
    group.p2p_cleared_pairs = today.cleared
    group.p2p_disable_advised = today.disable_advised
    parts = []
    if today.broken:
        parts.append(_broken_words(problem, today) + "; " + _advice_words(group, today))
    if today.cleared:
        parts.append(_cleared_words(problem, today))
    group.p2p_caveat = ". ".join(parts)
    if today.disable_advised:
        group.cross_device_ops_reason += (
            "; with NCCL_P2P_DISABLE=1 until P2P is fixed, NCCL's rings copy through host memory")
    if today.disable_advised or (today.broken and group.bottleneck_gbps is not None and today.gbps is not None
                                 and abs(today.gbps - group.bottleneck_gbps) >= 0.01):
        _today_figures(group, today)  # (where today's ring is the healthy one's, one figure says both)


def all_staged(problem: Problem, group: GroupAdvice) -> None:
    """Today's figures with every hop through host memory (``NCCL_P2P_DISABLE=1`` advised whatever
    the pairs measure: a byte check found peer copies delivering wrong data)."""
    today = group_today(problem, group.gpus, group.ring)
    hops = list(zip(group.ring, group.ring[1:] + group.ring[:1])) if len(group.ring) > 2 else [tuple(group.ring)]
    today.disable_advised, today.ring_broken = True, [tuple(sorted(hop)) for hop in hops]  # type: ignore[misc]
    days = [pair_today(problem, a, b) for a, b in hops]
    today.hops = [(day.staged_gbps, day.staged_basis) for day in days]
    _today_figures(group, today)


def _broken_words(problem: Problem, today: GroupToday) -> str:
    measured = [pair for pair in today.broken if pair not in today.inferred]
    words = []
    if measured:
        words.append(f"P2P between {pair_list(measured, limit=4, more=' ...')} is broken until fixed (measured slower "
                     "with P2P than staged through host memory: ACS redirect or the IOMMU translating, `gputopo doctor` "
                     "names the fix)")
    if today.inferred:
        faults = sorted({f for a, b in today.inferred for f in problem.links[(a, b)].health if f in _FAULT_WORDS})
        what = " or ".join(_FAULT_WORDS[f] for f in faults) or "a fault on its path"
        words.append(f"P2P between {pair_list(today.inferred, limit=4, more=' ...')} is likely broken (inferred: doctor "
                     f"found {what} over {'it' if len(today.inferred) == 1 else 'them'}, and no measurement of "
                     f"{'the pair' if len(today.inferred) == 1 else 'these pairs'} compares P2P with staged copies)")
    return "; ".join(words)


def _advice_words(group: GroupAdvice, today: GroupToday) -> str:
    ring = group.ring_text
    staged = format_gbps(today.staged_gbps)
    risk = pair_list(today.p2p_risk, limit=4, more=' ...')
    if today.disable_advised:
        as_is = (f"~{format_gbps(today.as_is_gbps)} GB/s with P2P as it is" if today.as_is_gbps is not None
                 else "P2P as it is: unknown, likely slower or hanging")
        return (f"NCCL copies over {risk} with P2P as it is, so for this group NCCL_P2P_DISABLE=1 (in the environment "
                f"above) makes NCCL copy through host memory, which is faster today (~{staged} GB/s on its ring {ring} "
                f"against {as_is}) and never takes the redirected path")
    if not today.p2p_risk:
        return ("NCCL copies over none of them with P2P in this group (beyond its P2P level it goes through host memory "
                "anyway), so NCCL_P2P_DISABLE=1 would not make it faster: not set for this group")
    return (f"NCCL_P2P_DISABLE=1 would not make this group faster today (~{staged} GB/s on its ring {ring} through host "
            f"memory against ~{format_gbps(today.as_is_gbps or 0.0)} GB/s with P2P as it is): not set for this group")


def _cleared_words(problem: Problem, today: GroupToday) -> str:
    from gputopo.analysis.expect.measured import measured_gbps, staged_gbps

    shown = today.cleared[:4]
    figures = ", ".join(f"{a}-{b} {measured_gbps(problem.links[(a, b)]) or 0.0:.2f} against "
                        f"{staged_gbps(problem.links[(a, b)].measured) or 0.0:.2f}" for a, b in shown)
    faults = sorted({f for a, b in today.cleared for f in problem.links[(a, b)].health if f in _FAULT_WORDS})
    what = " or ".join(_FAULT_WORDS[f] for f in faults)
    more = " ..." if len(today.cleared) > len(shown) else ""
    return (f"doctor found {what} over {pair_list(today.cleared, limit=4, more=' ...')}, but your measurement shows "
            f"P2P working there today, at least as fast as staged copies within the noise ({figures} GB/s{more}): not "
            "broken today, so nothing is changed for them")


def _today_figures(group: GroupAdvice, today: GroupToday) -> None:
    """What each hop carries today with the advice followed (``RingHop.until_fixed_gbps``), the
    all-reduce figures of that ring, and the bottleneck's words for both states."""
    for hop, (gbps, basis) in zip(group.hops, today.hops):
        hop.until_fixed_gbps, hop.until_fixed_basis = round(gbps, 2), basis
    if group.slowest_hop is None:
        return
    slowest_today = min(group.hops, key=lambda h: h.until_fixed_gbps or 0.0)
    k = len(group.gpus)
    busbw = round(today.gbps if today.gbps is not None else slowest_today.until_fixed_gbps or 0.0, 2)
    group.allreduce_busbw_until_fixed_gbps = busbw  # (as it is, a broken pair off the ring may be the slowest)
    group.allreduce_until_fixed_gbps = round(busbw * k / (2 * (k - 1)), 2)
    slowest = group.slowest_hop
    how = {"measured": "measured", "estimated": "estimated", "assumed": "estimated, at least"}
    if today.disable_advised:
        state = "with NCCL_P2P_DISABLE=1 until the fix"
        today_how = ("its staged copies measured" if slowest_today.until_fixed_basis == "measured" else
                     "estimated for copies through host memory"
                     + (", at least" if slowest_today.until_fixed_basis == "assumed" else ""))
    else:
        state = "with P2P as it is"
        today_how = how.get(slowest_today.until_fixed_basis or "", slowest_today.until_fixed_basis or "")
    group.bottleneck = (
        f"{slowest.label} between GPU {slowest.a} and GPU {slowest.b}, ~{format_gbps(slowest.gbps)} GB/s once P2P is "
        f"fixed ({how.get(slowest.basis, slowest.basis)}); today, {state}, "
        f"{slowest_today.label} between GPU {slowest_today.a} and GPU {slowest_today.b} "
        f"~{format_gbps(busbw)} GB/s ({today_how})")
