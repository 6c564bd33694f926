"""The sentences: why each group ranks where it does, and the notes under the answer.

Built from structured data (the groups' keys and slowest hops, the problem's figures), never by
reading other sentences back.
"""

from __future__ import annotations

from gputopo.analysis.expect.measured import noise_text, percent
from gputopo.analysis.recommend.problem import CENTI, Problem
from gputopo.analysis.recommend.result import GroupAdvice
from gputopo.model import Topology
from gputopo.notation import count_word, format_gbps, gpu_set, gpus_word
from gputopo.numbering import pci_order_numbers


def explain_ranking(problem: Problem, groups: list[GroupAdvice], k: int) -> None:
    """One sentence per group (its ``reason``): why it beats the next one."""
    for x, group in enumerate(groups):
        if x + 1 >= len(groups):
            if x:
                group.reason = "the last alternative listed"
            elif k == problem.n:
                group.reason = "the only possible group: every available GPU"
            else:
                group.reason = "the only group asked for"
            if problem.uniform and 1 < k < problem.n and x == 0:
                group.reason = ("every pair measured within the noise of the others: any group of this size is as good"
                                if problem.all_measured else
                                "every pair's figure within the noise of the measured ones: any group of this size is "
                                "as good" if problem.measured and problem.links_known else
                                "every pair has the same bandwidth: any group of this size is as good" if problem.links_known
                                else "the source does not say how the GPUs are connected, so no group can be told "
                                     "better (any may be faster or slower)")
            continue
        nxt = groups[x + 1]
        if group.key != nxt.key:
            group.reason = why_better(group, nxt, problem=problem)
            continue
        today = _better_today(problem, group, nxt)
        group.reason = (
            f"as good as {gpu_set(nxt.gpus)} in everything the source shows{_ties_within_noise(problem, group, nxt)}; "
            "listed first for its lower GPU numbers" + _unknown_sockets(problem, group, nxt)
        ) if today is None else today
        # Say too what it beats: the first listed group that is worse, if any.
        worse = next((g for g in groups[x + 2 :] if g.key != group.key), None)
        if worse is not None:
            group.reason += f"; better than {gpu_set(worse.gpus)}: " + why_better(group, worse, name_worse=False, problem=problem)


def _members(problem: Problem, group: GroupAdvice) -> tuple[int, ...]:
    return tuple(sorted(problem.pos[g] for g in group.gpus))


def _better_today(problem: Problem, group: GroupAdvice, other: GroupAdvice) -> str | None:
    """Why ``group`` is listed before ``other``, which the healthy ranking ties with it, where what the
    sources show of today decides (``today.tiebreak``): fewer GPUs whose memory another process held,
    or a faster ring today; None where today tells them no more apart than the healthy state."""
    from gputopo.analysis.recommend.today import differs, group_today, tiebreak, tiebreaks, today_gbps

    if not tiebreaks(problem):
        return None
    mine, theirs = tiebreak(problem, _members(problem, group)), tiebreak(problem, _members(problem, other))
    if mine == theirs:
        return None
    tied = (f"ties {gpu_set(other.gpus)} on bandwidth and locality"
            + (", the healthy state the ranking goes by" if differs(problem) else "")
            + _ties_within_noise(problem, group, other))
    if mine[0] != theirs[0]:
        held = [g for g in other.gpus if g in problem.held]
        mine_held = [g for g in group.gpus if g in problem.held]
        return (f"{tied}; listed first as {gpus_word(held)} of {gpu_set(other.gpus)} "
                f"may not be free: {problem.held[held[0]]}"
                + (f" ({gpus_word(mine_held)} of this group too)" if mine_held else ""))
    now, then = today_gbps(problem, _members(problem, group)), today_gbps(problem, _members(problem, other))
    theirs = group_today(problem, other.gpus, other.ring)
    why = ("" if not theirs.broken else " (P2P there measured slower than staged copies)" if not theirs.inferred
           else " (P2P there likely broken, inferred from a doctor finding)" if theirs.inferred == theirs.broken
           else " (P2P there measured slower than staged copies, or likely broken by a doctor finding)")
    return (f"{tied}; listed first as it works better today: its ring's slowest hop ~{format_gbps(now or 0.0)} GB/s "
            f"today against ~{format_gbps(then or 0.0)} GB/s for {gpu_set(other.gpus)}{why}")


