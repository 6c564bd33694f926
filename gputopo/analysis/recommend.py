"""Which GPUs to train on together, and exactly how to tell TensorFlow.

``recommend(topology, gpus, jobs, require, exclude, alternatives)`` is a pure function of a
``Topology``: no NVML, no TensorFlow (it never imports either), so the ``train`` command, the CLI and
the tests all get the same answer from the same data.

How a group is valued (docs/recommend.md says it for users):

1. Every pair of GPUs gets a per-direction bandwidth from ``analysis.bandwidth`` (a bench-p2p
   measurement where there is one, else an estimate from the link).
2. Data-parallel training spends its communication in an all-reduce of the gradients, and NCCL's
   all-reduce is a ring: every GPU sends to the next one at the same time, so the ring goes as fast
   as its slowest hop. A group is worth the slowest hop of the *best* ring through it (the
   bottleneck Hamiltonian cycle), not the sum of its link scores. NCCL also runs several rings at
   once over NVLink meshes; we do not model that capacity, but the last tie-break (total pair
   bandwidth inside the group) prefers the groups that have more links for those extra rings.
3. Ties are broken by locality: fewer hosts, then fewer NUMA nodes (CPU sockets), because the input
   pipeline and host-staged copies run on the CPU next to the GPUs; then by total pair bandwidth;
   then by the lowest GPU numbers, so the answer is deterministic.

The key of a group is therefore ``(bottleneck_gbps, -hosts, -numa_domains, total_gbps)``, compared
lexicographically, bigger is better.

The search is exact (branch and bound over all groups, with pruning that can only drop groups that
cannot beat the ones already kept) for up to ``EXACT_LIMIT`` candidate GPUs. GPUs that are *twins*
(identical bandwidth to every other GPU, same host and NUMA node) are interchangeable, so the
search only picks how many of each twin class to take; that collapses NVSwitch machines and racks
like the GB200 NVL72. Beyond ``EXACT_LIMIT`` GPUs the same search runs with a node budget and the
answer says whether it finished (proven optimal) or stopped (best found, not proven).
"""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import asdict, dataclass, field
from typing import Any, Iterable, Sequence

from gputopo.analysis.bandwidth import estimate_link
from gputopo.analysis.diagnose import link_crosses_sockets
from gputopo.errors import InputError
from gputopo.model import Gpu, Link, Topology
from gputopo.notation import count_word, format_gbps, gpu_set, pair_list
from gputopo.numbering import cuda_numbers, pci_order_numbers, tf_ordinal_to_index

SCHEMA = "gputopo.recommendation/1"
EXACT_LIMIT = 16  # candidate GPUs up to which the search has no node budget (always exact)
NODE_BUDGET = 10_000  # search nodes allowed beyond EXACT_LIMIT before settling for "best found"
RING_STEP_BUDGET = 50_000  # DFS steps per ring search before a ring is reported as best found
JOBS_EXACT_GROUP_LIMIT = 20_000
MAX_SEEDS = 16  # greedy starting groups that set the first bar for the branch and bound  # enumerate every group for --jobs when there are at most this many
INF = 10**15  # the "bottleneck" of one GPU: nothing to send, so never the slowest
# Bandwidths are compared as integers in hundredths of a GB/s, so sums and ties are exact.
CENTI = 100

GroupKey = tuple[int, int, int, int]  # (bottleneck, -hosts, -numa nodes, total) in centi-GB/s


# --- results -----------------------------------------------------------------------------------


@dataclass
class RingHop:
    """One hop of the all-reduce ring: the link and what it carries per direction."""

    a: int
    b: int
    link_type: str  # nvidia-smi's word, or UNKNOWN (TF log only)
    gbps: float
    basis: str  # "measured" or "estimated"
    label: str = ""  # the word to show: the link type, or "TF:P2P" / "TF:no-P2P" for UNKNOWN links


@dataclass
class GroupAdvice:
    """One group of GPUs with its worth and everything needed to train on it.

    ``mirrored_strategy_devices`` goes with ``CUDA_VISIBLE_DEVICES`` set as in
    ``cuda_visible_devices`` (CUDA renumbers the visible GPUs ``/gpu:0..``);
    ``mirrored_strategy_devices_all_visible`` is the list to use instead when every GPU stays visible
    and only ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` is set (TF ordinals then equal nvidia-smi's numbers).
    """

    gpus: list[int]
    rank: int = 0
    ring: list[int] = field(default_factory=list)  # ring order; the last GPU sends back to the first
    ring_text: str = ""  # "0-1-3-2-0"
    hops: list[RingHop] = field(default_factory=list)
    bottleneck_gbps: float | None = None  # slowest hop of the best ring; None for one GPU
    bottleneck: str = ""  # e.g. "NV1 between GPU 0 and GPU 1, ~20 GB/s"
    allreduce_busbw_gbps: float | None = None  # NCCL's "bus bandwidth" of a ring: the slowest hop
    allreduce_gbps: float | None = None  # gradient bytes all-reduced per second: busbw * n / (2(n-1))
    total_link_gbps: float = 0.0  # sum of pair bandwidths inside the group (tie-break)
    hosts: list[str] = field(default_factory=list)
    numa_domains: int = 1
    # One host and no pair crosses the SMP interconnect (no SYS path between them); None where the
    # source does not say how the GPUs are wired (a TF log alone).
    same_socket: bool | None = True
    same_host: bool = True
    numa_node: int | None = None  # the one NUMA node all GPUs sit on, None if spread or unknown
    numactl: str | None = None  # a command prefix binding CPU and memory next to the GPUs
    cuda_device_order: str = "PCI_BUS_ID"
    cuda_visible_devices: str = ""
    cuda_visible_devices_by_host: dict[str, str] | None = None  # multi-host groups only
    mirrored_strategy_devices: list[str] = field(default_factory=list)
    mirrored_strategy_devices_all_visible: list[str] = field(default_factory=list)
    strategy: str = "MirroredStrategy"  # or "OneDeviceStrategy", "MultiWorkerMirroredStrategy" (several hosts)
    cross_device_ops: str | None = None  # a tf.distribute class name: "NcclAllReduce", ...; None: none applies
    cross_device_ops_code: str | None = None  # "tf.distribute.NcclAllReduce()" (or the multi-worker strategy)
    cross_device_ops_reason: str = ""
    reason: str = ""  # why it beats the next group, one sentence
    key: tuple[int, int, int, int] = (0, 0, 0, 0)  # ranking key, centi-GB/s (internal)

    @property
    def env(self) -> dict[str, str]:
        """The environment a single-host job needs."""
        return {"CUDA_DEVICE_ORDER": self.cuda_device_order, "CUDA_VISIBLE_DEVICES": self.cuda_visible_devices}

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("key")
        data["env"] = self.env if self.same_host else None
        return data


