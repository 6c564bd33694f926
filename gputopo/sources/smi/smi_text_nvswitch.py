"""Whether the NVLinks in ``nvidia-smi topo -m`` text go through NVSwitch: inferred, or unknown.

The text says ``NV12`` or ``NV18`` for a pair, not whether the links end at the peer or at a switch.
What the pattern proves:

- NVSwitch (``True``): some GPU shows more NVLinks to its peers, summed, than any NVIDIA GPU has
  (18): eight GPUs with NV12 to each of seven peers (84 links) sit on NVSwitches, as HGX/DGX A100,
  H100, B200 boards do, and so do four with NV18 to each of three (54 links: a GB200 tray, or four
  GPUs of a larger NVSwitch box). Other pairs may show PCIe only: a GPU of such a board whose
  NVLinks are down (or that is left out of the fabric) reaches its peers over PCIe, and its peers
  still reach each other through the switches. diagnose says it is inferred.
- point-to-point (``False``): some pairs NVLinked and others only over PCIe, with link counts no
  switch system shows (a bridge pair, the DGX-1 cube mesh: a switch would join them all), or every
  pair with the same few links that add up to what one GPU has and that no switch system shows
  (NV4 to each of three peers, an NV2 bridge).
- unknown (``None``): anything else, e.g. two GPUs with NV12 (a bridged PCIe pair or two GPUs of an
  HGX board), pairs with NV12 and PCIe between them (bridged pairs, or two-GPU partitions of a
  switch), or three with NV6 to each other (12 links: direct or through a switch).
"""

from __future__ import annotations

import operator
from collections import Counter

from gputopo.model import Link, Topology

MOST_NVLINKS_PER_GPU = 18  # H100, B200: the most NVLinks any NVIDIA GPU has
# What nvidia-smi shows between two GPUs of an NVSwitch system: every link of the GPU goes to the
# switches (DGX-2 V100: NV6, A100: NV12, H100/B200/GB200: NV18).
SWITCH_LINK_COUNTS = (6, 12, 18)


def nvswitch_pattern(topology: Topology) -> bool | None:
    """What the NVLink pattern of ``topology`` proves about NVSwitch (see the module's words)."""
    gpu_count = len(topology.gpus)
    links = topology.links
    if "UNKNOWN" in set(map(operator.attrgetter("type"), links)):  # pairs a cut paste does not show
        links = [link for link in links if link.type != "UNKNOWN"]
    counts = list(map(operator.attrgetter("nvlink_count"), links))
    if not counts or not any(counts):
        return False  # no NVLink at all
    same = len(set(counts)) == 1
    if max(_nvlinks_per_gpu(topology, links, counts[0] if same else None)) > MOST_NVLINKS_PER_GPU:
        return True  # more NVLinks than a GPU has: they end at switches (a GPU without any is a fault)
    if not all(counts):  # NVLinks to some peers, PCIe to others
        return None if any(count in SWITCH_LINK_COUNTS for count in counts) else False
    if same and counts[0] * (gpu_count - 1) <= MOST_NVLINKS_PER_GPU and counts[0] not in SWITCH_LINK_COUNTS:
        return False
    return None


def _nvlinks_per_gpu(topology: Topology, links: list[Link], same: int | None) -> list[int]:
    """Each GPU's NVLinks, summed over ``links`` (those the source shows); ``same``: the one NVLink
    count of every link (then a GPU's links counted in C, times it: a 576-GPU matrix has 165,600 pairs)."""
    ends_a, ends_b = map(operator.attrgetter("a"), links), map(operator.attrgetter("b"), links)
    if same is not None:
        degree = Counter(ends_a)
        degree.update(ends_b)
        return [degree[g] * same for g in {**dict.fromkeys(topology.gpu_indices), **degree}]
    per_gpu = dict.fromkeys(topology.gpu_indices, 0)
    for link in links:  # one pass (a scan per GPU was O(GPUs x pairs))
        per_gpu[link.a] = per_gpu.get(link.a, 0) + link.nvlink_count
        per_gpu[link.b] = per_gpu.get(link.b, 0) + link.nvlink_count
    return list(per_gpu.values())


def infer_nvswitch(topology: Topology) -> None:
    """Set ``nvswitch`` on the NVLinked pairs of a text topology to what the pattern proves."""
    verdict = nvswitch_pattern(topology)
    for link in topology.links:
        if link.nvlink_count > 0 or (verdict is False and link.type == "UNKNOWN"):  # no switch joins these GPUs
            link.nvswitch = verdict
