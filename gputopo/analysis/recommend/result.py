"""What ``recommend`` answers: the groups, their rings and TF advice, and their versioned JSON.

Plain data only; ``advice`` fills a ``GroupAdvice`` in, ``explain`` writes its ``reason``, and the
package's ``recommend`` puts them into a ``Recommendation``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gputopo.model import plain_data

SCHEMA = "gputopo.recommendation/1"

GroupKey = tuple[int, int, int, int]  # (bottleneck, -hosts, -numa nodes, total) in centi-GB/s


@dataclass
class RingHop:
    """One hop of the all-reduce ring: the link and what it carries per direction."""

    a: int
    b: int
    link_type: str  # nvidia-smi's word, or UNKNOWN (TF log only)
    gbps: float
    basis: str  # "measured", "estimated", or "assumed" (the low end of a range: a fact is not in the source)
    label: str = ""  # the word to show: the link type, or "TF:P2P" / "TF:no-P2P" for UNKNOWN links
    # How NCCL connects the pair at its P2P level (``Recommendation.nccl_p2p_level``): "P2P", "SHM"
    # (through host memory); None where the source says nothing of the link (a TF log's unnamed pair).
    transport: str | None = None
    # Where the group's ring has a hop whose P2P is broken until a fix (``GroupAdvice.p2p_broken_pairs``),
    # ``gbps`` is the healthy state's figure, what the hop carries once fixed; this is what it carries
    # today with the group's ``env``: with NCCL_P2P_DISABLE=1 where advised (every hop through host
    # memory: the tool's staged copies where measured, else the staged estimate), else with P2P as it
    # is (the measured figure); its basis "measured", "estimated" or "assumed" (the low end of a
    # range). None where no hop of the ring is broken.
    until_fixed_gbps: float | None = None
    until_fixed_basis: str | None = None


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
    # The same two today, until the group's broken P2P is fixed (with its ``env``): from the hops'
    # ``until_fixed_gbps``; None where no hop is broken (the figures above are what it gets).
    allreduce_busbw_until_fixed_gbps: float | None = None
    allreduce_until_fixed_gbps: float | None = None
    total_link_gbps: float = 0.0  # sum of pair bandwidths inside the group (tie-break)
    hosts: list[str] = field(default_factory=list)
    # NUMA nodes the group spans, counting only GPUs whose node the source gives where some of the
    # group's do and some do not (a paste cut short): ``numa_unknown_gpus`` are the others.
    numa_domains: int = 1
    numa_unknown_gpus: list[int] = field(default_factory=list)
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
    key: GroupKey = (0, 0, 0, 0)  # ranking key, centi-GB/s (internal)
    slowest_hop: RingHop | None = None  # the hop ``bottleneck`` describes; None for one GPU (internal)
    # Pairs of the group whose P2P path is broken today, until a fix: measured slower with P2P than
    # staged, or under doctor's ACS redirect / IOMMU finding and not measured against staged copies
    # (those also in ``p2p_inferred_pairs``: likely broken, an inference). A pair the user's measurement
    # shows copying with P2P at least as fast as staged is not broken, whatever a finding says: it is
    # in ``p2p_cleared_pairs`` where a finding covers it.
    p2p_broken_pairs: list[tuple[int, int]] = field(default_factory=list)
    p2p_inferred_pairs: list[tuple[int, int]] = field(default_factory=list)
    p2p_cleared_pairs: list[tuple[int, int]] = field(default_factory=list)
    # NCCL_P2P_DISABLE=1 until the fix, for this group: only where it makes the group's ring faster
    # today (a broken hop on the ring, and its staged copies beat P2P as it is, beyond the noise).
    p2p_disable_advised: bool = False
    p2p_caveat: str = ""

    @property
    def env(self) -> dict[str, str]:
        """The environment a single-host job needs (with ``NCCL_P2P_DISABLE=1`` where it is advised
        for the group, ``p2p_disable_advised``: NCCL then copies through host memory, which is faster
        on its ring today and never takes the redirected path)."""
        env = {"CUDA_DEVICE_ORDER": self.cuda_device_order, "CUDA_VISIBLE_DEVICES": self.cuda_visible_devices}
        if self.p2p_disable_advised:
            env["NCCL_P2P_DISABLE"] = "1"
        return env

    def to_dict(self) -> dict[str, Any]:
        data = plain_data(self)
        data.pop("key")
        data.pop("slowest_hop")  # already in "hops" and "bottleneck"
        data["env"] = self.env if self.same_host else None
        data["numactl"] = self.numactl.split() if self.numactl else []  # a list, as in train and plans (docs/json.md)
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
    busy: dict[int, list[str]] = field(default_factory=dict)  # GPUs in use (NVML's live state) and why
    skipped_busy: list[int] = field(default_factory=list)  # of those, the ones left out of the ask
    busy_as_of: str | None = None  # when that live state was read (UTC, ISO 8601); None: not recorded
    # Measured pairs whose figures were set aside (P2P slower than staged: a fault to fix), ranked on
    # the healthy state; empty where none.
    measurements_set_aside: list[tuple[int, int]] = field(default_factory=list)
    # The noise assumed of each tool's measured figures (a share: 0.05 is 5%): figures closer than it
    # rank as equal. Empty where nothing measured ranks (estimates are exact).
    measurement_noise: dict[str, float] = field(default_factory=dict)
    search_steps: int = 0  # the work the call spent, in the budget's steps (``budget``)
    search_budget: int = 0  # the steps it was allowed
    search_stopped: bool = False  # the budget ran out: the groups are the best found, not proven
    budget_note: str | None = None  # that, in words (also first in ``notes``), for every screen showing the plan
    # NCCL's P2P level the figures assume ({"level", "source": "nccl-log" | "default", "assumption"}):
    # pairs beyond it are figured through host memory (SHM), as NCCL connects them.
    nccl_p2p_level: dict[str, Any] = field(default_factory=dict)
    # GPUs whose memory another process held when a TF log was written (a past state, weaker than
    # ``busy``), with why: ranked after the others where groups tie, never left out.
    memory_held: dict[int, str] = field(default_factory=dict)

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
            "search_steps": self.search_steps,
            "search_budget": self.search_budget,
            "search_stopped": self.search_stopped,
            "interchangeable": self.interchangeable,
            "notes": self.notes,
            "busy": {str(gpu): reasons for gpu, reasons in sorted(self.busy.items())},
            "skipped_busy": self.skipped_busy,
            "busy_as_of": self.busy_as_of,
            "measurements_set_aside": {
                "pairs": [list(pair) for pair in self.measurements_set_aside],
                "why": "p2p-slower-than-staged",
                "ranked_on": "healthy-state",
                "until_fixed_env": {"NCCL_P2P_DISABLE": "1"},
            } if self.measurements_set_aside else None,
            "measurement_noise": dict(sorted(self.measurement_noise.items())),
            "nccl_p2p_level": self.nccl_p2p_level or None,
            "memory_held": {str(gpu): why for gpu, why in sorted(self.memory_held.items())},
        }
