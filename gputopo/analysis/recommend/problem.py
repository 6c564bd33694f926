"""The matrix the search sees: candidate GPUs as positions ``0..n-1``, the bandwidth of every pair
in hundredths of a GB/s, and which host and NUMA node each sits on.

``Problem.from_topology`` builds it from a ``Topology`` (bandwidths from ``analysis.expect.bandwidth``, with
TensorFlow's peer view filled in where the topology has no P2P facts); ``Problem.restricted`` is the
same problem on fewer positions. A group's key, ``(bottleneck, -hosts, -locality, total)``, is
computed here; the best ring itself comes from ``ring``.

Locality is the NUMA node count, unless the source knows more that can order groups the count ties:
a CPU socket holding several NUMA nodes (sockets from NVML's sysfs reading or a reference machine)
or NUMA nodes at several distances. Then it is ``LocalityRank.encode``: sockets first, then NUMA
nodes, then the farthest NUMA distance inside the group, in one integer never below the NUMA node
count (so the search's optimistic bound on it stays optimistic, if looser).
"""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any, Sequence

from gputopo.analysis.recommend.budget import Budget
from gputopo.analysis.recommend.result import GroupKey
from gputopo.analysis.recommend.ring import INF, best_ring
from gputopo.analysis.recommend.weights import CENTI, UNHEALTHY_DIVISOR, pair_weights  # noqa: F401 - re-exported
from gputopo.model import Gpu, Link, Topology
from gputopo.numbering import tf_ordinal_to_index

LOCALITY_SCALE = 1000  # one "digit" of the encoded locality: sockets, NUMA nodes, NUMA distance


