"""Which GPUs to train on together, and exactly how to tell TensorFlow.

``recommend(topology, gpus, jobs, require, exclude, alternatives)`` is a pure function of a
``Topology``: no NVML, no TensorFlow (it never imports either), so the ``train`` command, the CLI and
the tests all get the same answer from the same data.

How a group is valued (docs/recommend.md says it for users):

1. Every pair of GPUs gets a per-direction bandwidth from ``analysis.expect.bandwidth`` (a bench-p2p
   measurement where there is one, else an estimate from the link).
2. Data-parallel training spends its communication in an all-reduce of the gradients, and NCCL's
   all-reduce is a ring: every GPU sends to the next one at the same time, so the ring goes as fast
   as its slowest hop. A group is worth the slowest hop of the *best* ring through it (the
   bottleneck Hamiltonian cycle), not the sum of its link scores. NCCL also runs several rings at
   once over NVLink meshes; we do not model that capacity, but the last tie-break (total pair
   bandwidth inside the group) prefers the groups that have more links for those extra rings.
3. Ties are broken by locality: fewer hosts, then fewer CPU sockets where the source knows them,
   then fewer NUMA nodes and nearer ones where the kernel's NUMA distances are known
   (``problem.LocalityRank``: a NUMA node is not a socket on EPYC NPS2/NPS4, Intel SNC or Grace),
   because the input pipeline and host-staged copies run on the CPU next to the GPUs; then by total
   pair bandwidth; then by the lowest GPU numbers, so the answer is deterministic.

The key of a group is therefore ``(bottleneck_gbps, -hosts, -locality, total_gbps)``, compared
lexicographically, bigger is better.

Where each part lives:

- ``result``: ``Recommendation``, ``GroupAdvice``, ``RingHop`` and their JSON (``SCHEMA``);
- ``problem``: the matrix the search sees (``Problem``), with TensorFlow's peer view filled in;
- ``ring``: the best ring through a set (``best_ring``);
- ``budget``: the one budget of work every search of a call counts in (``Budget``, ``WORK_BUDGET``);
- ``search``: twin classes and the branch and bound (``search_groups``), exact within the budget;
- ``jobs``: ``--jobs N`` as N disjoint groups, the worst as good as possible (``split_jobs``);
- ``advice``: checking the ask, CUDA numbering, numactl, MirroredStrategy and cross-device ops;
- ``explain``: the reasons and notes, from structured data.
"""

from __future__ import annotations

from typing import Iterable

from gputopo.analysis.recommend.advice import advise_group, check_ask, hop_label
from gputopo.analysis.recommend.budget import WORK_BUDGET, Budget
from gputopo.analysis.recommend.explain import explain_ranking, measurements_set_aside, recommendation_notes
from gputopo.analysis.recommend.jobs import split_jobs
from gputopo.analysis.recommend.problem import CENTI, Problem, negated_key, numa_domain_of
from gputopo.analysis.recommend.result import SCHEMA, GroupAdvice, GroupKey, Recommendation, RingHop
from gputopo.analysis.recommend.ring import INF, best_ring
from gputopo.analysis.recommend.search import EXACT_LIMIT, SearchResult, search_groups
from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.notation import count_word

__all__ = [
    "CENTI",
    "EXACT_LIMIT",
    "INF",
    "MAX_ALTERNATIVES",
    "SCHEMA",
    "WORK_BUDGET",
    "Budget",
    "GroupAdvice",
    "GroupKey",
    "Problem",
    "Recommendation",
    "RingHop",
    "best_ring",
    "hop_label",
    "numa_domain_of",
    "recommend",
    "search_groups",
    "split_jobs",
]


MAX_ALTERNATIVES = 100  # runner-up groups one answer may list
ADVICE_STEPS_PER_PAIR = 100  # a group's advice looks up each pair's link and socket: ~100 steps' time a pair


