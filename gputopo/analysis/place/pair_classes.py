"""Classes of equivalent GPU pairs: the same link word, the same NUMA relation, the same switch (and
host). Pairs of one class should copy at the same speed, so ``bench-p2p --quick`` measures one pair
per class (and one per GPU, so that a single bad link still shows) and infers the others from it.

Pure functions over a ``Topology``; the classes use what ``recommend`` ranks pairs by: the link
word and its PCIe path (which switch or bridge the pair shares: PIX one PCIe switch, PXB several,
PHB one host bridge, NODE/SYS none), whether the NVLinks go through NVSwitch, and the NUMA
relation (``locality.same_numa_side``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.analysis.place.locality import same_numa_side
from gputopo.model import Topology

NUMA_WORDS = {True: "same NUMA node", False: "different NUMA nodes", None: "NUMA relation not known"}


@dataclass(frozen=True)
class PairKey:
    """What makes two pairs equivalent."""

    link_type: str
    pcie_path: str | None
    nvswitch: bool | None
    same_numa: bool | None
    same_host: bool

    def label(self) -> str:
        """``NV18 through NVSwitch, different NUMA nodes`` in words."""
        words = [self.link_type]
        if self.nvswitch:
            words[0] += " through NVSwitch"
        if self.pcie_path and self.pcie_path != self.link_type:
            words[0] += f" (PCIe path {self.pcie_path})"
        words.append(NUMA_WORDS[self.same_numa])
        if not self.same_host:
            words.append("different hosts")
        return ", ".join(words)


@dataclass
class PairClass:
    """Equivalent pairs (``a < b``), in the topology's order."""

    key: PairKey
    pairs: list[tuple[int, int]] = field(default_factory=list)


def pair_key(topology: Topology, a: int, b: int) -> PairKey:
    """The class of the pair ``a``-``b``; a pair the topology has no link for is ``UNKNOWN``."""
    gpu_a, gpu_b = topology.gpu(a), topology.gpu(b)
    try:
        link = topology.link(a, b)
    except KeyError:
        return PairKey("UNKNOWN", None, None, None, gpu_a.host == gpu_b.host)
    return PairKey(link.type, link.pcie_path, link.nvswitch, same_numa_side(topology, gpu_a, gpu_b),
                   gpu_a.host == gpu_b.host)


def pair_classes(topology: Topology | None, indices: list[int]) -> list[PairClass]:
    """The pairs of ``indices`` grouped into classes (first seen first). Without a topology, or for
    GPUs it does not have, every pair is in one class of unknown pairs."""
    known = {g.index for g in topology.gpus} if topology is not None else set()
    classes: dict[PairKey, PairClass] = {}
    unknown = PairKey("UNKNOWN", None, None, None, True)
    for i, a in enumerate(indices):
        for b in indices[i + 1:]:
            lo, hi = min(a, b), max(a, b)
            key = pair_key(topology, lo, hi) if topology is not None and lo in known and hi in known else unknown
            classes.setdefault(key, PairClass(key)).pairs.append((lo, hi))
    return list(classes.values())
