"""The slot's own limit, whoever read it: a link trains to the lesser of its two ends' capabilities (the
GPU's LnkCap and the LnkCap of the port above it: a root port or a switch's downstream port), so a GPU's
link below the GPU's top but at its port's top is at its best. Two desktop cards in slots that the board
splits x16 between (x8/x8 with both filled) each read x8 of x16, and each slot's port can do x8: the
board's design (``pcie-slot-limited``, info), not a link trained down (``pcie_link``'s ``pcie-link-narrow``).
The same holds for the speed: a Gen4 GPU below a Gen3 port runs at the port's Gen3.

Where the source shows both ends (sysfs: the GPU and the port above it, live or in an archive; a pasted
``lspci -vvv`` with the port's block; a fabric graph with the port's link) the rule decides; where it does
not, ``port_hint`` says what would tell (the port's LnkCap) in the narrow link's words.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list, gts_to_gen
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.host.pcie_health import LinkState, PciNode


def capped_by(mine: LinkState, other: LinkState, kind: str) -> bool:
    """This end of a link reads below its own top, at the most the other end can do: a link trains to the
    lesser of its two ends' capabilities (LnkCap), so it is at its best."""
    if kind == "width":
        return None not in (mine.current_width, other.max_width) and other.max_width <= mine.current_width  # type: ignore[operator]
    return (None not in (mine.current_speed_gts, other.max_speed_gts)
            and other.max_speed_gts <= mine.current_speed_gts)  # type: ignore[operator]


def slot_limited_sysfs(report: DoctorReport, gpu: PciNode, port: PciNode, kind: str) -> None:
    """sysfs (live or an archive): the GPU's ``current_link_*`` below its ``max_link_*``, at the port's max."""
    width = kind == "width"
    evidence = [f"{n.sysfs_path}/current_link_{kind}: {getattr(n.link, 'current_width' if width else 'current_speed_gts')}"
                f", max_link_{kind}: {getattr(n.link, 'max_width' if width else 'max_speed_gts')}" for n in (gpu, port)]
    slot_limited_paste(report, f"{gpu.bdf} (the GPU)", gpu.link, port.link, port.bdf, kind, below=[gpu.bdf],
                       evidence=evidence)


def slot_limited(report: DoctorReport, who: str, now: str, gpu_top: str, port_top: str, *, port: str | None,
                 lanes: bool, below: list[str], evidence: list[str]) -> None:
    """``pcie-slot-limited`` for doctor: the GPUs ``below`` marked by nothing (no fault), named in the effect."""
    report.add(slot_finding(who, now, gpu_top, port_top, port=port, lanes=lanes, gpus=report.indices(below),
                            evidence=evidence, affected=and_list([report.label(b) for b in below]) if below else who))


def slot_finding(who: str, now: str, gpu_top: str, port_top: str, *, port: str | None, lanes: bool,
                 gpus: list[int], evidence: list[str], affected: str) -> Finding:
    """``pcie-slot-limited``: a GPU's link below the GPU's top (``now`` of ``gpu_top``: ``x8``/``x16`` or
    ``Gen3``/``Gen4``) but at the top of the port above it (``port_top``, its LnkCap): the link is at its
    best, the slot the board's design (``lanes``: lanes split between slots; else an older generation)."""
    why = ("the board splits its lanes between slots (two x16 slots that share one x16 run x8/x8 when both are "
           "filled) or wires the slot with fewer lanes" if lanes else "the port or slot is of an older PCIe generation")
    return Finding(
        "info", "pcie-slot-limited",
        f"The PCIe link of {who} runs at {now} of the GPU's {gpu_top}, and the port above it"
        f"{f' ({port})' if port else ''} can do {port_top} at most (its LnkCap): a link trains to the lesser of its "
        f"two ends, so this one is at its best. The slot gives {port_top} by design, not a link trained down: "
        f"{why}. Every copy through it gets {now}'s bandwidth, not {gpu_top}'s.",
        gpus=gpus, evidence=evidence, effect=f"every copy to or from {affected}",
        fix=("nothing is broken; for the GPU's full " + gpu_top + ": the board manual's slot table says which slot "
             "gets it alone (a second card in a shared slot halves the first)" if lanes else
             "nothing is broken; the GPU's full " + gpu_top + " needs a slot on a port of that generation"))


def port_hint(current_width: int | None, port: str | None, port_width: int | None, many: bool = False) -> str:
    """What the port above a narrow link says of it: its LnkCap reaches further (trained down: ``port_width``,
    the least of them where ``many`` GPUs are said), or, where the source does not show it, what would tell."""
    above = "each GPU" if many else "it"
    if port_width is not None:
        return (f" The port above {above}{f' ({port})' if port else ''} can do x{port_width} (its LnkCap): the slot "
                "is not what holds the link back.")
    return (f" Whether the slot itself gives only x{current_width} (a board that splits its lanes between slots: x8/x8) "
            f"shows in the LnkCap of the port above the GPU: `sudo lspci -vvv -s {port or '<port>'} | grep LnkCap`"
            + ("" if port else " (`lspci -t` shows the port)") + ".")


def slot_limited_paste(report: DoctorReport, who: str, gpu: LinkState, port: LinkState, port_bdf: str | None, kind: str,
                       *, below: list[str], evidence: list[str]) -> None:
    """A GPU's link below its own top, at the top of the port above it (``gpu`` and ``port`` as read from a
    pasted ``lspci -vvv``, LnkSta below LnkCap, or from sysfs through ``slot_limited_sysfs``)."""
    width = kind == "width"
    slot_limited(report, who, *((f"x{gpu.current_width}", f"x{gpu.max_width}", f"x{port.max_width}") if width else
                                (gts_to_gen(gpu.current_speed_gts), gts_to_gen(gpu.max_speed_gts), gts_to_gen(port.max_speed_gts))),
                 port=port_bdf, lanes=width, below=below, evidence=evidence)
