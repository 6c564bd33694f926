"""Whether the NVLinks in ``nvidia-smi topo -m`` text go through NVSwitch: inferred, or unknown.

The text says ``NV12`` or ``NV18`` for a pair, not whether the links end at the peer or at a switch.
What the pattern proves:

- NVSwitch (``True``): four or more GPUs (three peers each), every pair NVLinked, and each GPU would
  need more NVLinks for a direct mesh than any NVIDIA GPU has (18): eight GPUs with NV12 to each of
  seven peers (84 links) sit on NVSwitches, as HGX/DGX A100, H100, B200 boards do, and so do four
  with NV18 to each of three (54 links: a GB200 tray, or four GPUs of a larger NVSwitch box).
  diagnose says it is inferred.
- point-to-point (``False``): some pairs NVLinked and others only over PCIe (a bridge pair, the
  DGX-1 cube mesh: a switch would join them all), or every pair with the same few links that add up
  to what one GPU has and that no switch system shows (NV4 to each of three peers, an NV2 bridge).
- unknown (``None``): anything else, e.g. two GPUs with NV12 (a bridged PCIe pair or two GPUs of an
  HGX board), or three with NV6 to each other (12 links: direct or through a switch).
"""

from __future__ import annotations

from gputopo.model import Topology

MOST_NVLINKS_PER_GPU = 18  # H100, B200: the most NVLinks any NVIDIA GPU has
# What nvidia-smi shows between two GPUs of an NVSwitch system: every link of the GPU goes to the
# switches (DGX-2 V100: NV6, A100: NV12, H100/B200/GB200: NV18).
SWITCH_LINK_COUNTS = (6, 12, 18)
MIN_GPUS_FOR_SWITCH_PATTERN = 4  # three peers each: NV12/NV18 x 3 is more than any GPU has, with room for larger GPUs


def nvswitch_pattern(topology: Topology) -> bool | None:
    """What the NVLink pattern of ``topology`` proves about NVSwitch (see the module's words)."""
    gpu_count = len(topology.gpus)
    known = [link for link in topology.links if link.type != "UNKNOWN"]  # pairs a cut paste does not show
    counts = [link.nvlink_count for link in known]
    if not counts or not any(counts):
        return False  # no NVLink at all
    if not all(counts):
        return False  # NVLinks to some peers, PCIe to others: point-to-point links
    if gpu_count >= MIN_GPUS_FOR_SWITCH_PATTERN:
        per_gpu = dict.fromkeys(topology.gpu_indices, 0)
        for link in known:  # one pass (a scan per GPU was O(GPUs x pairs))
            per_gpu[link.a] = per_gpu.get(link.a, 0) + link.nvlink_count
            per_gpu[link.b] = per_gpu.get(link.b, 0) + link.nvlink_count
        if min(per_gpu.values()) > MOST_NVLINKS_PER_GPU:
            return True
    same = len(set(counts)) == 1
    if same and counts[0] * (gpu_count - 1) <= MOST_NVLINKS_PER_GPU and counts[0] not in SWITCH_LINK_COUNTS:
        return False
    return None


def infer_nvswitch(topology: Topology) -> None:
    """Set ``nvswitch`` on the NVLinked pairs of a text topology to what the pattern proves."""
    verdict = nvswitch_pattern(topology)
    for link in topology.links:
        if link.is_nvlink or (link.type == "UNKNOWN" and verdict is False):  # no switch joins these GPUs
            link.nvswitch = verdict