def _unknown_sockets(problem: Problem, *groups: GroupAdvice) -> str:
    """What the tie may hide: groups over several NUMA nodes whose CPU sockets the source does not say."""
    if problem.topology is None or any(g.same_socket is not None or g.numa_domains < 2 for g in groups):
        return ""
    return " (whether their NUMA nodes share a CPU socket, the source does not say)"


def _slowest_hop_word(group: GroupAdvice) -> str:
    """The slowest hop's link word ("NV1", "SYS", "TF:no-P2P"); one GPU has no hop."""
    return group.slowest_hop.label if group.slowest_hop is not None else "one GPU: no all-reduce"


def _one_or_count(n: int, word: str) -> str:
    return f"one {word}" if n == 1 else count_word(n, word)


def _hop_noise(problem: Problem | None, *groups: GroupAdvice) -> float:
    """The noise assumed of the groups' slowest hops (0 where both are estimates: exact)."""
    hops = [g.slowest_hop for g in groups if g.slowest_hop is not None and g.slowest_hop.basis == "measured"]
    return max((problem.own_figure(h.a, h.b)[1] for h in hops), default=0.0) if problem is not None else 0.0


def _pairs_noise(problem: Problem | None, *groups: GroupAdvice) -> float:
    """The noise assumed of the measured pairs inside the groups (0: every pair estimated)."""
    if problem is None or not problem.measured:
        return 0.0
    return max((problem.own_figure(a, b)[1] for g in groups for x, a in enumerate(g.gpus) for b in g.gpus[x + 1 :]),
               default=0.0)


def _closer_than(x: float, y: float, noise: float) -> bool:
    return abs(x - y) < noise * max(x, y)


def _ties_within_noise(problem: Problem | None, group: GroupAdvice, other: GroupAdvice) -> str:
    """What a tie of measured figures hides: ``", their slowest hops (~45.2 and ~44.9 GB/s) within
    the ~5% a measurement varies"``; nothing where the figures are the same."""
    noise = _pairs_noise(problem, group, other)
    mine, theirs = group.bottleneck_gbps, other.bottleneck_gbps
    if not noise or mine is None or theirs is None:
        return ""
    if mine != theirs:
        return f", their slowest hops (~{mine:.1f} and ~{theirs:.1f} GB/s) within the ~{percent(noise)} a measurement varies"
    if group.total_link_gbps != other.total_link_gbps:
        return f", their measured figures within the ~{percent(noise)} a measurement varies"
    return ""


