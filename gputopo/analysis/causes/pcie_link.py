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

The doors: ``check_sysfs`` (each GPU's path read from sysfs, on a live host or an archive: the GPU
and every bridge above it; a speed judged by the state ``pcie_pstate.states_read`` found for that
link), ``check_nvml_gpu`` (NVML's view of the GPU's own link, where sysfs did not place it: a
container), ``check_lspci`` (a pasted ``lspci -vv``'s LnkCap/LnkSta lines, a GPU's reading and the
port's above it one link, or the kernel's boot-time ``limited by`` line), ``check_smi_rows``
(``nvidia-smi --query-gpu`` CSV or nvtop rows); and a topology's GPUs for scan (``gpus_narrow`` ...,
picked by ``pcie_findings``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from gputopo.analysis.expect import pstates
from gputopo.analysis.causes.doctor_report import (
    DoctorReport,
    and_list,
    at_line,
    gen_number,
    gpus_in_range,
    gts_to_gen,
    nvml_bus_id,
)
from gputopo.analysis.causes.pcie_pstate import StateRead, nvml_state, pstate_number, speed_reading
from gputopo.analysis.causes.pcie_slot import capped_by, port_hint, slot_limited_paste, slot_limited_sysfs
from gputopo.model import Finding, Gpu

if TYPE_CHECKING:  # (scan's findings import this module: no doctor evidence readers at its start-up)
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence, PastedLink
    from gputopo.sources.host.nvml_health import GpuNvmlHealth
    from gputopo.sources.host.pcie_health import GpuPciePath, PciNode

# Not `nvidia-smi -q -d PCIE`: a real nvidia-smi 580 refused `-q -d PCIE,MEMORY` (MEMORY is a display
# type, so PCIE is not; tests/hardware/README.md). The query shows the state the speed follows.
UNDER_LOAD = ("check it under load: run `gputopo bench-p2p` (or any copy) and meanwhile "
              f"`{pstates.STATE_AND_LINK_QUERY} -l 1` or `sudo lspci -vv -s {{bdf}} | grep LnkSta`")

# Each link's generation and width, for findings about a narrow link (not `nvidia-smi -q -d PCIE`: a
# real nvidia-smi 580 has no PCIE display type for -d).
LINK_QUERY = ("nvidia-smi --query-gpu=index,pstate,pcie.link.gen.current,pcie.link.gen.max,"
              "pcie.link.width.current,pcie.link.width.max --format=csv")

# The pair-problem word recommend and report read (doctor_report.PAIR_PROBLEMS).
DOWNTRAINED = "downtrained"


def check_sysfs(paths: dict[str, GpuPciePath], report: DoctorReport, nvlinked: set[tuple[str, str]],
           states: dict[str, StateRead]) -> None:
    """Each GPU's path as sysfs shows it (a live host, an archive): every link on it, the GPU's own and
    the bridges' above it, once; a speed below max judged by the state read with the GPU's own link."""
    seen: set[str] = set()
    slow_width, slow_speed, any_link = [], [], False
    own_link: dict[str, str] = {}  # the GPU and the port right above it -> that GPU (both read its own link)
    other_end: dict[str, PciNode] = {}  # each end of a GPU's own link -> the other end (the GPU, its port)
    for gpu_bdf, path in sorted(paths.items()):
        own_link[gpu_bdf] = gpu_bdf
        if len(path.nodes) >= 2:
            own_link.setdefault(path.nodes[-2].bdf, gpu_bdf)
            other_end[gpu_bdf] = path.nodes[-2]
            other_end.setdefault(path.nodes[-2].bdf, path.nodes[-1])
        for node in path.nodes:
            if node.bdf in seen:
                continue
            seen.add(node.bdf)
            any_link = any_link or node.link.max_width is not None
            port = other_end.get(node.bdf)
            for kind, below_max, found in (("width", node.link.width_below_max, slow_width),
                                           ("speed", node.link.speed_below_max, slow_speed)):
                if not below_max:
                    continue
                if port is not None and capped_by(node.link, port.link, kind):  # at the most the other end can do
                    if node.bdf in paths:  # the GPU's reading: the slot's top, said once per link
                        slot_limited_sysfs(report, node, port, kind)
                    continue  # the port's reading: the card's own top (an x8 card in an x16 slot), nothing to say
                found.append(node)  # a narrow link's speed is said too (it may be idle, or trained down)
    if not any_link:
        report.check("pcie-links", "not-made", "no link files (current_link_width, max_link_width) under sysfs")
        return
    def gpus_below(node: PciNode) -> list[str]:
        return sorted(bdf for bdf, path in paths.items() if any(n.bdf == node.bdf for n in path.nodes))

    for node in slow_width:
        below = gpus_below(node)
        link = node.link
        what = "the GPU" if node.bdf in paths else "a bridge above " + and_list([report.label(b) for b in below])
        port = other_end.get(node.bdf) if node.bdf in paths else None
        narrow_link(
            report, f"{node.bdf} ({what})", link.current_width, link.max_width, below=below,
            affected=and_list([report.label(b) for b in below]), spared=nvlinked,
            port=port.bdf if port else None, port_width=port.link.max_width if port else None,
            evidence=[f"{node.sysfs_path}/current_link_width: {link.current_width}, max_link_width: {link.max_width}",
                      f"{node.sysfs_path}/current_link_speed: {link.current_speed_gts} GT/s, max_link_speed: {link.max_speed_gts} GT/s"])
    problem = bool(slow_width)
    for node in slow_speed:
        link, gpu = node.link, own_link.get(node.bdf)
        problem |= slow_link(
            report, node.bdf, gts_to_gen(link.current_speed_gts),
            f"{gts_to_gen(link.max_speed_gts)} (x{link.current_width} of x{link.max_width})",
            gpus=report.indices(gpus_below(node)), bdf=node.bdf, state=states.get(gpu) if gpu else None,
            gen_now=gen_number(link.current_speed_gts), below=[gpu] if gpu else [], spared=nvlinked,
            evidence=[f"{node.sysfs_path}/current_link_speed: {link.current_speed_gts} GT/s, max_link_speed: {link.max_speed_gts} GT/s"])
    report.check("pcie-links", "problem" if problem else "ok", f"{len(seen)} device(s) read")


