"""The GPU's performance state read with its PCIe link speed: what says whether a link below its
top speed is idle by design or trained down (``pcie_link`` judges it; ``analysis.expect.pstates``
says what each state means for the link).

Where a state comes from (``states_read``): NVML, read with its own link generation (the live
host), or the ``nvidia-smi -q`` of a gathered archive (read with the link in that output). It is
put on a sysfs reading of the GPU's link (the GPU, or the port right above it: the other end of the
same link) only where its source read the link at the same generation; two reads apart could
straddle a change of state. At P0, a source that read the link at its own Max (the lower of the GPU's
and the slot's) says the link is at the best the slot allows, though sysfs's ``max_link_speed`` is
the GPU's own: no finding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputopo.analysis.expect import pstates

if TYPE_CHECKING:  # (scan's findings import this module: no doctor evidence readers at its start-up)
    from gputopo.sources.evidence.health import HealthEvidence

@dataclass(frozen=True)
class StateRead:
    """A GPU's performance state (0 = P0), the link generation and Max its source read with it (None
    where it did not say), and that reading in words for the evidence."""

    state: int
    gen: int | None
    gen_max: int | None
    evidence: str


def states_read(evidence: HealthEvidence) -> dict[str, StateRead]:
    """Bus id -> the state read with the GPU's link: NVML's (a live host), else a gathered archive's
    ``nvidia-smi -q`` (its GPUs that two merged outputs do not disagree on)."""
    found: dict[str, StateRead] = {}
    topology = evidence.topology
    if topology is not None:
        apart = pstates.read_apart(topology)
        for g in topology.gpus:
            if g.pci_bus_id and pstates.known(g.performance_state) and g.index not in apart:
                found[g.pci_bus_id] = StateRead(
                    g.performance_state, g.pcie_gen_current, g.pcie_gen_max,  # type: ignore[arg-type]
                    f"nvidia-smi -q in {evidence.source}: GPU {g.index} Performance State {pstates.word(g.performance_state)}, "
                    f"PCIe Generation Current {g.pcie_gen_current or '?'}, Max {g.pcie_gen_max or '?'}")
    for gpu in evidence.nvml.gpus if evidence.nvml is not None else []:
        if gpu.pci_bus_id and pstates.known(gpu.performance_state):
            found[gpu.pci_bus_id] = nvml_state(gpu.index, gpu.performance_state, gpu.pcie_gen_current, gpu.pcie_gen_max)  # type: ignore[arg-type]
    return found


def nvml_state(index: int, state: int, gen: int | None, gen_max: int | None) -> StateRead:
    return StateRead(state, gen, gen_max,
                     f"nvmlDeviceGetPerformanceState(GPU {index}): {state} ({pstates.word(state)}), read with "
                     f"nvmlDeviceGetCurrPcieLinkGeneration {gen if gen is not None else '?'}")


def speed_reading(state: StateRead | None, gen_now: int | None) -> str:
    """``pstates.TOP``/``IDLE``/``UNKNOWN`` for a link read at generation ``gen_now`` with ``state``;
    ``"at-max"``: at P0 the state's source read the link at its own Max (the slot's limit)."""
    if state is None or gen_now is None or state.gen != gen_now:
        return pstates.UNKNOWN  # no state, or read at another moment
    reading = pstates.link_reading(state.state)
    if reading == pstates.TOP and state.gen_max is None:
        # No Max from the state's source: sysfs's max_link_speed is one end's own (a Gen4 GPU under
        # a Gen5 port reads Gen4 of Gen5 there at its best), so P0 cannot tell trained down from the slot.
        return pstates.UNKNOWN
    if reading == pstates.TOP and state.gen >= state.gen_max:  # type: ignore[operator]
        return "at-max"
    return reading


def pstate_number(text: str | None) -> int | None:
    """A performance state as nvidia-smi or nvtop prints it: ``P8`` -> 8; anything else None."""
    if text and text[:1] == "P" and text[1:].isascii() and text[1:].isdigit() and len(text) <= 3:
        return int(text[1:])
    return None