def why_better(group: GroupAdvice, worse: GroupAdvice, name_worse: bool = True, problem: Problem | None = None) -> str:
    """Why ``group`` ranks above ``worse`` (their keys differ): the first key element that differs.
    The figures named are the groups' own (``bottleneck_gbps``, ``total_link_gbps``); the keys hold
    measured figures by their noise class, so a difference in a key may still be within the noise."""
    a, b = group.key, worse.key
    mine = group.bottleneck_gbps if group.bottleneck_gbps is not None else a[0] / CENTI
    theirs = worse.bottleneck_gbps if worse.bottleneck_gbps is not None else b[0] / CENTI
    noise = _hop_noise(problem, group, worse)
    if a[0] != b[0]:
        if _closer_than(mine, theirs, noise):
            return (
                f"its slowest ring hop is ~{mine:.1f} GB/s ({_slowest_hop_word(group)}) against ~{theirs:.1f} GB/s "
                f"({_slowest_hop_word(worse)})" + (f" for {gpu_set(worse.gpus)}" if name_worse else "")
                + f", closer than the ~{percent(noise)} a measurement varies: ranked by the noise bands the measured "
                "figures fall in, which another run may reorder"
            )
        if format_gbps(mine) == format_gbps(theirs):
            return _slightly_faster(group, worse, name_worse)
        return (
            f"its slowest ring hop is ~{format_gbps(mine)} GB/s ({_slowest_hop_word(group)}) against "
            f"~{format_gbps(theirs)} GB/s ({_slowest_hop_word(worse)})"
            + (f" for {gpu_set(worse.gpus)}" if name_worse else "")
        )
    same = "same slowest hop" + (f" as {gpu_set(worse.gpus)}" if name_worse else "")
    if mine != theirs:  # one noise class: measured figures within the noise of each other
        whose = f"{gpu_set(worse.gpus)}'s" if name_worse else "the other's"
        same = (f"slowest hop within the ~{percent(noise or _pairs_noise(problem, group, worse))} a measurement varies "
                f"of {whose} (~{mine:.1f} and ~{theirs:.1f} GB/s)")
    if a[1] != b[1]:
        return f"{same}, but on {count_word(-a[1], 'host')} instead of {-b[1]}"
    if a[2] != b[2]:
        mine, theirs = (problem.rank_of_key(a), problem.rank_of_key(b)) if problem else (None, None)
        if mine is not None and theirs is not None and mine.sockets != theirs.sockets:
            sockets = f"{'one CPU socket' if mine.sockets == 1 else count_word(mine.sockets, 'CPU socket')} instead of {theirs.sockets}"
            numa = f"{_one_or_count(mine.numa_nodes, 'NUMA node')} instead of {theirs.numa_nodes}"
            where = f"{numa} ({sockets}, as the source knows them)" if mine.numa_nodes != theirs.numa_nodes else (
                f"{sockets} (as the source knows them)")
            return f"{same}, but on {where}, keeping the input pipeline next to the GPUs"
        if mine is not None and theirs is not None and mine.numa_nodes == theirs.numa_nodes:
            return (
                f"{same}, but nearer NUMA nodes (kernel distance {mine.distance} instead of {theirs.distance}), "
                "keeping the input pipeline next to the GPUs"
            )
        if worse.numa_unknown_gpus and not group.numa_unknown_gpus:
            return (f"{same}, but on {_one_or_count(group.numa_domains, 'NUMA node')} the source gives, where the "
                    f"NUMA node of {gpus_word(worse.numa_unknown_gpus)} in {gpu_set(worse.gpus)} is not in the source")
        numa_a, numa_b = (mine.numa_nodes, theirs.numa_nodes) if mine and theirs else (-a[2], -b[2])
        return (
            f"{same}, but on {_one_or_count(numa_a, 'NUMA node')} instead of {numa_b}, "
            f"keeping the input pipeline next to the GPUs"
        )
    return _why_more_pairs(problem, group, worse, same)


def _why_more_pairs(problem: Problem | None, group: GroupAdvice, worse: GroupAdvice, same: str) -> str:
    """Why ``group`` beats ``worse`` where the slowest hop, hosts and NUMA nodes tie: what its pairs add
    up to (or, from a TF log alone, how many of them TF says cannot peer)."""
    a, b = group.key, worse.key
    total, other_total = group.total_link_gbps or a[3] / CENTI, worse.total_link_gbps or b[3] / CENTI
    noise = _pairs_noise(problem, group, worse)
    if _closer_than(total, other_total, noise):
        return (f"{same}, on as many hosts and NUMA nodes; its pairs sum to ~{total:.1f} against ~{other_total:.1f} GB/s, "
                f"closer than the ~{percent(noise)} a measurement varies: ranked by the noise bands the measured "
                "figures fall in, which another run may reorder")
    if format_gbps(total) == format_gbps(other_total):
        denied, other_denied = _tf_denied_pairs(problem, group), _tf_denied_pairs(problem, worse)
        if denied < other_denied:  # a TF log alone: such a pair is figured just below an unnamed one
            return (f"{same}, but {_count_or_none(denied, 'pair')} TensorFlow says cannot peer against "
                    f"{other_denied} (NCCL chooses its own rings, which may use them)")
        if f"{total:.1f}" == f"{other_total:.1f}":
            return (f"{same}, and as much link bandwidth inside the group to 0.1 GB/s (~{total:.1f} GB/s summed "
                    "over pairs); a smaller difference in the figures puts it first")
        return (f"{same}, but a little more link bandwidth inside the group ({total:.1f} against {other_total:.1f} GB/s "
                "summed over pairs) for NCCL's extra rings")
    return (
        f"{same}, but more link bandwidth inside the group "
        f"({format_gbps(total)} against {format_gbps(other_total)} GB/s summed over pairs) for NCCL's extra rings"
    )


def _tf_denied_pairs(problem: Problem | None, group: GroupAdvice) -> int:
    """How many of the group's pairs a TensorFlow log alone says cannot peer (0 without links)."""
    if problem is None or problem.links is None:
        return 0
    gpus = sorted(group.gpus)
    count = 0
    for pos, a in enumerate(gpus):
        for b in gpus[pos + 1 :]:
            link = problem.links.get((a, b))
            count += link is not None and link.type == "UNKNOWN" and link.can_peer is False
    return count