def check_nvml_gpu(gpu: GpuNvmlHealth, report: DoctorReport, nvlinked: set[tuple[str, str]]) -> None:
    """NVML's view of the GPU's own link, where sysfs could not be read: the width is judged, the
    generation by the performance state NVML read with it (``slow_link``)."""
    label = report.label(nvml_bus_id(gpu))
    if None not in (gpu.pcie_width_current, gpu.pcie_width_max) and gpu.pcie_width_current < gpu.pcie_width_max:  # type: ignore[operator]
        narrow_link(
            report, label, gpu.pcie_width_current, gpu.pcie_width_max,
            below=[gpu.pci_bus_id] if gpu.pci_bus_id else [], affected=label, spared=nvlinked,
            gpus=[gpu.index], evidence=[(f"nvmlDeviceGetCurrPcieLinkWidth(GPU {gpu.index}): {gpu.pcie_width_current}, "
                                         f"nvmlDeviceGetMaxPcieLinkWidth: {gpu.pcie_width_max}")])
    elif None not in (gpu.pcie_gen_current, gpu.pcie_gen_max) and gpu.pcie_gen_current < gpu.pcie_gen_max:  # type: ignore[operator]
        state = (nvml_state(gpu.index, gpu.performance_state, gpu.pcie_gen_current, gpu.pcie_gen_max)  # type: ignore[arg-type]
                 if pstates.known(gpu.performance_state) else None)
        slow_link(
            report, label, f"Gen{gpu.pcie_gen_current}", f"Gen{gpu.pcie_gen_max}", gpus=[gpu.index], bdf=gpu.pci_bus_id,
            state=state, gen_now=gpu.pcie_gen_current, below=[gpu.pci_bus_id] if gpu.pci_bus_id else [], spared=nvlinked,
            evidence=[(f"nvmlDeviceGetCurrPcieLinkGeneration(GPU {gpu.index}): {gpu.pcie_gen_current}, "
                       f"nvmlDeviceGetMaxPcieLinkGeneration: {gpu.pcie_gen_max}")])