@dataclass
class Recommendation:
    """The answer to one ask: ranked groups (best first), the split for ``--jobs``, how it was found."""

    gpus_per_group: int
    jobs_requested: int
    require: list[int]
    exclude: list[int]
    groups: list[GroupAdvice]  # best first: the pick, then alternatives
    jobs: list[GroupAdvice]  # for --jobs N: N disjoint groups (the first is groups[0] when N == 1)
    proven_optimal: bool
    search: str  # how the answer was found, in words
    jobs_proven_optimal: bool = True
    interchangeable: bool = False  # every pair has the same bandwidth (NVSwitch): any group is as good
    notes: list[str] = field(default_factory=list)
    source: str = ""
    label: str | None = None

    @property
    def best(self) -> GroupAdvice:
        return self.groups[0]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "source": self.source,
            "label": self.label,
            "request": {
                "gpus": self.gpus_per_group,
                "jobs": self.jobs_requested,
                "require": self.require,
                "exclude": self.exclude,
            },
            "groups": [g.to_dict() for g in self.groups],
            "jobs": [g.to_dict() for g in self.jobs],
            "proven_optimal": self.proven_optimal,
            "jobs_proven_optimal": self.jobs_proven_optimal,
            "search": self.search,
            "interchangeable": self.interchangeable,
            "notes": self.notes,
        }


# --- the problem as plain arrays -----------------------------------------------------------------


class _Problem:
    """Candidate GPUs as positions ``0..n-1`` with a bandwidth matrix and locality ids."""

    def __init__(self, topology: Topology, candidates: Sequence[int]):
        self.topology = topology
        self.index = list(candidates)  # position -> GPU index
        self.pos = {g: p for p, g in enumerate(self.index)}
        n = len(self.index)
        self.n = n
        links, self.tf_peer_pairs = _links_with_tf_peer_view(topology)
        gpus = {g.index: g for g in topology.gpus}
        self.links = links
        self.gpus = gpus
        self.weight = [[0] * n for _ in range(n)]  # centi-GB/s
        self.estimate_basis: dict[tuple[int, int], str] = {}
        for i in range(n):
            for j in range(i + 1, n):
                a, b = self.index[i], self.index[j]
                link = links.get((a, b))
                if link is None:
                    raise InputError(f"the topology has no link between GPU {a} and GPU {b}; cannot rank groups")
                est = estimate_link(link, gpus.get(link.a), gpus.get(link.b))
                centi = int(round(est.gbps * CENTI))
                self.weight[i][j] = self.weight[j][i] = centi
                self.estimate_basis[(a, b)] = self.estimate_basis[(b, a)] = est.basis
        hosts: dict[Any, int] = {}
        domains: dict[Any, int] = {}
        self.host_id = []
        self.domain_id = []
        for g in self.index:
            gpu = gpus[g]
            self.host_id.append(hosts.setdefault(gpu.host, len(hosts)))
            self.domain_id.append(domains.setdefault((gpu.host, numa_domain_of(gpu)), len(domains)))
        self.ring_cache: dict[tuple[int, ...], tuple[float, list[int], bool]] = {}
        self.ring_budget_hit = False
        weights = [self.weight[i][j] for i in range(n) for j in range(i + 1, n)]
        self.max_weight = max(weights) if weights else 0
        self.uniform = len(set(weights)) <= 1

    # -- worth of a group

    def ring(self, members: tuple[int, ...]) -> tuple[float, list[int]]:
        """The best ring through ``members`` (positions): (its slowest hop, the order)."""
        cached = self.ring_cache.get(members)
        if cached is not None:
            return cached[0], cached[1]
        bottleneck, order, complete = best_ring(members, self.weight)
        if not complete:
            self.ring_budget_hit = True
        self.ring_cache[members] = (bottleneck, order, complete)
        return bottleneck, order

    def key(self, members: tuple[int, ...]) -> GroupKey:
        bottleneck, _ = self.ring(members)
        return (bottleneck,) + self.locality_and_total(members)

    def locality_and_total(self, members: tuple[int, ...]) -> tuple[int, int, int]:
        """The key without the ring: (-hosts, -NUMA nodes, total pair bandwidth)."""
        w = self.weight
        total = 0
        for x, i in enumerate(members):
            row = w[i]
            for j in members[x + 1 :]:
                total += row[j]
        hosts = len({self.host_id[i] for i in members})
        domains = len({self.domain_id[i] for i in members})
        return (-hosts, -domains, total)

    def ring_ceilings(self, k: int) -> list[int]:
        """Per GPU, the fastest a ring of ``k`` through it can be: its second-fastest link (a ring
        uses two links per GPU), its fastest for a pair, unbounded for one GPU."""
        w = self.weight
        ceilings = []
        for i in range(self.n):
            links = sorted((w[i][j] for j in range(self.n) if j != i), reverse=True)
            if k == 1 or not links:
                ceilings.append(INF)
            else:
                ceilings.append(links[1] if k >= 3 and len(links) > 1 else links[0])
        return ceilings


def _links_with_tf_peer_view(topology: Topology) -> tuple[dict[tuple[int, int], Link], int]:
    """The topology's links, with TensorFlow's peer view filled in where the source did not say.

    A TF log read beside another source (``--tf-log`` with ``--from``/``--machine``/NVML) says which
    GPU pairs TF could enable peer access between. Where a link's P2P capability is unknown (pasted
    ``nvidia-smi topo -m`` text has none) and the TF GPUs join the topology's GPUs by PCI bus id, the
    link is taken as peering (``ok``) or not (``NS``) as TF found. Known capabilities stand. The
    topology itself is not changed: these are copies. Returns the links and how many were filled in."""
    links = topology.link_map()
    view = topology.tf
    if view is None or not view.peer or topology.source == "tf-log":
        return links, 0
    index_of = tf_ordinal_to_index(topology, view)
    can_peer: dict[tuple[int, int], bool] = {}
    for i, row in enumerate(view.peer):
        for j, value in enumerate(row):
            if i == j or value is None or i not in index_of or j not in index_of:
                continue
            a, b = sorted((index_of[i], index_of[j]))
            can_peer[(a, b)] = can_peer.get((a, b), True) and bool(value)
    filled = 0
    for (a, b), peers in can_peer.items():
        link = links.get((a, b))
        if link is None or link.can_peer is not None:
            continue
        word = "ok" if peers else "NS"
        seen = dataclasses.replace(link, p2p_read=word, p2p_write=word)
        links[(a, b)] = links[(b, a)] = seen
        filled += 1
    return links, filled


def numa_domain_of(gpu: Gpu) -> Any:
    """The NUMA node a GPU hangs off; its CPU affinity where the node is unknown; else ``None``."""
    if gpu.numa_node is not None and gpu.numa_node >= 0:
        return ("numa", gpu.numa_node)
    if gpu.cpu_affinity:
        return ("cpus", gpu.cpu_affinity)
    return None