@dataclasses.dataclass(frozen=True)
class LocalityRank:
    """Where a group sits, worst last: CPU sockets (0: not known), NUMA nodes, farthest distance."""

    sockets: int
    numa_nodes: int
    distance: int = 0  # the largest kernel NUMA distance between the group's nodes; 0: not known

    def encode(self, scaled: bool) -> int:
        if not scaled:
            return self.numa_nodes
        return (self.sockets * LOCALITY_SCALE + self.numa_nodes) * LOCALITY_SCALE + min(self.distance, LOCALITY_SCALE - 1)

    @classmethod
    def decode(cls, value: int, scaled: bool) -> LocalityRank:
        if not scaled:
            return cls(0, value)
        return cls(value // LOCALITY_SCALE**2, value // LOCALITY_SCALE % LOCALITY_SCALE, value % LOCALITY_SCALE)


class Problem:
    """Candidate GPUs as positions ``0..n-1`` with a bandwidth matrix and locality ids.

    ``index[p]`` is the GPU at position ``p``; ``weight[p][q]`` the pair's bandwidth in centi-GB/s
    (``weight[q][p]`` the same: the matrix is symmetric, 0 on the diagonal);
    ``host_id`` / ``domain_id`` small integers naming each position's host and NUMA node. The
    topology facts (``topology``, ``links``, ``gpus``, ``estimate_basis``, ``tf_peer_pairs``) are there
    for turning groups into advice; a restricted problem shares them with its parent.
    """

    def __init__(
        self,
        index: Sequence[int],
        weight: list[list[int]],
        host_id: list[int],
        domain_id: list[int],
        *,
        topology: Topology | None = None,
        links: Any = None,  # a mapping from either order of a pair to its link (LinkLookup, a dict)
        gpus: dict[int, Gpu] | None = None,
        estimate_basis: Any = None,  # a Mapping (a, b) -> "measured" / "estimated" / "assumed"
        tf_peer_pairs: int = 0,
        measured_pairs: int = 0,
        socket_id: list[int | None] | None = None,
        numa_node: list[int | None] | None = None,
        budget: Budget | None = None,
        measured: dict[tuple[int, int], tuple[int, float]] | None = None,
        noise: dict[str, float] | None = None,
        held: dict[int, str] | None = None,
        today_gpus: frozenset[int] | None = None,
    ):
        self.index = list(index)  # position -> GPU index
        self.pos = {g: p for p, g in enumerate(self.index)}
        self.n = len(self.index)
        self.weight = weight
        self.host_id = host_id
        self.domain_id = domain_id
        self.topology = topology
        self.links = links if links is not None else {}
        self.gpus = gpus if gpus is not None else {}
        self.estimate_basis = estimate_basis if estimate_basis is not None else {}
        self.tf_peer_pairs = tf_peer_pairs
        self.measured_pairs = measured_pairs  # candidate pairs ranked by a measurement
        # A measured pair's own figure and noise, by GPU numbers ((a, b) both orders): ``weight``
        # holds the figure of its noise class (``weights.ranking_figures``); ``noise``: per tool.
        self.measured = measured if measured is not None else {}
        self.noise = noise if noise is not None else {}
        # GPUs whose memory another process held when a source last saw them (a TF log's figures: a
        # past state, weaker than NVML's live one), with why: ties go to groups without them.
        self.held = held if held is not None else {}
        # What ``today`` keeps: each pair today, the GPUs whose pairs may differ today, tie-breaks.
        self.today_cache: dict[tuple[int, int], Any] = {}
        self.today_differs: frozenset[int] | None = today_gpus  # (None: found when first asked)
        self.tiebreak_cache: dict[tuple[int, ...], tuple[int, int]] = {}
        # Sockets ((host, socket) ids) and NUMA node numbers per position, where the source knows them.
        self.socket_id = socket_id if socket_id is not None else [None] * len(self.index)
        self.numa_node = numa_node if numa_node is not None else [None] * len(self.index)
        distances = topology.numa_distances if topology is not None else None
        self.distance = distances or {}
        self.locality_scaled = self._locality_beyond_numa_count()
        self.ring_cache: dict[tuple[int, ...], tuple[int, list[int], bool]] = {}
        self.ring_budget_hit = False
        self.budget = budget if budget is not None else Budget()  # shared by every search over this problem
        # The distinct figures of the pairs (each pair once), fastest first.
        self.speeds = sorted(set(itertools.chain.from_iterable(row[i + 1 :] for i, row in enumerate(weight))), reverse=True)
        self.max_weight = self.speeds[0] if self.speeds else 0
        # Every pair has the same bandwidth -- as far as the source tells: links it does not name
        # (a TF log alone: UNKNOWN) get one assumed figure each, which makes them look alike.
        # Every pair measured tells the pairs apart too (their figures, not their links, rank them).
        self.all_measured = self.n > 1 and len(self.measured) >= self.n * (self.n - 1) and all(
            (a, b) in self.measured for x, a in enumerate(self.index) for b in self.index[x + 1 :])
        self.links_known = (topology is None or "UNKNOWN" not in topology.link_table().kind_fact("type")
                            or self.all_measured)
        self.uniform = len(self.speeds) <= 1

    @classmethod
    def from_topology(cls, topology: Topology, candidates: Sequence[int], budget: Budget | None = None,
                      held: dict[int, str] | None = None) -> Problem:
        """The problem over ``candidates`` (GPU indices) of ``topology``; ``InputError`` if a pair has
        no link."""
        index = list(candidates)
        links, tf_peer_pairs = links_with_tf_peer_view(topology)
        gpus = {g.index: g for g in topology.gpus}
        weights = pair_weights(topology, index, links, gpus, tf_peer_pairs)  # centi-GB/s
        hosts: dict[Any, int] = {}
        domains: dict[Any, int] = {}
        sockets: dict[Any, int] = {}
        host_id = []
        domain_id = []
        for g in index:
            gpu = gpus[g]
            host_id.append(hosts.setdefault(gpu.host, len(hosts)))
            domain_id.append(domains.setdefault((gpu.host, numa_domain_of(gpu)), len(domains)))
        socket_id = [None if gpus[g].socket is None else sockets.setdefault((gpus[g].host, gpus[g].socket), len(sockets))
                     for g in index]
        return cls(
            index, weights.weight, host_id, domain_id, topology=topology, links=links, gpus=gpus,
            estimate_basis=weights.basis, tf_peer_pairs=tf_peer_pairs, measured_pairs=weights.measured_pairs,
            socket_id=socket_id, numa_node=[gpus[g].numa_node for g in index], budget=budget,
            measured=weights.measured, noise=weights.noise, held=held, today_gpus=weights.today_gpus,
        )

    def restricted(self, positions: Sequence[int]) -> Problem:
        """The same problem on ``positions`` only (renumbered ``0..len-1`` in that order), sharing the
        topology facts and the budget; its ring cache starts empty."""
        positions = list(positions)
        return Problem(
            [self.index[p] for p in positions],
            [[self.weight[p][q] for q in positions] for p in positions],
            [self.host_id[p] for p in positions],
            [self.domain_id[p] for p in positions],
            topology=self.topology, links=self.links, gpus=self.gpus,
            estimate_basis=self.estimate_basis, tf_peer_pairs=self.tf_peer_pairs, measured_pairs=self.measured_pairs,
            socket_id=[self.socket_id[p] for p in positions], numa_node=[self.numa_node[p] for p in positions],
            budget=self.budget, measured=self.measured, noise=self.noise, held=self.held,
            today_gpus=self.today_differs,
        )

    def own_figure(self, a: int, b: int) -> tuple[int, float]:
        """GPUs ``a`` and ``b``'s own figure (centi-GB/s; measured, not its noise class's) and the
        noise assumed of it (0: an estimate, exact)."""
        found = self.measured.get((a, b))
        return found if found is not None else (self.weight[self.pos[a]][self.pos[b]], 0.0)

    # -- worth of a group

    def ring(self, members: tuple[int, ...]) -> tuple[int, list[int]]:
        """The best ring through ``members`` (positions): (its slowest hop, the order)."""
        cached = self.ring_cache.get(members)
        if cached is not None:
            return cached[0], cached[1]
        bottleneck, order, complete = best_ring(members, self.weight, self.budget)
        if not complete:
            self.ring_budget_hit = True
        self.ring_cache[members] = (bottleneck, order, complete)
        return bottleneck, order

    def key(self, members: tuple[int, ...]) -> GroupKey:
        bottleneck, _ = self.ring(members)
        return (bottleneck,) + self.locality_and_total(members)

    def locality_and_total(self, members: tuple[int, ...]) -> tuple[int, int, int]:
        """The key without the ring: (-hosts, -locality, total pair bandwidth)."""
        w = self.weight
        self.budget.spend(1 + len(members) * len(members) // 2)
        total = 0
        for x, i in enumerate(members):
            row = w[i]
            for j in members[x + 1 :]:
                total += row[j]
        hosts = len({self.host_id[i] for i in members})
        return (-hosts, -self.locality(members).encode(self.locality_scaled), total)

    def _locality_beyond_numa_count(self) -> bool:
        """Whether sockets or distances can order groups the NUMA node count ties: a known socket
        holding several NUMA nodes (EPYC NPS2/4, Intel SNC), or NUMA nodes at two or more different
        distances. Elsewhere the count alone is the locality (and the search's bound stays tight)."""
        per_socket: dict[int, set[int]] = {}
        for socket, domain in zip(self.socket_id, self.domain_id):
            if socket is not None:
                per_socket.setdefault(socket, set()).add(domain)
        if any(len(domains) > 1 for domains in per_socket.values()):
            return True
        nodes = {str(n) for n in self.numa_node if n is not None}
        apart = {d for a in nodes for b, d in self.distance.get(a, {}).items() if b in nodes and b != a}
        return len(apart) > 1

    def locality(self, members: Sequence[int]) -> LocalityRank:
        """Sockets (where every member's is known), NUMA nodes, and the farthest NUMA distance
        between members (where the kernel's distances are known)."""
        domains = len({self.domain_id[i] for i in members})
        socket_ids = {self.socket_id[i] for i in members}
        sockets = 0 if None in socket_ids else len(socket_ids)
        distance = 0
        if self.distance:
            nodes = sorted({self.numa_node[i] for i in members if self.numa_node[i] is not None})
            row = self.distance
            distance = max((row.get(str(a), {}).get(str(b), 0) for a in nodes for b in nodes), default=0)
        return LocalityRank(sockets, domains, distance)

    def rank_of_key(self, key: GroupKey) -> LocalityRank:
        """The locality a group's key says (see ``LocalityRank``)."""
        return LocalityRank.decode(-key[2], self.locality_scaled)

    def ring_ceilings(self, k: int) -> list[int]:
        """Per GPU, the fastest a ring of ``k`` through it can be: its second-fastest link (a ring
        uses two links per GPU), its fastest for a pair, unbounded for one GPU."""
        w = self.weight
        ceilings = []
        for i in range(self.n):
            links = sorted(w[i][:i] + w[i][i + 1 :], reverse=True)
            if k == 1 or not links:
                ceilings.append(INF)
            else:
                ceilings.append(links[1] if k >= 3 and len(links) > 1 else links[0])
        return ceilings


def negated_key(key: GroupKey) -> tuple[int, ...]:
    """Sort by ``(negated_key(key), members)``: best first, ties by the lowest positions."""
    return tuple(-x for x in key)


class LinkLookup:
    """``links[(a, b)]`` (either order, ``get``, ``in``) of a topology, found by the place its link
    table gives (``LinkTable.position``), not in a map of every pair in both orders: a 576-GPU
    domain's would hold 331,200 keys, and the search asks for the links of a few groups' hops. The
    answer is ``Topology.link``'s, which is asked where the table's link is not that pair's."""

    def __init__(self, topology: Topology):
        self.topology = topology

    def __getitem__(self, pair: tuple[int, int]) -> Link:
        found = self.get(pair)
        return found if found is not None else self.topology.link(*pair)  # (its KeyError, worded)

    def get(self, pair: tuple[int, int], default: Any = None) -> Any:
        a, b = pair
        position = self.topology.link_table().position(a, b)
        if position is None:
            return default
        link = self.topology.links[position]
        if (link.a, link.b) == ((a, b) if a < b else (b, a)):
            return link
        try:  # listed as b-a, or changed in place since the table was made: the topology's own index
            return self.topology.link(a, b)
        except KeyError:
            return default

    def __contains__(self, pair: object) -> bool:
        return isinstance(pair, tuple) and len(pair) == 2 and self.get(pair) is not None


def links_with_tf_peer_view(topology: Topology) -> tuple[Any, int]:
    """The topology's links, with TensorFlow's peer view filled in where the source did not say.

    A TF log read beside another source (``--tf-log`` with ``--from``/``--machine``/NVML) says which
    GPU pairs TF could enable peer access between. Where a link's P2P capability is unknown (pasted
    ``nvidia-smi topo -m`` text has none) and the TF GPUs join the topology's GPUs by PCI bus id, the
    link is taken as peering (``ok``) or not (``NS``) as TF found. Known capabilities stand. The
    topology itself is not changed: these are copies. Returns the links (a mapping from either order
    of a pair) and how many were filled in."""
    view = topology.tf
    if view is None or not view.peer or topology.source == "tf-log":
        return LinkLookup(topology), 0
    links = dict(topology.link_map())  # the topology's shared map is read-only: these links are copies
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