def _count_or_none(n: int, word: str) -> str:
    return f"no {word}" if n == 0 else count_word(n, word)


def _slightly_faster(group: GroupAdvice, worse: GroupAdvice, name_worse: bool) -> str:
    """Why a group ranks first where both slowest hops round to the same GB/s, yet differ by more
    than the noise of a measurement: say what differs (the estimate's small cost per PCIe bridge, or
    the figures to a decimal) instead of "~12 against ~12"."""
    mine, theirs = group.slowest_hop, worse.slowest_hop
    of_worse = f" than {gpu_set(worse.gpus)}'s" if name_worse else " than the other's"
    both = f"both ~{format_gbps(group.key[0] / CENTI)} GB/s"
    bases = (mine.basis, theirs.basis) if mine is not None and theirs is not None else ()
    if "measured" in bases and mine is not None and theirs is not None:
        said = ["measured" if basis == "measured" else "estimated" for basis in bases]
        return (f"its slowest ring hop ({_slowest_hop_word(group)}, {said[0]} ~{mine.gbps:.1f} GB/s) is faster{of_worse} "
                f"({_slowest_hop_word(worse)}, {said[1]} ~{theirs.gbps:.1f} GB/s) by more than a measurement is "
                "taken to vary")
    if _slowest_hop_word(group) != _slowest_hop_word(worse):
        return (f"its slowest ring hop ({_slowest_hop_word(group)}) is estimated a little faster{of_worse} "
                f"({_slowest_hop_word(worse)}), {both}: the estimate takes a small cost for each PCIe bridge or host "
                "bridge on the path")
    return f"its slowest ring hop ({_slowest_hop_word(group)}) is estimated a little faster{of_worse}, {both}"


def recommendation_notes(topology: Topology, problem: Problem, k: int) -> list[str]:
    """The notes under the answer: indistinguishable links, TF numbering, reference machines,
    TF peer view and measurements used."""
    notes: list[str] = []
    if problem.uniform and k > 1 and problem.n > k and not problem.all_measured and all(
            link.type == "UNKNOWN" for link in topology.links):
        notes.append(
            "The source does not tell the links apart (every pair looks the same), so any group looks as good; "
            "run `gputopo scan` on the host, or bench-p2p, for a real answer."
        )
    elif problem.uniform and k > 1 and problem.n > k:
        table = topology.link_table()  # (once per kind of link)
        nvswitch = all(table.examples[kind].nvswitch for kind in set(table.kind_of))
        inferred = " (inferred from the NV<n> pattern of the text)" if topology.source == "nvidia-smi" else ""
        alike = (f"Every pair is linked through NVSwitch{inferred} (~{format_gbps(problem.max_weight / CENTI)} GB/s)"
                 if nvswitch else f"Every pair's figure is within the noise of the measured ones, {noise_text(problem.noise)},"
                 if problem.measured else f"Every pair has the same bandwidth (~{format_gbps(problem.max_weight / CENTI)} GB/s)")
        notes.append(f"{alike}: any {k} GPUs are as good for all-reduce; placement decides only how many CPUs, NUMA "
                     "nodes or hosts the group spans.")
    if any(note.code == "pcie-only-matrix" for note in topology.reading_notes):
        notes.append("The matrix is `nvidia-smi topo -mp` (PCIe paths only): NVLinks between these GPUs, if any, are "
                     "not in it, so the figures and the ranking are PCIe's (and pairs NVLink joins can peer); "
                     "`nvidia-smi topo -m` shows them.")
    if topology.source == "tf-log":
        notes.append(_tf_numbering_note(topology))
    if topology.is_reference:
        notes.append("This is a reference machine from public facts, not this host.")
    if problem.tf_peer_pairs:
        notes.append(
            f"{problem.tf_peer_pairs} pair(s) without P2P facts in the topology use TensorFlow's peer view from the log."
        )
    measured = problem.measured_pairs
    if measured:
        from gputopo.analysis.expect.measured import method_of

        methods = sorted({method_of(link.measured) for link in topology.links if link.measured is not None})
        notes.append(f"Ranked by measured GB/s: {measured} pair(s) use measurements ({'; '.join(methods)}) instead of estimates; "
                     f"measured figures closer than the noise assumed, {noise_text(problem.noise)}, rank as equal "
                     "(fewer hosts, sockets and NUMA nodes decide between them).")
    cards = _inferred_cards(topology)
    if cards:
        notes.append(f"PCIe generation inferred from the card, not read from the link ({cards}): the figures are the "
                     "card's best; a card in an older slot or riser gets less (`nvidia-smi -q` or `gputopo scan` on "
                     "the host reads it).")
    shm = _beyond_level_note(topology, k)
    if shm:
        notes.append(shm)
    set_aside = measurements_set_aside(topology)
    if set_aside:
        shown = ", ".join(f"{a}-{b}" for a, b in set_aside[:8]) + (f" and {len(set_aside) - 8} more" if len(set_aside) > 8 else "")
        notes.append(
            f"Ranked on the healthy state: {len(set_aside)} pair(s) ({shown}) copied slower with P2P on than staged through "
            "host memory, a fault on their P2P path (ACS or the IOMMU redirecting peer traffic; `gputopo doctor` names "
            "it) that a fix removes, so their links' estimates rank them (scaled where their staged copies show a slow "
            "GPU link; beyond NCCL's P2P level, where NCCL goes through host memory fixed or not, their staged copies). "
            "The figures shown are those once fixed, with what each group gets today beside them where they differ. Until "
            "it is fixed, NCCL_P2P_DISABLE=1 makes NCCL faster in a group NCCL would copy over such a pair in with P2P; "
            "where groups tie on the healthy state, the one that works better today is listed first.")
    return notes


