"""What a GPU's performance state (P-state) says of its PCIe link's speed: the one reading of it,
for scan's findings (``diagnose``), doctor's (``causes.pcie_link``) and scan's GPU table (``pcie_below``,
carried by ``ScanResult``).

NVIDIA GPUs change their PCIe link generation with their performance state, to save power: NVML
numbers the states P0 ("maximum performance") to P15 ("minimum performance"), and nvidia-smi's help
says of ``pcie.link.gen.current`` that it "may be reduced when the GPU is not in use". An NVIDIA
engineer showed one GPU at P8 Gen1, P5 Gen2, P2 Gen3 and P0 Gen3 (its ``gpumax`` 4; the host's max
not shown: NVIDIA/open-gpu-kernel-modules#731). From that:

- **P0** (``TOP``): the driver runs the link at the best generation it can train to. A generation
  below the link's Max at P0 is a link that trained down (a riser, a slot, signal integrity, the
  BIOS's PCIe speed setting; NVIDIA/open-gpu-kernel-modules#1010: a link stuck at Gen1). This is an
  *inference* from the state, which says nothing of the link itself, and the findings say so. Every
  P0 GPU of the real ``nvidia-smi -q`` captures (tests/fixtures/corpus/smi_q/) runs at its Max, idle
  or not (an idle H100 stays at P0 and Gen5). The Max must be the link's, the lower of the GPU's and
  the slot's (NVML's ``nvmlDeviceGetMaxPcieLinkGeneration``, ``-q``'s ``Max``), never the GPU's own
  (``Device Max``; sysfs ``max_link_speed`` of the GPU alone): a Gen4 card in a Gen3 slot runs Gen3
  at P0, and that is the slot, not a fault.
- **P8 and any higher number** (``IDLE``: NVAPI calls P8 "basic HD video playback", P10 "DVD
  playback", P12 "minimum idle power consumption"; idle GPUs sit at P8): a lowered link is what
  the state does. That explains the speed read; it is no evidence of a fault, nor of its absence
  (the speed under load is not shown). An idle GPU need not lower it (an RTX 4070 Laptop GPU read
  Gen4 of 4 at P8 in the corpus), so P8 never *proves* a lowered link, it explains one.
- **P1 to P7** (``UNKNOWN``): NVAPI calls P1 "maximum 3D performance" and P2/P3 "balanced"; CUDA work
  on GeForce cards often runs at P2. The GPU above ran Gen3 at P2 and Gen2 at P5: an intermediate
  state may lower the link or not, by model and driver, so it cannot tell a slow link from a
  lowered one; said as unknown, with the state named.
- **No state** (the source does not say, ``[N/A]``, NVML's ``NVML_PSTATE_UNKNOWN`` = 32, any
  value outside 0-15): ``UNKNOWN``; the findings keep their wording of before (a speed read once is
  only "maybe" idle).

Width is not read here: GPUs keep their lane count in every state on the machines this project has
seen, and a width below max stays a fault whatever the state (``causes.pcie_link``, ``diagnose``).

A state and a link speed tell each other something only when they were read together: from one
``nvidia-smi -q`` run or one NVML probe, or from two reads (sysfs and NVML, a gathered archive's
sysfs and its ``-q``) where the state's source read the link at the same generation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from gputopo.model import Gpu, Topology

TOP = "top"  # P0: the link runs at the best it can train to
IDLE = "idle"  # P8 and lower power: a lowered link is by design
UNKNOWN = "unknown"  # P1-P7, or no state: cannot tell
IDLE_FROM = 8
MAX_STATE = 15
# What shows the state and the link's generation read together (the fixes say to run it under load).
STATE_AND_LINK_QUERY = "nvidia-smi --query-gpu=index,pstate,pcie.link.gen.current,pcie.link.gen.max --format=csv"
_READ_TOGETHER = ("performance_state", "pcie_gen_current", "pcie_gen_max")


def link_reading(state: int | None) -> str:
    """``TOP``, ``IDLE`` or ``UNKNOWN`` for a GPU in performance state ``state`` (0 = P0)."""
    if state is None or isinstance(state, bool) or not isinstance(state, int) or not 0 <= state <= MAX_STATE:
        return UNKNOWN
    if state == 0:
        return TOP
    return IDLE if state >= IDLE_FROM else UNKNOWN


def known(state: int | None) -> bool:
    """Whether ``state`` is a performance state at all (0-15)."""
    return isinstance(state, int) and not isinstance(state, bool) and 0 <= state <= MAX_STATE


def word(state: int | None) -> str:
    """``P8``; ``unknown`` for no state."""
    return f"P{state}" if known(state) else "unknown"


BELOW_IDLE = "idle"  # only the generation is below max, in an idle state: lowered by design
BELOW = "below"  # narrower than max, or slower in a state that does not explain it


def pcie_below(gpu: Gpu) -> str | None:
    """How a GPU's PCIe link read below its max is to be taken: ``BELOW_IDLE`` where only its
    generation is lower and the state it was read in is an idle one (``IDLE``: lowered by design),
    else ``BELOW`` (narrow in any state; slower at P0, P1-P7 or no state); None at its max or not known."""
    narrow = gpu.pcie_below_max("width") is not None
    slow = gpu.pcie_below_max("gen") is not None
    if not (narrow or slow):
        return None
    return BELOW_IDLE if slow and not narrow and link_reading(gpu.performance_state) == IDLE else BELOW


def read_apart(topology: Topology) -> set[int]:
    """The GPUs whose state or link generation two merged sources disagree on: the values kept may be
    from two moments, so the state says nothing of that link."""
    if not topology.disagreements:
        return set()
    subjects = {d.subject for d in topology.disagreements}
    return {g.index for g in topology.gpus if any(f"GPU {g.index} {name}" in subjects for name in _READ_TOGETHER)}