# --- the best ring through a group -------------------------------------------------------------


def best_ring(members: Sequence[int], weight: Sequence[Sequence[int]]) -> tuple[int, list[int], bool]:
    """The ring (Hamiltonian cycle) through ``members`` whose slowest hop is fastest.

    Tries thresholds from the fastest pair bandwidth down: at each, keeps only the pairs at least that
    fast and looks for a cycle through all members (depth-first, remembering dead ends). The first
    threshold with a cycle is the answer. Returns ``(slowest hop, order, complete)``; ``complete`` is
    False when the step budget ran out on some threshold (the ring is then the best found).
    """
    k = len(members)
    if k == 1:
        return INF, list(members), True
    if k == 2:
        return weight[members[0]][members[1]], list(members), True
    if k == 3:
        a, b, c = members
        return min(weight[a][b], weight[b][c], weight[a][c]), list(members), True
    rows = [[weight[a][b] for b in members] for a in members]
    lowest = min(min(r[y] for y in range(k) if y != x) for x, r in enumerate(rows))
    # No ring beats any GPU's second-fastest link inside the group; start there.
    ceiling = min(sorted((r[y] for y in range(k) if y != x), reverse=True)[1] for x, r in enumerate(rows))
    if lowest == ceiling:  # every GPU can reach that speed over any ring: the identity order works
        order = _ring_at_least(rows, k, lowest)
        if order is not None:
            return lowest, [members[x] for x in order], True
    thresholds = sorted({x for r in rows for x in r if lowest <= x <= ceiling}, reverse=True)
    complete = True
    for threshold in thresholds:
        adjacency = [0] * k
        for x in range(k):
            row = rows[x]
            bits = 0
            for y in range(k):
                if x != y and row[y] >= threshold:
                    bits |= 1 << y
            adjacency[x] = bits
        if any(bin(bits).count("1") < 2 for bits in adjacency):
            continue
        order, finished = _hamiltonian_cycle(adjacency, k, RING_STEP_BUDGET)
        if not finished:
            complete = False
        if order is not None:
            return threshold, [members[x] for x in order], complete
    # The complete graph at the lowest threshold always has a cycle; only a budget stop gets here.
    return thresholds[-1], list(members), False


def _ring_at_least(rows: list[list[int]], k: int, threshold: int) -> list[int] | None:
    """The identity order if every hop of it is at least ``threshold`` (true when all pairs are)."""
    if all(rows[x][(x + 1) % k] >= threshold for x in range(k)):
        return list(range(k))
    return None


def _hamiltonian_cycle(adjacency: list[int], k: int, budget: int) -> tuple[list[int] | None, bool]:
    """A Hamiltonian cycle in the graph given as neighbour bitmasks, from vertex 0.

    Returns ``(order or None, finished)``; ``finished`` is False if the budget stopped the search."""
    full = (1 << k) - 1
    dead: set[tuple[int, int]] = set()
    path = [0]
    steps = 0

    def extend(mask: int, last: int) -> bool:
        nonlocal steps
        steps += 1
        if steps > budget:
            raise _BudgetSpent
        if mask == full:
            return bool(adjacency[last] & 1)
        if (mask, last) in dead:
            return False
        options = adjacency[last] & ~mask
        # Fewest onward choices first (Warnsdorff): dead ends show up early.
        choices = []
        while options:
            bit = options & -options
            options ^= bit
            nxt = bit.bit_length() - 1
            choices.append((bin(adjacency[nxt] & ~mask).count("1"), nxt))
        choices.sort()
        for _, nxt in choices:
            path.append(nxt)
            if extend(mask | (1 << nxt), nxt):
                return True
            path.pop()
        dead.add((mask, last))
        return False

    try:
        found = extend(1, 0)
    except _BudgetSpent:
        return None, False
    return (list(path) if found else None), True


class _BudgetSpent(Exception):
    pass


# --- twin classes and the branch-and-bound search ----------------------------------------------


def twin_classes(problem: _Problem, required: set[int]) -> list[list[int]]:
    """Positions grouped into classes of interchangeable GPUs.

    Two GPUs are twins when they have the same bandwidth to every other GPU and sit on the same host
    and NUMA node: swapping them changes no group's worth. (Twins also have the same bandwidth to
    each other as to any third twin, so the relation is an equivalence.) Required GPUs stay alone.
    """
    w = problem.weight
    buckets: dict[Any, list[int]] = {}
    for i in range(problem.n):
        if i in required:
            buckets[("required", i)] = [i]
            continue
        row = sorted(w[i][j] for j in range(problem.n) if j != i)
        buckets.setdefault((problem.host_id[i], problem.domain_id[i], tuple(row)), []).append(i)
    classes: list[list[int]] = []
    for members in buckets.values():
        reps: list[list[int]] = []
        for i in members:
            for cls in reps:
                r = cls[0]
                if all(w[i][j] == w[r][j] for j in range(problem.n) if j != i and j != r):
                    cls.append(i)
                    break
            else:
                reps.append([i])
        classes.extend(reps)
    classes.sort(key=lambda c: c[0])
    return classes


@dataclass
class _SearchResult:
    ranked: list[tuple[GroupKey, tuple[int, ...]]]
    exhausted: bool
    nodes: int
    classes: int