def _inferred_cards(topology: Topology) -> str:
    """``"Tesla V100-PCIE-16GB: Gen3"`` for the cards whose PCIe generation the figures infer from
    their name (``bandwidth.card_generation``), each name once; empty where none."""
    from gputopo.analysis.expect.bandwidth import card_generation

    found = {gpu.name: gen for gpu in topology.gpus if (gen := card_generation(gpu)) is not None}
    return "; ".join(f"{name}: Gen{gen}" for name, gen in found.items())


def _beyond_level_note(topology: Topology, k: int) -> str:
    """Where pairs of the topology lie beyond NCCL's P2P level: that their figures are host memory's
    (SHM), as NCCL connects them, and on what level (the log's, or the default assumed)."""
    from gputopo.analysis.expect.nccl_transport import nccl_level, uses_p2p

    if k < 2:
        return ""
    level = nccl_level(topology)
    table = topology.link_table()  # (once per kind of link)
    words = sorted({link.type for link in table.examples if link.can_peer is not False and link.type != "UNKNOWN"
                    and not uses_p2p(link, level)})
    if not words:
        return ""
    return (f"{'/'.join(words)} pairs are figured through host memory (SHM), as NCCL connects them beyond its P2P level: "
            f"{level.words()}" + ("; NCCL_P2P_LEVEL=SYS in the job makes them P2P (measure before: P2P through the CPU "
                                  "can be slower)" if level.source == "default" else "") + ".")


def measurements_set_aside(topology: Topology) -> list[tuple[int, int]]:
    """The measured pairs whose figures did not rank (``measured.p2p_slower_than_staged``)."""
    from gputopo.analysis.expect.measured import measured_links, p2p_slower_than_staged

    return [(link.a, link.b) for link in measured_links(topology) if p2p_slower_than_staged(link) is not None]


def _tf_numbering_note(topology: Topology) -> str:
    """How a TF log's GPU numbers relate to CUDA_VISIBLE_DEVICES and nvidia-smi's numbers."""
    pci_numbers = pci_order_numbers(topology)
    if pci_numbers:
        moved = [f"GPU:{i} is {n}" for i, n in sorted(pci_numbers.items()) if i != n]
        return (
            "GPU numbers are TensorFlow's ordinals from the log; CUDA_VISIBLE_DEVICES (with "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID) lists them in PCI bus order, from the log's bus ids"
            + (f" ({', '.join(moved)} there)" if moved else "")
            + ", which is nvidia-smi's numbering when the log shows every GPU of the machine."
        )
    return (
        "GPU numbers are TensorFlow's ordinals from the log; they match nvidia-smi's numbers only when "
        "the log was written with CUDA_DEVICE_ORDER=PCI_BUS_ID."
    )
