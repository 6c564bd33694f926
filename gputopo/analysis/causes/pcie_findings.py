"""Each GPU's own PCIe link as the topology's source read it (NVML, ``nvidia-smi -q``, a snapshot):
which GPUs have ``pcie-link-narrow``, ``pcie-link-slow``, ``pcie-link-slow-idle`` or
``pcie-link-slow-maybe-idle`` — the codes and words doctor uses for the same link, written once in
``pcie_link`` (before, scan said ``pcie-width-degraded`` / ``pcie-gen-*`` of the same fault).

A width below max is a fault (a warning) in any state. A generation below max is judged by the GPU's
performance state read with it (``analysis.expect.pstates``): at P0, a link that trained down (a warning,
inferred from the state); at P8 or lower power, an idle GPU's lowered link (info, by design); in an
intermediate state or with no state, today's "only a problem if it stays low under load" (info).
After merging several views of one host, a state is used only where no source disagrees on that
GPU's state or generation: kept values from two sources could be from two different moments.
"""

from __future__ import annotations

from gputopo.analysis.expect import pstates
from gputopo.analysis.causes.pcie_link import (  # noqa: F401 - LINK_QUERY: observed_findings reads it here
    LINK_QUERY,
    gpus_narrow,
    gpus_slow_idle,
    gpus_slow_maybe_idle,
    gpus_trained_down,
)
from gputopo.analysis.causes.doctor_report import gen_number
from gputopo.analysis.causes.pcie_slot import slot_finding
from gputopo.model import Finding, Gpu, Topology
from gputopo.model.fabric import BRIDGE, ROOT_PORT, FabricNode


def _port_above(topology: Topology, gpu: Gpu) -> FabricNode | None:
    """The port right above a GPU in the source's fabric graph (a root port or a switch's downstream port:
    its link fields are its LnkCap and LnkSta, as sysfs read them), where the source has one."""
    fabric = topology.fabric
    node = fabric.gpu_node(gpu.index) if fabric else None
    parent = fabric.node(node.parent) if fabric and node else None
    return parent if parent is not None and parent.kind in (ROOT_PORT, BRIDGE) else None


def _at_slot_top(topology: Topology, gpu: Gpu, field: str, now: int, most: int) -> Finding | None:
    """``pcie-slot-limited`` where the port above the GPU can do no more than ``now`` (its LnkCap)."""
    port = _port_above(topology, gpu)
    if port is None:
        return None
    top = port.link_width_max if field == "width" else gen_number(port.link_gts_max)
    if top is None or top > now:
        return None
    unit = (lambda v: f"x{v}") if field == "width" else (lambda v: f"Gen{v}")
    return slot_finding(f"GPU {gpu.index}", unit(now), unit(most), unit(top), port=port.bdf, lanes=field == "width",
                        gpus=[gpu.index], affected=f"GPU {gpu.index}",
                        evidence=[f"GPU {gpu.index}: PCIe {unit(now)} (max {unit(most)}); port {port.bdf} above it: max {unit(top)}"])


def pcie_degraded(topology: Topology) -> list[Finding]:
    """GPUs whose PCIe link runs narrower (a warning) or at a lower generation than it can; a link at the
    top of the port above it (both ends' capabilities in the source's fabric graph) is the slot's design."""
    findings = []
    narrow = []
    for g in topology.gpus:
        if (values := g.pcie_below_max("width")) is not None:
            slot = _at_slot_top(topology, g, "width", *values)
            findings.append(slot) if slot else narrow.append((g, *values))
    if narrow:
        ports = {g.index: _port_above(topology, g) for g, *_ in narrow}
        findings.insert(0, gpus_narrow(narrow, {i: (p.bdf, p.link_width_max) for i, p in ports.items() if p}))
    slow: dict[str, list[tuple[Gpu, int, int, int | None]]] = {pstates.TOP: [], pstates.IDLE: [], pstates.UNKNOWN: []}
    mixed = pstates.read_apart(topology)
    for gpu in topology.gpus:
        values = gpu.pcie_below_max("gen")
        if values is not None and (slot := _at_slot_top(topology, gpu, "gen", *values)) is not None:
            findings.append(slot)
        elif values is not None:
            state = None if gpu.index in mixed else gpu.performance_state
            slow[pstates.link_reading(state)].append((gpu, *values, state))
    if slow[pstates.TOP]:
        findings.append(gpus_trained_down(slow[pstates.TOP]))
    if slow[pstates.IDLE]:
        findings.append(gpus_slow_idle(slow[pstates.IDLE]))
    if slow[pstates.UNKNOWN]:
        findings.append(gpus_slow_maybe_idle(slow[pstates.UNKNOWN]))
    return findings