def search_groups(problem: _Problem, k: int, required: set[int], keep: int, node_budget: int | None) -> _SearchResult:
    """The ``keep`` best groups of ``k`` positions containing ``required`` (branch and bound).

    Walks the twin classes (strongest GPUs first), choosing how many of each to take (most first).
    Greedy groups seed the list, so pruning bites from the start. A partial group is dropped when an
    optimistic key for anything it can still become is no better than the ``keep``-th best found:

    - bottleneck <= for each chosen GPU, its 2nd-fastest link to the chosen GPUs and those still
      available (a ring uses two links per GPU; for a pair, its fastest);
    - hosts / NUMA nodes >= those used, plus the fewest more that can hold the GPUs still to add;
    - total <= what is chosen, plus the fastest link any remaining GPU has, for every pair to come.

    Every bound is optimistic, so nothing pruned could have beaten the groups kept: with no node
    budget the result is exact.
    """
    n = problem.n
    w = problem.weight
    top1 = [max((w[i][j] for j in range(n) if j != i), default=0) for i in range(n)]
    strength = problem.ring_ceilings(k)
    classes = twin_classes(problem, required)
    classes.sort(key=lambda c: (-strength[c[0]], c[0]))
    c_count = len(classes)
    class_of = {i: ci for ci, members in enumerate(classes) for i in members}

    # Suffix facts over classes[ci:]: size, GPUs per host / domain, best two links of every GPU
    # into that pool, the fastest link any pool GPU has.
    suffix_size = [0] * (c_count + 1)
    suffix_host: list[dict[int, int]] = [dict() for _ in range(c_count + 1)]
    suffix_domain: list[dict[int, int]] = [dict() for _ in range(c_count + 1)]
    suffix_top: list[list[tuple[int, int]]] = [[(-1, -1)] * n for _ in range(c_count + 1)]
    suffix_best = [0] * (c_count + 1)
    required_after = [0] * (c_count + 1)
    for ci in range(c_count - 1, -1, -1):
        members = classes[ci]
        suffix_size[ci] = suffix_size[ci + 1] + len(members)
        hosts = dict(suffix_host[ci + 1])
        domains = dict(suffix_domain[ci + 1])
        for i in members:
            hosts[problem.host_id[i]] = hosts.get(problem.host_id[i], 0) + 1
            domains[problem.domain_id[i]] = domains.get(problem.domain_id[i], 0) + 1
        suffix_host[ci] = hosts
        suffix_domain[ci] = domains
        tops = list(suffix_top[ci + 1])
        for v in range(n):
            a, b = tops[v]
            for j in members:
                if j != v:
                    x = w[v][j]
                    if x > a:
                        a, b = x, a
                    elif x > b:
                        b = x
            tops[v] = (a, b)
        suffix_top[ci] = tops
        suffix_best[ci] = max([suffix_best[ci + 1]] + [top1[i] for i in members])
        required_after[ci] = required_after[ci + 1] + sum(1 for i in members if i in required)

    ranked: list[tuple[GroupKey, tuple[int, ...]]] = []
    offered: set[tuple[int, ...]] = set()
    nodes = 0
    stopped = False

    def offer(members: tuple[int, ...]) -> None:
        if members in offered:
            return
        offered.add(members)
        key = problem.key(members)
        if len(ranked) >= keep and key <= ranked[-1][0]:
            return
        ranked.append((key, members))
        ranked.sort(key=lambda item: (_neg(item[0]), item[1]))
        del ranked[keep:]

    def optimistic(chosen: list[int], remaining: int, ci: int, total: int) -> GroupKey:
        if k == 1:
            bottleneck = INF
        elif not chosen:
            bottleneck = suffix_best[ci]
        else:
            bottleneck = INF
            tops = suffix_top[ci]
            for v in chosen:
                a, b = tops[v]
                row = w[v]
                for u in chosen:
                    if u != v:
                        x = row[u]
                        if x > a:
                            a, b = x, a
                        elif x > b:
                            b = x
                bound = b if k >= 3 else a
                if bound < bottleneck:
                    bottleneck = bound
        used_hosts = {problem.host_id[i] for i in chosen}
        used_domains = {problem.domain_id[i] for i in chosen}
        hosts = len(used_hosts) + _places_needed(remaining, suffix_host[ci], used_hosts)
        domains = len(used_domains) + _places_needed(remaining, suffix_domain[ci], used_domains)
        total_bound = total + (remaining * len(chosen) + remaining * (remaining - 1) // 2) * suffix_best[ci]
        return (bottleneck, -hosts, -domains, total_bound)

    def walk(ci: int, chosen: list[int], remaining: int, total: int) -> None:
        nonlocal nodes, stopped
        if stopped:
            return
        nodes += 1
        if node_budget is not None and nodes > node_budget and ranked:
            stopped = True  # the budget only stops a search that has an answer to give
            return
        if remaining == 0:
            if required_after[ci] == 0:
                offer(tuple(sorted(chosen)))
            return
        if ci >= c_count or suffix_size[ci] < remaining or required_after[ci] > remaining:
            return
        if len(ranked) >= keep and optimistic(chosen, remaining, ci, total) <= ranked[-1][0]:
            return
        members = classes[ci]
        must = sum(1 for i in members if i in required)
        for count in range(min(len(members), remaining), must - 1, -1):
            taken = members[:count]
            added = 0
            for x, i in enumerate(taken):
                row = w[i]
                added += sum(row[j] for j in chosen) + sum(row[j] for j in taken[x + 1 :])
            walk(ci + 1, chosen + taken, remaining - count, total + added)

    for seed in _greedy_seeds(problem, k, required, classes, class_of):
        offer(seed)
    walk(0, [], k, 0)
    return _SearchResult(ranked=ranked, exhausted=not stopped, nodes=nodes, classes=c_count)


def _greedy_seeds(
    problem: _Problem, k: int, required: set[int], classes: list[list[int]], class_of: dict[int, int]
) -> list[tuple[int, ...]]:
    """Good groups found fast, to start the search with a high bar: from one GPU of each of the
    strongest twin classes (at most ``MAX_SEEDS``), add the GPU whose slowest link into the group is
    fastest (then same host, same NUMA node, most bandwidth) until there are k. Each is rewritten in
    the canonical form the search uses (the first members of each twin class)."""
    n = problem.n
    w = problem.weight
    host, domain = problem.host_id, problem.domain_id
    seeds: list[tuple[int, ...]] = []
    for members in classes[:MAX_SEEDS]:
        group = sorted(required | {members[0]})
        if len(group) > k:
            continue
        in_group = [False] * n
        min_link = [INF] * n
        link_sum = [0] * n
        hosts: set[int] = set()
        domains: set[int] = set()

        def add(g: int) -> None:
            in_group[g] = True
            hosts.add(host[g])
            domains.add(domain[g])
            row = w[g]
            for c in range(n):
                if row[c] < min_link[c]:
                    min_link[c] = row[c]
                link_sum[c] += row[c]

        for g in group:
            add(g)
        while len(group) < k:
            best = max(
                (c for c in range(n) if not in_group[c]),
                key=lambda c: (min_link[c], host[c] in hosts, domain[c] in domains, link_sum[c], -c),
            )
            group.append(best)
            add(best)
        counts: dict[int, int] = {}
        for i in group:
            counts[class_of[i]] = counts.get(class_of[i], 0) + 1
        seeds.append(tuple(sorted(i for ci, c in counts.items() for i in classes[ci][:c])))
    return seeds


def _places_needed(remaining: int, offered: dict[int, int], used: set[int]) -> int:
    """How many more hosts (or NUMA nodes) at least ``remaining`` GPUs need: what the used ones still
    offer is filled first, then the places offering the most GPUs."""
    remaining -= sum(offered.get(place, 0) for place in used)
    if remaining <= 0:
        return 0
    extra = 0
    for size in sorted((n for place, n in offered.items() if place not in used), reverse=True):
        remaining -= size
        extra += 1
        if remaining <= 0:
            break
    return extra


def _neg(key: GroupKey) -> tuple[float, ...]:
    return tuple(-x for x in key)


# --- jobs: N disjoint groups, the worst one as good as possible ---------------------------------


def split_jobs(
    problem: _Problem, k: int, jobs: int, required: set[int]
) -> tuple[list[tuple[int, ...]], bool, str]:
    """``jobs`` disjoint groups of ``k`` positions covering ``required``; the worst group's key is
    maximised (exactly where every group can be listed, else greedily). Returns (groups, exact, how)."""
    n = problem.n
    total_groups = _comb(n, k)
    if total_groups <= JOBS_EXACT_GROUP_LIMIT:
        best = _split_jobs_exact(problem, k, jobs, required)
        if best is None:
            raise InputError(f"cannot split the GPUs into {jobs} groups of {k} that use every required GPU")
        return best, True, f"exact: all {total_groups} groups of {k} considered, the worst job's group maximised"
    # Greedy: best group, then the best of what is left, and so on.
    chosen: list[tuple[int, ...]] = []
    left = set(range(n))
    need = set(required)
    for _ in range(jobs):
        remaining_positions = sorted(left)
        local = _SubProblem(problem, remaining_positions)
        must = {local.pos_of[i] for i in sorted(need)[:k]}
        result = search_groups(local, k, must, 1, NODE_BUDGET)
        problem.ring_budget_hit = problem.ring_budget_hit or local.ring_budget_hit
        group = tuple(sorted(remaining_positions[i] for i in result.ranked[0][1]))
        chosen.append(group)
        left -= set(group)
        need -= set(group)
    return chosen, False, "greedy: the best group, then the best of the GPUs left, and so on"


def _split_jobs_exact(problem: _Problem, k: int, jobs: int, required: set[int]) -> list[tuple[int, ...]] | None:
    """The fairest split, evaluating rings lazily.

    Every group gets an optimistic key first (its ring bounded by each member's second-fastest link
    anywhere; locality and total exact). Groups are then evaluated exactly in optimistic order, in
    growing batches. Once a split is found whose worst group is at least as good as the optimistic
    key of every group not yet evaluated, no split using those could do better: it is optimal.
    Within the evaluated groups the worst group is maximised by binary search on its key (a lower
    bar never makes a split impossible)."""
    n = problem.n
    ceilings = problem.ring_ceilings(k)
    optimistic: list[tuple[GroupKey, tuple[int, ...]]] = []
    for g in itertools.combinations(range(n), k):
        optimistic.append(((min(ceilings[i] for i in g),) + problem.locality_and_total(g), g))
    optimistic.sort(key=lambda item: (_neg(item[0]), item[1]))
    evaluated: list[tuple[GroupKey, tuple[int, ...]]] = []
    done = 0
    batch = 64
    while True:
        upto = min(len(optimistic), done + batch)
        evaluated.extend((problem.key(g), g) for _, g in optimistic[done:upto])
        done = upto
        bar = optimistic[done][0] if done < len(optimistic) else None
        usable = sorted(
            ((key, g) for key, g in evaluated if bar is None or key >= bar), key=lambda item: (_neg(item[0]), item[1])
        )
        distinct = sorted({key for key, _ in usable}, reverse=True)
        best: list[tuple[int, ...]] | None = None
        lo, hi = 0, len(distinct) - 1
        while lo <= hi:
            mid = (lo + hi) // 2
            packing = _pack([g for key, g in usable if key >= distinct[mid]], n, k, jobs, required)
            if packing is not None:
                best = packing
                hi = mid - 1
            else:
                lo = mid + 1
        if best is not None or bar is None:
            return best
        batch *= 2


class _SubProblem(_Problem):
    """A view of a problem restricted to some positions (shares the bandwidth figures)."""

    def __init__(self, parent: _Problem, positions: list[int]):  # noqa: D401 - no super().__init__
        self.parent = parent
        self.n = len(positions)
        self.pos_of = {p: x for x, p in enumerate(positions)}
        self.index = [parent.index[p] for p in positions]
        self.weight = [[parent.weight[p][q] for q in positions] for p in positions]
        self.host_id = [parent.host_id[p] for p in positions]
        self.domain_id = [parent.domain_id[p] for p in positions]
        self.ring_cache = {}
        self.ring_budget_hit = False
        weights = [self.weight[i][j] for i in range(self.n) for j in range(i + 1, self.n)]
        self.max_weight = max(weights) if weights else 0
        self.uniform = len(set(weights)) <= 1


def _pack(groups: list[tuple[int, ...]], n: int, k: int, jobs: int, required: set[int]) -> list[tuple[int, ...]] | None:
    """``jobs`` disjoint groups from ``groups`` (best first) covering ``required``, or None.

    Branches on the lowest free GPU: it either starts one of the groups whose lowest member it is, or
    is left out (while there is slack and it is not required)."""
    by_lowest: dict[int, list[int]] = {}
    masks = []
    for idx, g in enumerate(groups):
        mask = 0
        for i in g:
            mask |= 1 << i
        masks.append(mask)
        by_lowest.setdefault(g[0], []).append(idx)
    required_mask = 0
    for i in required:
        required_mask |= 1 << i
    dead: set[tuple[int, int]] = set()

    def go(free: int, jobs_left: int, slack: int) -> list[int] | None:
        if jobs_left == 0:
            return [] if not (free & required_mask) else None
        if (free, jobs_left) in dead:
            return None
        low_bit = free & -free
        if not low_bit:
            return None
        v = low_bit.bit_length() - 1
        for idx in by_lowest.get(v, ()):
            if masks[idx] & free == masks[idx]:
                rest = go(free & ~masks[idx], jobs_left - 1, slack)
                if rest is not None:
                    return [idx] + rest
        if slack > 0 and not (low_bit & required_mask):
            rest = go(free & ~low_bit, jobs_left, slack - 1)
            if rest is not None:
                return rest
        dead.add((free, jobs_left))
        return None

    picked = go((1 << n) - 1, jobs, n - jobs * k)
    return None if picked is None else [groups[i] for i in picked]


def _comb(n: int, k: int) -> int:
    import math

    return math.comb(n, k) if 0 <= k <= n else 0


# --- the public function -----------------------------------------------------------------------


def recommend(
    topology: Topology,
    gpus: int,
    jobs: int = 1,
    require: Iterable[int] = (),
    exclude: Iterable[int] = (),
    alternatives: int = 3,
) -> Recommendation:
    """The best ``gpus`` GPUs of ``topology`` to train on together (plus ``alternatives`` runners-up),
    and for ``jobs > 1`` a split into that many disjoint groups where the worst is as good as possible.

    Raises ``InputError`` for asks that cannot be met (0 GPUs, more than exist, a required GPU that is
    excluded or missing, ``jobs * gpus`` more than the GPUs available).
    """
    require_list = sorted(set(int(g) for g in require))
    exclude_list = sorted(set(int(g) for g in exclude))
    known = topology.gpu_indices
    known_set = set(known)
    _check_ask(topology, gpus, jobs, require_list, exclude_list, known_set)
    candidates = [g for g in known if g not in set(exclude_list)]
    problem = _Problem(topology, candidates)
    required_pos = {problem.pos[g] for g in require_list}

    keep = max(1, alternatives + 1)
    budget = None if problem.n <= EXACT_LIMIT else NODE_BUDGET
    if jobs == 1:
        result = search_groups(problem, gpus, required_pos, keep, budget)
    else:
        # Alternatives for one group never need the required GPUs all in it; they must be in the split.
        single_required = required_pos if len(required_pos) <= gpus else set()
        result = search_groups(problem, gpus, single_required, keep, budget)
    proven = result.exhausted and not problem.ring_budget_hit
    if result.exhausted:
        search = (
            f"exact branch and bound over {problem.n} GPUs in {count_word(result.classes, 'class', 'classes')} "
            f"of interchangeable GPUs ({count_word(result.nodes, 'search node')})"
        )
    else:
        search = (
            f"bounded branch and bound over {problem.n} GPUs in {count_word(result.classes, 'class', 'classes')}: stopped after "
            f"{NODE_BUDGET} search nodes, best found, not proven optimal"
        )
    if problem.ring_budget_hit:
        search += "; some rings were too large to search completely (best ring found used)"

    groups = [_advice(problem, members, key) for key, members in result.ranked]
    for rank, group in enumerate(groups, start=1):
        group.rank = rank
    _explain_ranking(problem, groups, gpus)

    jobs_proven = True
    if jobs == 1:
        job_groups = [groups[0]]
    else:
        positions, exact, how = split_jobs(problem, gpus, jobs, required_pos)
        job_groups = [_advice(problem, g, problem.key(g)) for g in positions]
        job_groups.sort(key=lambda g: (_neg(g.key), g.gpus))
        for rank, group in enumerate(job_groups, start=1):
            group.rank = rank
            group.reason = f"job {rank} of {jobs}"
        worst = job_groups[-1]
        # Greedy is still optimal when its worst group is as good as the best single group.
        jobs_proven = (exact or (proven and worst.key == groups[0].key)) and not problem.ring_budget_hit
        worst.reason = f"job {jobs} of {jobs}, the worst group: " + (
            "no split into disjoint groups makes the worst one better"
            if jobs_proven
            else "the worst of a greedy split, not proven the fairest"
        )
        search += f"; --jobs {jobs}: {how}"

    notes = _notes(topology, problem, gpus)
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
        interchangeable=problem.uniform and 1 < gpus < problem.n,
        notes=notes,
        source=topology.source,
        label=topology.label,
    )


