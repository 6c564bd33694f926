"""A PCIe link trained below what it can do, whoever read it (sysfs, NVML where sysfs does not
place the GPU, a pasted ``lspci -vv``): the one wording of ``pcie-link-narrow``, ``pcie-link-slow``,
``pcie-link-slow-idle`` and ``pcie-link-slow-maybe-idle``, and the one way the GPUs and pairs behind
a link that trained down are marked.

A width below max is a fault: every copy through the link gets that fraction of the bandwidth. A
speed below max is judged by the GPU's performance state where one was read *with* that speed
(``analysis.expect.pstates`` says why): at P0 the link trained down (``pcie-link-slow``, a warning, worded
as inferred); at P8 or lower power the GPU is idle and lowers its link by design
(``pcie-link-slow-idle``, info); otherwise, and where no state was read (a pasted lspci, a bridge
higher up, an intermediate state), it is only "maybe" idle (``pcie-link-slow-maybe-idle``: a
speed read once on an idle box says nothing until it is read again under load).

Where a state comes from (``states_read``): NVML, read with its own link generation (the live
host), or the ``nvidia-smi -q`` of a gathered archive (read with the link in that output). It is
put on a sysfs reading of the GPU's link (the GPU, or the port right above it: the other end of the
same link) only where its source read the link at the same generation; two reads apart could
straddle a change of state. At P0, a source that read the link at its own Max (the lower of the GPU's
and the slot's) says the link is at the best the slot allows, though sysfs's ``max_link_speed`` is
the GPU's own: no finding.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputopo.analysis.expect import pstates
from gputopo.analysis.causes.doctor_common import DoctorReport, and_list
from gputopo.model import Finding, Gpu

if TYPE_CHECKING:  # (scan's findings import this module: no doctor evidence readers at its start-up)
    from gputopo.sources.evidence.health import HealthEvidence

# Not `nvidia-smi -q -d PCIE`: a real nvidia-smi 580 refused `-q -d PCIE,MEMORY` (MEMORY is a display
# type, so PCIE is not; tests/hardware/README.md). The query shows the state the speed follows.
UNDER_LOAD = ("check it under load: run `gputopo bench-p2p` (or any copy) and meanwhile "
              f"`{pstates.STATE_AND_LINK_QUERY} -l 1` or `sudo lspci -vv -s {{bdf}} | grep LnkSta`")
# Each link's generation and width, for findings about a narrow link (not `nvidia-smi -q -d PCIE`: a
# real nvidia-smi 580 has no PCIE display type for -d).
LINK_QUERY = ("nvidia-smi --query-gpu=index,pstate,pcie.link.gen.current,pcie.link.gen.max,"
              "pcie.link.width.current,pcie.link.width.max --format=csv")
# The pair-problem word recommend and report read (doctor_common.PAIR_PROBLEMS).
DOWNTRAINED = "downtrained"


def narrow_link(report: DoctorReport, who: str, current_width: int | None, max_width: int | None, *,
                below: list[str], affected: str, evidence: list[str],
                spared: Iterable[tuple[str, str]] = (), gpus: list[int] | None = None) -> None:
    """``pcie-link-narrow`` for the link of ``who`` (``x{current_width} of x{max_width}``).

    ``below``: the GPUs (bus ids) whose copies go through that link; each is marked downtrained,
    and so is every pair with one of them, except the ``spared`` pairs (NVLink pairs do not copy
    over PCIe). ``affected``: those GPUs as the words name them. ``gpus``: the finding's GPU
    indices where the bus ids do not give them (NVML's index of a GPU without a bus id). ``max_width``
    None: lspci marked the width downgraded, its maximum not in the paste."""
    pairs = _mark_downtrained(report, below, spared)
    report.add(Finding(
        "warning", "pcie-link-narrow",
        f"The PCIe link of {who} runs at x{current_width} of {_most(f'x{max_width}' if max_width else None)}: it "
        "trained narrower than it can "
        "(a riser, a slot wired with fewer lanes, chipset lanes, a bad seat); every copy through it gets that "
        "fraction of the bandwidth (tinygrad/open-gpu-kernel-modules#6).",
        gpus=report.indices(below) if gpus is None else gpus,
        evidence=evidence,
        effect=f"every copy to or from {affected}",
        fix="reseat the card, move it to a CPU-attached x16 slot (the board manual says which slots share lanes), "
            "check the riser and the BIOS slot bifurcation / link width settings"), pairs)


def _most(value: str | None) -> str:
    """The top a link can train to, or what says it is below it where the source does not show the top."""
    return value if value else "its maximum (lspci marks it downgraded; the LnkCap line with the maximum is not in the paste)"


def _mark_downtrained(report: DoctorReport, below: list[str], spared: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Each GPU in ``below`` and every pair with one of them (but the ``spared``: NVLink pairs do not
    copy over PCIe) marked downtrained; those pairs returned."""
    spared_pairs = {tuple(sorted(pair)) for pair in spared}
    for gpu in below:
        report.mark_gpu(gpu, DOWNTRAINED)
    known, marked = sorted(report.gpus), []
    for k, a in enumerate(known):
        for b in known[k + 1:]:
            if (a in below or b in below) and (a, b) not in spared_pairs:
                report.mark_pair(a, b, DOWNTRAINED)
                marked.append((a, b))
    return marked


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


def slow_link(report: DoctorReport, who: str, speed_now: str, speed_max: str | None, *, gpus: list[int],
              evidence: list[str], bdf: str | None, state: StateRead | None = None, gen_now: int | None = None,
              below: list[str] | None = None, spared: Iterable[tuple[str, str]] = ()) -> bool:
    """The link of ``who`` runs at ``speed_now`` of ``speed_max`` (``Gen3 of Gen4``, with the widths
    where they are known), read at generation ``gen_now``; ``state``: the GPU's state read with it,
    if any; ``below``: the GPUs (bus ids) whose copies go through it, marked where it trained down;
    ``bdf`` is put in the command that checks it under load; ``speed_max`` None: lspci marked the speed
    downgraded, the top not in the paste. True where it is a fault (a warning)."""
    speed_max = _most(speed_max)
    reading = speed_reading(state, gen_now)
    if reading == "at-max":
        return False
    shown = [*evidence, state.evidence] if state is not None else evidence
    if reading == pstates.TOP:
        pairs = _mark_downtrained(report, below or [], spared)
        report.add(Finding(
            "warning", "pcie-link-slow",
            f"The PCIe link of {who} runs at {speed_now} of {speed_max} while the GPU is in P0, where the driver "
            "runs the link at the best generation it can train to: it trained down (inferred from the performance "
            "state read with it; a riser, the slot, or the BIOS's PCIe speed setting). Each generation down "
            "roughly halves the bandwidth per lane.",
            gpus=gpus, evidence=shown,
            effect=f"every copy to or from {and_list([report.label(b) for b in below])}" if below else f"every copy through {who}",
            fix="reseat the card and check its riser or cable, set the slot's PCIe speed in the BIOS to Auto (or the "
                "highest generation) and update the BIOS; then " + UNDER_LOAD.format(bdf=bdf or "<bdf>")), pairs)
        return True
    if reading == pstates.IDLE:
        report.add(Finding(
            "info", "pcie-link-slow-idle",
            f"The PCIe link of {who} runs at {speed_now} of {speed_max} while the GPU is in "
            f"{pstates.word(state.state if state else None)}: idle GPUs lower their link speed by design in P8 and "
            "lower-power states, so this is no sign of a fault (the speed under load was not read).",
            gpus=gpus, evidence=shown,
            fix="nothing to fix; " + UNDER_LOAD.format(bdf=bdf or "<bdf>")))
        return False
    named = state is not None and gen_now is not None and state.gen == gen_now  # an intermediate state, read with it
    report.add(Finding(
        "info", "pcie-link-slow-maybe-idle",
        f"The PCIe link of {who} runs at {speed_now} of {speed_max}: GPUs lower their link speed when idle, "
        "so this may be normal; it is a fault only if it stays low under load."
        + (f" The GPU was in {pstates.word(state.state)}, an intermediate state: some GPUs lower their link there "  # type: ignore[union-attr]
           "and some do not." if named else ""),
        gpus=gpus, evidence=shown if named else evidence,
        fix=UNDER_LOAD.format(bdf=bdf or "<bdf>")))
    return False


def link_limited_at_boot(report: DoctorReport, who: str, speed_now: str, speed_max: str, at: str, *,
                         gpus: list[int], evidence: list[str]) -> None:
    """``pcie-link-limited``: the kernel's boot-time line says the link at ``at`` holds ``who`` to
    ``speed_now`` of ``speed_max``. Trained at enumeration, not lowered by an idle GPU: a port or slot of a
    lower generation (the platform's limit, by design) or a link trained down; the port's LnkCap tells."""
    report.add(Finding(
        "info", "pcie-link-limited",
        f"At boot the kernel found {who} held to {speed_now} of its {speed_max} by the PCIe link at {at}: that port "
        "or slot is of a lower generation (the platform's limit, by design) or the link trained down; each "
        "generation down halves the bandwidth per lane.",
        gpus=gpus, evidence=evidence,
        fix=f"read what the port can do: `sudo lspci -vv -s {at} | grep -E 'LnkCap|LnkSta'`; if its LnkCap reaches "
            f"{speed_max}, the link trained down (reseat the card, check the riser, set the slot's PCIe speed in the "
            "BIOS to Auto); if not, it is the board's limit (a slot wired to a newer root port, if the board has one)"))


# --- the same links as a topology's source read them (NVML, `nvidia-smi -q`, a snapshot): scan's
# findings, one per kind for every GPU it applies to (``analysis.causes.pcie_findings`` picks the GPUs).


def gpus_narrow(narrow: list[tuple[Gpu, int, int]]) -> Finding:
    """``pcie-link-narrow`` for GPUs whose own link runs with fewer lanes than it can."""
    return Finding(
        severity="warning", code="pcie-link-narrow",
        message="; ".join(f"GPU {g.index} runs at PCIe x{now} (max x{most})" for g, now, most in narrow)
        + ": fewer lanes mean proportionally less host and PCIe peer bandwidth",
        gpus=[g.index for g, _, _ in narrow],
        fix="check that the card sits in an x16 slot (not one wired x8 or shared), reseat it and its riser")


def _details(slow: list[tuple[Gpu, int, int, int | None]]) -> str:
    return "; ".join(f"GPU {g.index} runs at PCIe Gen{now} (max Gen{most})"
                     + (f" in {pstates.word(state)}" if pstates.known(state) else "")
                     for g, now, most, state in slow)


def gpus_trained_down(slow: list[tuple[Gpu, int, int, int | None]]) -> Finding:
    return Finding(
        severity="warning", code="pcie-link-slow",
        message=f"{_details(slow)}: at P0 the driver runs the link at the best generation it can train to, so "
                f"{'this link' if len(slow) == 1 else 'these links'} trained down (inferred from the performance "
                "state read with it; a riser, the slot, or the BIOS's PCIe speed setting): each generation down "
                "roughly halves the bandwidth per lane",
        gpus=[g.index for g, *_ in slow],
        fix="reseat the card and check its riser or cable, set the slot's PCIe speed in the BIOS to Auto (or the "
            f"highest generation) and update the BIOS; then read it again under load: {pstates.STATE_AND_LINK_QUERY}")


def gpus_slow_idle(slow: list[tuple[Gpu, int, int, int | None]]) -> Finding:
    return Finding(
        severity="info", code="pcie-link-slow-idle",
        message=f"{_details(slow)}: idle GPUs lower their link generation by design in P8 and lower-power states, "
                "so this is no sign of a fault (nor proof that the link reaches its max under load, which "
                "was not read)",
        gpus=[g.index for g, *_ in slow],
        fix=f"nothing to fix; to see the speed under load, while training runs: {pstates.STATE_AND_LINK_QUERY}")


def gpus_slow_maybe_idle(slow: list[tuple[Gpu, int, int, int | None]]) -> Finding:
    intermediate = any(pstates.known(state) for *_, state in slow)
    return Finding(
        severity="info", code="pcie-link-slow-maybe-idle",
        message=f"{_details(slow)}: idle GPUs drop the link generation to save power, so this is only a problem "
                "if it stays low under load"
                + (" (P1-P7 are intermediate states: some GPUs lower their link there and some do not)"
                   if intermediate else ""),
        gpus=[g.index for g, *_ in slow],
        fix=f"check again while training runs: {pstates.STATE_AND_LINK_QUERY}")