def recommend(
    topology: Topology,
    gpus: int,
    jobs: int = 1,
    require: Iterable[int] = (),
    exclude: Iterable[int] = (),
    alternatives: int = 3,
    budget: Budget | None = None,
    held: dict[int, str] | None = None,
) -> Recommendation:
    """The best ``gpus`` GPUs of ``topology`` to train on together (plus ``alternatives`` runners-up),
    and for ``jobs > 1`` a split into that many disjoint groups where the worst is as good as possible.

    Raises ``InputError`` for asks that cannot be met (0 GPUs, more than exist, a required GPU that is
    excluded or missing, ``jobs * gpus`` more than the GPUs available, ``alternatives`` outside
    0..``MAX_ALTERNATIVES``).

    Every search of the call counts its work in one ``budget`` (a fresh ``Budget()`` of
    ``WORK_BUDGET`` steps by default); where it runs out, the answer is the best found so far, and
    ``search``, ``search_stopped`` and a note say so.

    ``held``: GPUs another process held memory of, with why (``analysis.busy.memory_held``, a past state):
    never left out; listed after the others where groups tie, and named in a note.
    """
    if not 0 <= alternatives <= MAX_ALTERNATIVES:
        raise InputError(f"--alternatives must be from 0 to {MAX_ALTERNATIVES} (got {alternatives})")
    budget = budget if budget is not None else Budget()
    require_list, exclude_list = (sorted({int(g) for g in gpus_given}) for gpus_given in (require, exclude))
    known = topology.gpu_indices
    check_ask(topology, gpus, jobs, require_list, exclude_list, set(known))
    problem = Problem.from_topology(topology, [g for g in known if g not in set(exclude_list)], budget, held)
    required_pos = {problem.pos[g] for g in require_list}

    # Alternatives for one group never need the required GPUs all in it; they must be in the split.
    single_required = required_pos if jobs == 1 or len(required_pos) <= gpus else set()
    result = search_groups(problem, gpus, single_required, max(1, alternatives + 1))
    proven = result.exhausted and not problem.ring_budget_hit and not budget.stopped
    search = _search_text(problem, result, budget)

    groups = []
    for key, members in result.ranked:
        if groups and budget.exhausted:  # the runners-up found are described while the budget lasts
            break
        budget.spend(ADVICE_STEPS_PER_PAIR * gpus * gpus)  # the advice reads every pair of the group's links
        groups.append(advise_group(problem, members, key))
    alternatives_cut = len(result.ranked) - len(groups)
    for rank, group in enumerate(groups, start=1):
        group.rank = rank
    explain_ranking(problem, groups, gpus)

    jobs_proven = True
    if jobs == 1:
        job_groups = [groups[0]]
    else:
        job_groups, jobs_proven, how = _split_into_jobs(problem, gpus, jobs, required_pos, proven, groups[0])
        search += f"; --jobs {jobs}: {how}"
    notes = recommendation_notes(topology, problem, gpus) + held_notes(problem, groups[0])
    if alternatives_cut:
        notes.insert(0, f"{count_word(alternatives_cut, 'more runner-up group')} found but not described: the work "
                        "budget ran out (ask for fewer --alternatives)")
    if budget.stopped:
        notes.insert(0, stopped_note(budget))

    return Recommendation(
        gpus_per_group=gpus,
        jobs_requested=jobs,
        require=require_list,
        exclude=exclude_list,
        groups=groups,
        jobs=job_groups,
        proven_optimal=proven,
        jobs_proven_optimal=jobs_proven,
        search=search,
        interchangeable=problem.uniform and problem.links_known and 1 < gpus < problem.n,
        notes=notes,
        search_steps=budget.spent,
        search_budget=budget.limit,
        search_stopped=budget.stopped,
        budget_note=stopped_note(budget) if budget.stopped else None,
        measurements_set_aside=measurements_set_aside(topology),
        measurement_noise=dict(problem.noise) if problem.measured_pairs else {},
        source=topology.source, label=topology.label,
        nccl_p2p_level=_level_data(topology), memory_held=dict(sorted((held or {}).items())),
    )


def held_notes(problem: Problem, best: GroupAdvice) -> list[str]:
    """A note per GPU another process held memory of (``recommend(held=...)``): whether the best group
    leaves it out, or why it is kept."""
    notes = []
    for gpu, why in sorted(problem.held.items()):
        if gpu not in problem.pos:  # excluded
            continue
        if gpu in best.gpus:
            verdict = ("kept in the best group: no group without it ranks as high on bandwidth and locality, which "
                       "decide before a past memory figure; see what holds it before training, or --exclude it")
        else:
            verdict = "groups without it rank first where the bandwidth and locality tie"
        notes.append(f"GPU {gpu} may be busy: {why}; {verdict}")
    return notes


def _level_data(topology: Topology) -> dict[str, object]:
    """NCCL's P2P level the figures assume, as JSON (``Recommendation.nccl_p2p_level``)."""
    from gputopo.analysis.expect.nccl_transport import nccl_level

    level = nccl_level(topology)
    return {"level": level.level, "source": level.source, "assumption": level.assumption}


def stopped_note(budget: Budget) -> str:
    """The note of an answer the work budget cut short."""
    return (f"search stopped after {budget.stopped_after:,} steps (the budget is {budget.limit:,}); best found, "
            "not proven: another group may be better")


def _search_text(problem: Problem, result: SearchResult, budget: Budget) -> str:
    """How the groups were found, in words."""
    # (GPUs wired alike to every other GPU are weighed once: said so, without the search's jargon)
    alike = f"; GPUs wired alike weighed once ({result.classes} kinds of {problem.n})" if result.classes < problem.n else ""
    nodes = count_word(result.nodes, "search node")
    if result.listed:
        search = (
            f"exact over {problem.n} GPUs: after {nodes} of branch and bound, every group of one NUMA node on a "
            f"ring of the fastest links was listed, and none other can rank above them{alike}"
        )
    elif result.exhausted and not budget.stopped:
        search = f"exact: every group of the {problem.n} GPUs weighed by branch and bound ({nodes}{alike})"
    else:
        search = f"branch and bound over {problem.n} GPUs ({nodes}{alike})"
    if budget.stopped:
        search += f"; search stopped after {budget.stopped_after:,} steps; best found, not proven"
    elif problem.ring_budget_hit:
        search += "; some rings were too large to search completely (best ring found used)"
    return search


def _split_into_jobs(
    problem: Problem, gpus: int, jobs: int, required_pos: set[int], proven: bool, best: GroupAdvice
) -> tuple[list[GroupAdvice], bool, str]:
    """The ``--jobs`` split as advice, ranked, with each job's reason; whether it is proven the
    fairest; how it was found."""
    positions, exact, how = split_jobs(problem, gpus, jobs, required_pos)
    job_groups = [advise_group(problem, g, problem.key(g)) for g in positions]
    job_groups.sort(key=lambda g: (negated_key(g.key), g.gpus))
    for rank, group in enumerate(job_groups, start=1):
        group.rank = rank
        group.reason = f"job {rank} of {jobs}"
    worst = job_groups[-1]
    # Greedy is still optimal when its worst group is as good as the best single group.
    jobs_proven = (exact or (proven and worst.key == best.key)) and not problem.ring_budget_hit and not problem.budget.stopped
    worst.reason = f"job {jobs} of {jobs}, the worst group: " + (
        "no split into disjoint groups makes the worst one better"
        if jobs_proven
        else "the worst of a greedy split, not proven the fairest"
    )
    return job_groups, jobs_proven, how