def _check_ask(
    topology: Topology, gpus: int, jobs: int, require: list[int], exclude: list[int], known: set[int]
) -> None:
    total = len(known)
    if total == 0:
        raise InputError("the topology lists no GPUs")
    if gpus < 1:
        raise InputError(f"--gpus must be at least 1 (got {gpus})")
    if jobs < 1:
        raise InputError(f"--jobs must be at least 1 (got {jobs})")
    for g in require + exclude:
        if g not in known:
            raise InputError(f"GPU {g} does not exist; this topology has GPUs {_ranges(sorted(known))}")
    both = sorted(set(require) & set(exclude))
    if both:
        raise InputError(f"GPU {', '.join(map(str, both))} is both required and excluded")
    if gpus > total:
        raise InputError(f"asked for {gpus} GPUs but the topology has only {total}")
    available = total - len(exclude)
    if gpus * jobs > available:
        what = f"{jobs} jobs x {gpus} GPUs = {gpus * jobs}" if jobs > 1 else f"{gpus} GPUs"
        after = " after --exclude" if exclude else ""
        raise InputError(f"asked for {what} but only {available} GPUs are available{after}")
    if len(require) > gpus * jobs:
        room = f"a group has only {gpus}" if jobs == 1 else f"{jobs} jobs of {gpus} use only {gpus * jobs}"
        raise InputError(f"{len(require)} GPUs are required but {room}")


