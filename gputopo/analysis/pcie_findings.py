"""Each GPU's own PCIe link as the topology's source read it (NVML, ``nvidia-smi -q``, a snapshot):
scan's findings ``pcie-width-degraded``, ``pcie-gen-degraded``, ``pcie-gen-below-max-idle`` and
``pcie-gen-below-max`` (``analysis.diagnose`` lists every code; doctor words what it reads itself in
``doctor_links``).

A width below max is a fault (a warning) in any state. A generation below max is judged by the GPU's
performance state read with it (``analysis.pstates``): at P0, a link that trained down (a warning,
inferred from the state); at P8 or lower power, an idle GPU's lowered link (info, by design); in an
intermediate state or with no state, today's "only a problem if it stays low under load" (info).
After merging several views of one host, a state is used only where no source disagrees on that
GPU's state or generation: kept values from two sources could be from two different moments.
"""

from __future__ import annotations

from gputopo.analysis import pstates
from gputopo.model import Finding, Gpu, Topology

UNDER_LOAD_QUERY = pstates.STATE_AND_LINK_QUERY
# The same with each link's width, for findings about a narrow link (not `nvidia-smi -q -d PCIE`: a
# real nvidia-smi 580 has no PCIE display type for -d; analysis/doctor_links.py).
LINK_QUERY = ("nvidia-smi --query-gpu=index,pstate,pcie.link.gen.current,pcie.link.gen.max,"
              "pcie.link.width.current,pcie.link.width.max --format=csv")


def pcie_degraded(topology: Topology) -> list[Finding]:
    """GPUs whose PCIe link runs narrower (a warning) or at a lower generation than it can."""
    findings = []
    narrow = [(g, *values) for g in topology.gpus if (values := g.pcie_below_max("width")) is not None]
    if narrow:
        findings.append(Finding(
            severity="warning", code="pcie-width-degraded",
            message="; ".join(f"GPU {g.index} runs at PCIe x{now} (max x{most})" for g, now, most in narrow)
            + ": fewer lanes mean proportionally less host and PCIe peer bandwidth",
            gpus=[g.index for g, _, _ in narrow],
            fix="check that the card sits in an x16 slot (not one wired x8 or shared), reseat it and its riser"))
    slow: dict[str, list[tuple[Gpu, int, int, int | None]]] = {pstates.TOP: [], pstates.IDLE: [], pstates.UNKNOWN: []}
    mixed = pstates.read_apart(topology)
    for gpu in topology.gpus:
        values = gpu.pcie_below_max("gen")
        if values is not None:
            state = None if gpu.index in mixed else gpu.performance_state
            slow[pstates.link_reading(state)].append((gpu, *values, state))
    if slow[pstates.TOP]:
        findings.append(_trained_down(slow[pstates.TOP]))
    if slow[pstates.IDLE]:
        findings.append(_idle(slow[pstates.IDLE]))
    if slow[pstates.UNKNOWN]:
        findings.append(_maybe_idle(slow[pstates.UNKNOWN]))
    return findings


def _details(slow: list[tuple[Gpu, int, int, int | None]]) -> str:
    return "; ".join(f"GPU {g.index} runs at PCIe Gen{now} (max Gen{most})"
                     + (f" in {pstates.word(state)}" if pstates.known(state) else "")
                     for g, now, most, state in slow)


def _trained_down(slow: list[tuple[Gpu, int, int, int | None]]) -> Finding:
    return Finding(
        severity="warning", code="pcie-gen-degraded",
        message=f"{_details(slow)}: at P0 the driver runs the link at the best generation it can train to, so "
                f"{'this link' if len(slow) == 1 else 'these links'} trained down (inferred from the performance "
                "state read with it; a riser, the slot, or the BIOS's PCIe speed setting): each generation down "
                "roughly halves the bandwidth per lane",
        gpus=[g.index for g, *_ in slow],
        fix="reseat the card and check its riser or cable, set the slot's PCIe speed in the BIOS to Auto (or the "
            f"highest generation) and update the BIOS; then read it again under load: {UNDER_LOAD_QUERY}")


def _idle(slow: list[tuple[Gpu, int, int, int | None]]) -> Finding:
    return Finding(
        severity="info", code="pcie-gen-below-max-idle",
        message=f"{_details(slow)}: idle GPUs lower their link generation by design in P8 and lower-power states, "
                "so this is no sign of a fault (nor proof that the link reaches its max under load, which "
                "was not read)",
        gpus=[g.index for g, *_ in slow],
        fix=f"nothing to fix; to see the speed under load, while training runs: {UNDER_LOAD_QUERY}")


def _maybe_idle(slow: list[tuple[Gpu, int, int, int | None]]) -> Finding:
    intermediate = any(pstates.known(state) for *_, state in slow)
    return Finding(
        severity="info", code="pcie-gen-below-max",
        message=f"{_details(slow)}: idle GPUs drop the link generation to save power, so this is only a problem "
                "if it stays low under load"
                + (" (P1-P7 are intermediate states: some GPUs lower their link there and some do not)"
                   if intermediate else ""),
        gpus=[g.index for g, *_ in slow],
        fix=f"check again while training runs: {UNDER_LOAD_QUERY}")