def check_lspci(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A pasted ``lspci -vv``'s LnkSta lines (with LnkCap, or lspci's own marks), and the kernel's
    boot-time ``limited by ... link at`` line: a GPU's reading and the port's above it are one link."""
    for down in evidence.links_down:
        report.check(f"pcie link {down.bdf or 'of a device not named in the paste'}", "not-made",
                     f"no link trained ({at_line(label, down.line)}: {down.text}): nothing in the slot or the link "
                     "is down, so its width and speed say nothing")
    gpus = sorted(report.gpus)
    for ends in _physical_links(evidence, gpus):
        gpu = next((p.bdf for p in ends if p.bdf in report.gpus), None) or _gpu_below(evidence, ends[0].bdf, gpus)
        pasted = next((p for p in ends if p.bdf == gpu), ends[0])  # the GPU's own reading where the paste has it
        link = pasted.link
        who = report.label(gpu) if gpu else pasted.bdf or "a device (not named in the paste)"
        if len(ends) > 1 or (gpu and pasted.bdf != gpu):
            who += f" (its link to {and_list(sorted(p.bdf for p in ends if p.bdf != gpu)) or 'the port above it'}, " \
                   f"read at {'both ends' if len(ends) > 1 else 'the port'})"
        device = who
        if pasted.limited_at and pasted.limited_at != pasted.bdf:  # the kernel's boot line: the slowest link on its path
            who += f" (limited at boot by the link at {pasted.limited_at})"
        shown = [f"{at_line(label, p.line)}: {p.text}" for p in ends]
        below = [gpu] if gpu else gpus_in_range(gpus, pasted.bdf, evidence.bus_ranges.get(pasted.bdf)) if pasted.bdf else []
        port = next((p for p in ends if p.bdf != gpu), None) if gpu and pasted.bdf == gpu else None
        capped = {kind for kind in ("width", "speed") if port and capped_by(link, port.link, kind)  # the GPU's top known
                  and (link.max_width if kind == "width" else link.max_speed_gts) is not None}
        for kind in sorted(capped & {k for k, below_max in (("width", pasted.narrow), ("speed", pasted.slow)) if below_max}):
            slot_limited_paste(report, who, link, port.link, port.bdf, kind, below=below, evidence=shown)  # type: ignore[union-attr]
        narrow_ends = [p for p in ends if p.narrow and not (p is pasted and "width" in capped)
                       and not (p is port and capped_by(p.link, link, "width"))]  # the port at the card's own top
        if narrow_ends:  # a GPU's pairs all copy through its narrow link
            narrow = narrow_ends[0].link
            narrow_link(report, who, narrow.current_width, narrow.max_width, below=below,
                        affected=and_list([report.label(b) for b in below]) if below else who, evidence=shown,
                        port=port.bdf if port else None, port_width=port.link.max_width if port else None)
        slow = pasted.slow and "speed" not in capped
        if slow and pasted.limited_at:  # trained so at boot: the platform's limit or trained down, not idle
            link_limited_at_boot(report, device, gts_to_gen(link.current_speed_gts), gts_to_gen(link.max_speed_gts),
                                 pasted.limited_at, gpus=report.indices(below), evidence=shown)
        elif slow:  # said too where the link is narrow; no state in a paste; no top where only lspci's mark says it
            slow_link(report, who, gts_to_gen(link.current_speed_gts),
                      gts_to_gen(link.max_speed_gts) if link.max_speed_gts is not None else None,
                      gpus=report.indices(below), bdf=pasted.bdf, evidence=shown)
    _links_check(label, evidence, report)


def _links_check(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """The pcie-links check of the LnkSta lines: made where a line can be judged (its LnkCap, or lspci's
    ok/downgraded marks), never "ok" for lines that show only the current link."""
    if not evidence.links:
        return
    judged = [p for p in evidence.links if p.link.max_width is not None or p.width_mark or p.speed_mark]
    unjudged = len(evidence.links) - len(judged)
    if not judged:
        report.check("pcie-links", "not-made",
                     f"{label} shows {len(evidence.links)} link(s) as they run now (LnkSta) but not what they can do: "
                     "no LnkCap line and no (ok)/(downgraded) mark; paste the whole `sudo lspci -vvv` block of each device")
        return
    problem = any(f.code in ("pcie-link-narrow", "pcie-link-slow") for f in report.findings)
    report.check("pcie-links", "problem" if problem else "ok",
                 f"{len(judged)} link reading(s) (LnkSta, the kernel's boot-time line) in {label}"
                 + ("" if all(p.link.max_width is not None for p in judged) else
                    ", some without their LnkCap line (judged by lspci's own ok/downgraded marks)")
                 + (f"; {unjudged} more without their LnkCap line or marks: not judged" if unjudged else ""))


def _gpu_below(evidence: PastedEvidence, bdf: str | None, gpus: list[str]) -> str | None:
    """The GPU right below port ``bdf``: alone on its secondary bus, which is its last (a GPU's own link)."""
    bus_range = evidence.bus_ranges.get(bdf) if bdf else None
    below = gpus_in_range(gpus, bdf, bus_range) if bdf and bus_range and bus_range[0] == bus_range[1] else []
    return below[0] if len(below) == 1 else None


def _physical_links(evidence: PastedEvidence, gpus: list[str]) -> list[list[PastedLink]]:
    """The pasted LnkSta readings grouped by physical link: a GPU's own reading and that of the port
    right above it (its other end) are one link; every other reading is its own."""
    by_gpu: dict[str, list[PastedLink]] = {}
    alone: list[list[PastedLink]] = []
    for pasted in evidence.links:
        gpu = pasted.bdf if pasted.bdf in gpus else _gpu_below(evidence, pasted.bdf, gpus)
        if gpu is None:
            alone.append([pasted])
        else:
            by_gpu.setdefault(gpu, []).append(pasted)
    return alone + [ends for _, ends in sorted(by_gpu.items())]


def check_smi_rows(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """``nvidia-smi --query-gpu`` CSV or nvtop rows: each GPU's own link, a speed judged by the state in
    its row."""
    rows = evidence.facts.smi_rows
    if not rows:
        return
    judged = 0
    for row in rows:
        who = f"GPU {row.index}" if row.index is not None else "a GPU"
        if row.name:
            who += f" ({row.name})"
        where = [f"{label} line {row.line}: {row.text}"]
        gpus = [row.index] if row.index is not None else []
        if row.width is not None and row.width_max is not None:
            judged += 1
            if row.width < row.width_max:
                narrow_link(report, who, row.width, row.width_max, below=[row.bus_id] if row.bus_id else [],
                            affected=who, evidence=where, gpus=gpus)
        if row.gen is not None and row.gen_max is not None:
            judged += 1
            if row.gen < row.gen_max:
                state = pstate_number(row.pstate)
                slow_link(report, who, f"Gen{row.gen}", f"Gen{row.gen_max}", gpus=gpus, evidence=where, bdf=row.bus_id,
                          state=StateRead(state, row.gen, row.gen_max, f"{label} line {row.line}: {row.pstate}")
                          if state is not None else None, gen_now=row.gen)
    if judged:
        report.check("pcie-links", "ok" if not any(f.code in ("pcie-link-narrow", "pcie-link-slow") for f in report.findings)
                     else "problem", f"{len(rows)} GPU link(s) in {label}")
        return
    idle = [r for r in rows if (pstate_number(r.pstate) or 0) >= 8]
    report.check("pcie-links", "not-made",
                 f"{label} shows each GPU's current link ({', '.join(f'Gen{r.gen} x{r.width}' for r in rows[:4])}) "
                 "but not what it can do: "
                 + ("add pcie.link.gen.max,pcie.link.width.max to the query" if all(r.source != "nvtop" for r in rows)
                    else f"nvtop shows only the current link; `{LINK_QUERY}` shows both")
                 + (f"; {len(idle)} GPU(s) in P8 or lower power, where a low generation is by design" if idle else
                    "; the performance state is not shown either (idle GPUs lower their link by design)"))


def narrow_link(report: DoctorReport, who: str, current_width: int | None, max_width: int | None, *,
                below: list[str], affected: str, evidence: list[str],
                spared: Iterable[tuple[str, str]] = (), gpus: list[int] | None = None,
                port: str | None = None, port_width: int | None = None) -> None:
    """``pcie-link-narrow`` for the link of ``who`` (``x{current_width} of x{max_width}``).

    ``below``: the GPUs (bus ids) whose copies go through that link; each is marked downtrained,
    and so is every pair with one of them, except the ``spared`` pairs (NVLink pairs do not copy
    over PCIe). ``affected``: those GPUs as the words name them. ``gpus``: the finding's GPU
    indices where the bus ids do not give them (NVML's index of a GPU without a bus id). ``max_width``
    None: lspci marked the width downgraded, its maximum not in the paste. ``port``, ``port_width``: the port
    above the GPU and its LnkCap width, where the source shows them (``port_hint``)."""
    pairs = _mark_downtrained(report, below, spared)
    report.add(Finding(
        "warning", "pcie-link-narrow",
        f"The PCIe link of {who} runs at x{current_width} of {_most(f'x{max_width}' if max_width else None)}: it "
        "trained narrower than it can "
        "(a riser, a slot wired with fewer lanes, chipset lanes, a bad seat); every copy through it gets that "
        "fraction of the bandwidth (tinygrad/open-gpu-kernel-modules#6)." + port_hint(current_width, port, port_width),
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


def gpus_narrow(narrow: list[tuple[Gpu, int, int]], ports: dict[int, tuple[str | None, int | None]] | None = None) -> Finding:
    """``pcie-link-narrow`` for GPUs whose own link runs with fewer lanes than it can; ``ports``: the port
    above a GPU and its LnkCap width, where the source's fabric graph has them (``port_hint``)."""
    ports = ports or {}
    known = [ports[g.index] for g, *_ in narrow if ports.get(g.index, (None, None))[1] is not None]
    port, width = ports.get(narrow[0][0].index, (None, None)) if len(narrow) == 1 else (None, None)
    if len(known) == len(narrow) > 1:
        width = min(w for _, w in known)  # type: ignore[type-var]
    return Finding(
        severity="warning", code="pcie-link-narrow",
        message="; ".join(f"GPU {g.index} runs at PCIe x{now} (max x{most})" for g, now, most in narrow)
        + ": fewer lanes mean proportionally less host and PCIe peer bandwidth." + port_hint(narrow[0][1], port, width, len(narrow) > 1),
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