def _ranges(values: list[int]) -> str:
    from gputopo.notation import format_cpu_list

    return format_cpu_list(values)


# --- turning a group into advice ---------------------------------------------------------------


def _advice(problem: _Problem, members: tuple[int, ...], key: GroupKey) -> GroupAdvice:
    topology = problem.topology
    gpus = [problem.index[i] for i in members]
    bottleneck_gbps, order = problem.ring(tuple(members))
    ring = [problem.index[i] for i in order]
    k = len(gpus)
    hops: list[RingHop] = []
    if k >= 2:
        pairs = list(zip(ring, ring[1:] + ring[:1])) if k > 2 else [(ring[0], ring[1])]
        for a, b in pairs:
            link = problem.links[(a, b)]
            gbps = problem.weight[problem.pos[a]][problem.pos[b]] / CENTI
            hops.append(RingHop(a, b, link.type, gbps, problem.estimate_basis[(a, b)], hop_label(link)))
    group = GroupAdvice(gpus=gpus, ring=ring, hops=hops, key=key)
    group.ring_text = "-".join(str(g) for g in ring + ring[:1]) if k > 2 else "-".join(str(g) for g in ring)
    if k >= 2:
        slowest = min(hops, key=lambda h: h.gbps)
        group.bottleneck_gbps = bottleneck_gbps / CENTI
        group.bottleneck = (
            f"{slowest.label} between GPU {slowest.a} and GPU {slowest.b}, ~{format_gbps(slowest.gbps)} GB/s"
            + (" (measured)" if slowest.basis == "measured" else "")
        )
        group.allreduce_busbw_gbps = bottleneck_gbps / CENTI
        group.allreduce_gbps = round(bottleneck_gbps / CENTI * k / (2 * (k - 1)), 2)
    else:
        group.bottleneck = "one GPU: no all-reduce between GPUs"
    group.total_link_gbps = key[3] / CENTI
    gpu_objs = [problem.gpus[g] for g in gpus]
    hosts = sorted({g.host for g in gpu_objs if g.host is not None})
    group.hosts = hosts
    group.same_host = len({g.host for g in gpu_objs}) == 1
    group.numa_domains = -key[2]
    pair_links = [problem.links[(a, b)] for a, b in itertools.combinations(gpus, 2)]
    if not group.same_host or any(_crosses_sockets(topology, link) for link in pair_links):
        group.same_socket = False
    elif any(link.type == "UNKNOWN" for link in pair_links):
        group.same_socket = None  # they can peer, but the source does not say where they sit
    else:
        group.same_socket = True
    numa_nodes = {g.numa_node for g in gpu_objs}
    affinities = {g.cpu_affinity for g in gpu_objs}
    if group.same_host and len(numa_nodes) == 1 and None not in numa_nodes and next(iter(numa_nodes)) >= 0:
        node = next(iter(numa_nodes))
        group.numa_node = node
        group.numactl = f"numactl --cpunodebind={node} --membind={node}"
    elif group.same_host and len(affinities) == 1 and None not in affinities:
        group.numactl = f"numactl --physcpubind={next(iter(affinities))}"
    number_of = cuda_numbers(topology)
    if group.same_host:
        numbers = sorted(number_of[g] for g in gpus)
        group.cuda_visible_devices = ",".join(str(n) for n in numbers)
        group.mirrored_strategy_devices = [f"/gpu:{i}" for i in range(k)]
        group.mirrored_strategy_devices_all_visible = [f"/gpu:{n}" for n in numbers]
        if hosts:  # one host of a multi-host topology: CUDA on that host numbers its GPUs from 0
            group.cuda_visible_devices_by_host = {hosts[0]: group.cuda_visible_devices}
    else:
        by_host: dict[str, list[int]] = {}
        for gpu in gpu_objs:
            by_host.setdefault(str(gpu.host), []).append(number_of[gpu.index])
        group.cuda_visible_devices_by_host = {h: ",".join(map(str, sorted(v))) for h, v in by_host.items()}
        group.cuda_visible_devices = " ".join(f"{h}:{v}" for h, v in group.cuda_visible_devices_by_host.items())
        group.mirrored_strategy_devices = []
        group.mirrored_strategy_devices_all_visible = []
    _choose_cross_device_ops(problem, group)
    return group


