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
from gputopo.model import Finding, Gpu, Topology


def pcie_degraded(topology: Topology) -> list[Finding]:
    """GPUs whose PCIe link runs narrower (a warning) or at a lower generation than it can."""
    findings = []
    narrow = [(g, *values) for g in topology.gpus if (values := g.pcie_below_max("width")) is not None]
    if narrow:
        findings.append(gpus_narrow(narrow))
    slow: dict[str, list[tuple[Gpu, int, int, int | None]]] = {pstates.TOP: [], pstates.IDLE: [], pstates.UNKNOWN: []}
    mixed = pstates.read_apart(topology)
    for gpu in topology.gpus:
        values = gpu.pcie_below_max("gen")
        if values is not None:
            state = None if gpu.index in mixed else gpu.performance_state
            slow[pstates.link_reading(state)].append((gpu, *values, state))
    if slow[pstates.TOP]:
        findings.append(gpus_trained_down(slow[pstates.TOP]))
    if slow[pstates.IDLE]:
        findings.append(gpus_slow_idle(slow[pstates.IDLE]))
    if slow[pstates.UNKNOWN]:
        findings.append(gpus_slow_maybe_idle(slow[pstates.UNKNOWN]))
    return findings