def hop_label(link: Link) -> str:
    """The link word users know; links read from a TF log alone only say whether TF could peer."""
    if link.type != "UNKNOWN":
        return link.type
    if link.can_peer is None:
        return "unknown"
    return "TF:P2P" if link.can_peer else "TF:no-P2P"


def _crosses_sockets(topology: Topology, link: Link) -> bool:
    """diagnose's socket judgement, plus: GPUs a TF log says cannot peer are treated as crossing."""
    if link_crosses_sockets(topology, link):
        return True
    return link.type == "UNKNOWN" and link.can_peer is False


def _peers(link: Link) -> bool | None:
    """Whether two GPUs can copy directly (P2P): the capability bits where known, else a guess
    from the path (NVLink yes; PCIe within a socket yes; across sockets no, as on Intel QPI/UPI);
    ``None`` where neither is known (a TF log that says nothing about the pair)."""
    state = link.can_peer
    if state is not None:
        return state
    if link.is_nvlink:
        return True
    if link.type == "UNKNOWN":
        return None
    return link.type in ("PIX", "PXB", "PHB", "NODE")


def _choose_cross_device_ops(problem: _Problem, group: GroupAdvice) -> None:
    """Pick MirroredStrategy's cross-device ops from what TensorFlow offers, with the reason.

    - One GPU: nothing to reduce.
    - Several hosts: MirroredStrategy is single-host; MultiWorkerMirroredStrategy with NCCL.
    - Every pair can peer: ``NcclAllReduce`` (TF's default): NCCL's rings run GPU to GPU.
    - Pairs that cannot peer, but the group splits into two halves that can, with GPU j of the first
      half peering GPU j of the second (DGX-1's wiring, the exact shape TF's
      ``HierarchicalCopyAllReduce`` was written for: it reduces inside each half, then across those
      j <-> j+half links): ``HierarchicalCopyAllReduce``.
    - Otherwise: still ``NcclAllReduce`` — NCCL notices pairs that cannot peer and stages those hops
      through host memory itself, in a ring; ``ReductionToOneDevice`` would funnel every gradient
      through one device and ``HierarchicalCopyAllReduce`` would copy across pairs that cannot peer.
    """
    gpus = group.gpus
    k = len(gpus)
    if k == 1:
        group.strategy = "OneDeviceStrategy"
        group.cross_device_ops = None
        group.cross_device_ops_code = None
        group.cross_device_ops_reason = "one GPU: MirroredStrategy has nothing to all-reduce (or use OneDeviceStrategy)"
        return
    if not group.same_host:
        group.strategy = "MultiWorkerMirroredStrategy"
        group.cross_device_ops = None  # MultiWorkerMirroredStrategy takes communication options instead
        group.cross_device_ops_code = (
            "tf.distribute.MultiWorkerMirroredStrategy(communication_options="
            "tf.distribute.experimental.CommunicationOptions(implementation="
            "tf.distribute.experimental.CommunicationImplementation.NCCL))"
        )
        group.cross_device_ops_reason = (
            "the group spans several hosts: MirroredStrategy is single-host, so run one worker per host "
            "with MultiWorkerMirroredStrategy and NCCL over the shared NVLink domain"
        )
        return
    links = problem.links
    pairs = list(itertools.combinations(gpus, 2))
    not_peering = [(a, b) for a, b in pairs if _peers(links[(a, b)]) is False]
    unknown = [(a, b) for a, b in pairs if _peers(links[(a, b)]) is None]
    if unknown and not not_peering:
        group.cross_device_ops = "NcclAllReduce"
        group.cross_device_ops_code = "tf.distribute.NcclAllReduce()"
        group.cross_device_ops_reason = (
            f"the source does not say whether pairs {pair_list(unknown, limit=4, more=' ...')} can peer; NcclAllReduce (TF's default "
            "on GPUs) suits either way: NCCL's rings run GPU to GPU where they can and stage hops through host "
            "memory where they cannot"
        )
        return
    if not not_peering:
        group.cross_device_ops = "NcclAllReduce"
        group.cross_device_ops_code = "tf.distribute.NcclAllReduce()"
        kind = "NVLink" if all(links[(a, b)].is_nvlink for a, b in itertools.combinations(gpus, 2)) else "P2P"
        group.cross_device_ops_reason = (
            f"every pair can copy directly ({kind}), so NCCL's rings run GPU to GPU; it is TF's default on GPUs"
        )
        return
    pairs_text = pair_list(not_peering, limit=4, more=' ...')
    if k % 2 == 0 and k >= 4:
        half = k // 2
        first, second = gpus[:half], gpus[half:]
        halves_peer = all(_peers(links[(a, b)]) is True for part in (first, second) for a, b in itertools.combinations(part, 2))
        cross_peer = all(_peers(links[(first[j], second[j])]) is True for j in range(half))
        if halves_peer and cross_peer:
            group.cross_device_ops = "HierarchicalCopyAllReduce"
            group.cross_device_ops_code = "tf.distribute.HierarchicalCopyAllReduce()"
            group.cross_device_ops_reason = (
                f"pairs {pairs_text} cannot peer, but GPUs {_ranges(first)} and {_ranges(second)} can among "
                f"themselves and GPU j of one half reaches GPU j of the other directly: the DGX-1 shape "
                f"HierarchicalCopyAllReduce was built for (reduce in each half, then across those links); "
                f"NcclAllReduce is the close alternative"
            )
            return
    group.cross_device_ops = "NcclAllReduce"
    group.cross_device_ops_code = "tf.distribute.NcclAllReduce()"
    group.cross_device_ops_reason = (
        f"pairs {pairs_text} cannot peer; NCCL notices and stages those hops through host memory itself, still "
        f"as a ring, which beats ReductionToOneDevice (every gradient through one device) and "
        f"HierarchicalCopyAllReduce (built for DGX-1); if NCCL is unavailable (Windows) use "
        f"tf.distribute.ReductionToOneDevice(reduce_to_device='/cpu:0')"
    )


def _explain_ranking(problem: _Problem, groups: list[GroupAdvice], k: int) -> None:
    """One sentence per group: why it beats the next one."""
    for x, group in enumerate(groups):
        if x + 1 >= len(groups):
            if x:
                group.reason = "the last alternative listed"
            elif k == problem.n:
                group.reason = "the only possible group: every available GPU"
            else:
                group.reason = "the only group asked for"
            if problem.uniform and 1 < k < problem.n and x == 0:
                group.reason = "every pair has the same bandwidth: any group of this size is as good"
            continue
        nxt = groups[x + 1]
        if group.key != nxt.key:
            group.reason = _why_better(group, nxt)
            continue
        group.reason = f"as good as {gpu_set(nxt.gpus)} in every respect; listed first for its lower GPU numbers"
        # Say too what it beats: the first listed group that is worse, if any.
        worse = next((g for g in groups[x + 2 :] if g.key != group.key), None)
        if worse is not None:
            group.reason += f"; better than {gpu_set(worse.gpus)}: " + _why_better(group, worse, name_worse=False)


def _why_better(group: GroupAdvice, worse: GroupAdvice, name_worse: bool = True) -> str:
    """Why ``group`` ranks above ``worse`` (their keys differ): the first key element that differs."""
    a, b = group.key, worse.key
    if a[0] != b[0]:
        return (
            f"its slowest ring hop is ~{format_gbps(a[0] / CENTI)} GB/s ({group.bottleneck.split(' between')[0]}) against "
            f"~{format_gbps(b[0] / CENTI)} GB/s ({worse.bottleneck.split(' between')[0]})"
            + (f" for {gpu_set(worse.gpus)}" if name_worse else "")
        )
    same = "same slowest hop" + (f" as {gpu_set(worse.gpus)}" if name_worse else "")
    if a[1] != b[1]:
        return f"{same}, but on {count_word(-a[1], 'host')} instead of {-b[1]}"
    if a[2] != b[2]:
        return (
            f"{same}, but on {count_word(-a[2], 'NUMA node')} instead of {-b[2]}, "
            f"keeping the input pipeline next to the GPUs"
        )
    return (
        f"{same}, but more link bandwidth inside the group "
        f"({format_gbps(a[3] / CENTI)} against {format_gbps(b[3] / CENTI)} GB/s summed over pairs) for NCCL's extra rings"
    )


def _notes(topology: Topology, problem: _Problem, k: int) -> list[str]:
    notes: list[str] = []
    if problem.uniform and k > 1 and problem.n > k and all(link.type == "UNKNOWN" for link in topology.links):
        notes.append(
            "The source does not tell the links apart (every pair looks the same), so any group looks as good; "
            "run `gputopo scan` on the host, or bench-p2p, for a real answer."
        )
    elif problem.uniform and k > 1 and problem.n > k:
        nvswitch = all(link.nvswitch for link in topology.links)
        notes.append(
            ("Every pair is linked through NVSwitch" if nvswitch else "Every pair has the same bandwidth")
            + f" (~{format_gbps(problem.max_weight / CENTI)} GB/s): any {k} GPUs are as good for all-reduce; "
            "the pick only keeps them close to one CPU."
        )
    if topology.source == "tf-log":
        pci_numbers = pci_order_numbers(topology)
        if pci_numbers:
            moved = [f"GPU:{i} is {n}" for i, n in sorted(pci_numbers.items()) if i != n]
            notes.append(
                "GPU numbers are TensorFlow's ordinals from the log; CUDA_VISIBLE_DEVICES (with "
                "CUDA_DEVICE_ORDER=PCI_BUS_ID) lists them in PCI bus order, from the log's bus ids"
                + (f" ({', '.join(moved)} there)" if moved else "")
                + ", which is nvidia-smi's numbering when the log shows every GPU of the machine."
            )
        else:
            notes.append(
                "GPU numbers are TensorFlow's ordinals from the log; they match nvidia-smi's numbers only when "
                "the log was written with CUDA_DEVICE_ORDER=PCI_BUS_ID."
            )
    if topology.is_reference:
        notes.append("This is a reference machine from public facts, not this host.")
    if problem.tf_peer_pairs:
        notes.append(
            f"{problem.tf_peer_pairs} pair(s) without P2P facts in the topology use TensorFlow's peer view from the log."
        )
    measured = sum(1 for basis in problem.estimate_basis.values() if basis == "measured") // 2
    if measured:
        notes.append(f"{measured} pair(s) use bench-p2p measurements instead of estimates.")
    return notes


def brute_force_best_key(topology: Topology, gpus: int, require: Iterable[int] = (), exclude: Iterable[int] = ()) -> GroupKey:
    """The best key over every group, found the slow way (every subset, every ring order).

    Independent of the search above (shares only the bandwidth figures); used by tests and the
    benchmark to check that the search is exact."""
    return brute_force_keys(topology, gpus, require, exclude)[0]


def brute_force_keys(
    topology: Topology, gpus: int, require: Iterable[int] = (), exclude: Iterable[int] = ()
) -> list[GroupKey]:
    """Every group's key, best first, found the slow way (see ``brute_force_best_key``)."""
    excluded = set(exclude)
    required = set(require)
    problem = _Problem(topology, [g for g in topology.gpu_indices if g not in excluded])
    w = problem.weight
    keys: list[GroupKey] = []
    for members in itertools.combinations(range(problem.n), gpus):
        if not required <= {problem.index[i] for i in members}:
            continue
        if gpus == 1:
            bottleneck = INF
        elif gpus == 2:
            bottleneck = w[members[0]][members[1]]
        else:
            first, rest = members[0], members[1:]
            bottleneck = max(
                min(w[a][b] for a, b in zip((first,) + perm, perm + (first,)))
                for perm in itertools.permutations(rest)
            )
        total = sum(w[a][b] for a, b in itertools.combinations(members, 2))
        key = (
            bottleneck,
            -len({problem.host_id[i] for i in members}),
            -len({problem.domain_id[i] for i in members}),
            total,
        )
        keys.append(key)
    keys.sort(reverse=True)
    return keys
