"""Doctor's PCIe checks on the paths read from sysfs: ACS on a bridge above a GPU, and links trained
below what they can do (on the GPU or any bridge above it).

Idle GPUs lower their link speed to save power: a speed below max is judged by the GPU's performance
state where one was read with it (NVML on a live host, a gathered archive's ``nvidia-smi -q``), on
the GPU's own link (the GPU, and the port right above it: the other end of that link): at P0 a
fault, at P8 or lower power idle; elsewhere (no state, a bridge higher up, whose link no GPU's state
governs) only "maybe idle" (info, with how to check under load). A width below max is a fault.
"""

from __future__ import annotations

from itertools import combinations

from gputopo.analysis.causes.doctor_acs import acs_redirect, acs_words, pairs_hit
from gputopo.analysis.causes.doctor_common import (
    DoctorReport,
    and_list,
    gen_number,
    gts_to_gen,
)
from gputopo.analysis.causes.doctor_links import StateRead, narrow_link, slow_link, states_read
from gputopo.model import Finding
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.host.pcie_health import GpuPciePath, PciNode


def pcie_checks(evidence: HealthEvidence, report: DoctorReport) -> None:
    paths = {bdf: path for bdf, path in evidence.paths.items() if path is not None}
    unplaced = [bdf for bdf, path in evidence.paths.items() if path is None]
    container = evidence.host.container if evidence.host is not None else None
    hidden = f" (in a container: {container}; the host's PCI tree may be hidden)" if container else ""
    if not evidence.gpu_bdfs:
        report.check("pcie-paths", "not-made", "no NVIDIA GPU listed under /sys/bus/pci/devices" + hidden)
        return
    if unplaced:
        report.check("pcie-paths", "not-made", f"sysfs does not place {and_list(unplaced)} in the PCI tree" + hidden)
    nvlinked = evidence.nvml.nvlink_pairs() if evidence.nvml is not None else set()
    _acs(paths, report, nvlinked)
    _links(paths, report, nvlinked, states_read(evidence))


def _affected_pairs(bridge: str, paths: dict[str, GpuPciePath]) -> list[tuple[str, str]]:
    """Pairs whose peer traffic a redirect at ``bridge`` reroutes (``doctor_acs.pairs_hit``): it is on
    one GPU's path and not above both; below a root port, both GPUs under the bridge just above it
    (the switch's upstream port), where their traffic would otherwise turn."""
    below = [bdf for bdf, path in paths.items() if any(n.bdf == bridge for n in path.nodes)]
    switch = None
    for bdf in below[:1]:
        nodes = paths[bdf].nodes
        at = next(i for i, n in enumerate(nodes) if n.bdf == bridge)
        if at > 0:  # not a root port: the bridge above it is the switch's upstream port
            above = nodes[at - 1].bdf
            switch = [g for g, path in paths.items() if any(n.bdf == above for n in path.nodes)]
    return pairs_hit(below, list(paths), switch)


def _acs(paths: dict[str, GpuPciePath], report: DoctorReport, nvlinked: set[tuple[str, str]]) -> None:
    bridges: dict[str, PciNode] = {}
    for path in paths.values():
        for node in path.bridges:
            bridges.setdefault(node.bdf, node)
    unreadable = sorted(bdf for bdf, node in bridges.items() if node.acs.status in ("not-root", "unreadable"))
    on = sorted(bdf for bdf, node in bridges.items() if node.acs.redirects)
    if unreadable:
        why = ("extended PCI config space (offset 0x100 on) is readable only by root"
               if any(bridges[b].acs.status == "not-root" for b in unreadable) else "their config files cannot be read")
        report.check("acs", "not-made", f"ACS of {len(unreadable)} bridge(s) not read: {why}")
        report.add(Finding(
            "info", "acs-not-checked",
            f"ACS (PCIe Access Control Services) on {len(unreadable)} bridge(s) above the GPUs could not be read: {why}.",
            fix="run `sudo gputopo doctor`, or `sudo lspci -vvv | grep ACSCtl` (ReqRedir+ or CmpltRedir+ means ACS is on)",
            evidence=[f"/sys/bus/pci/devices/{b}/config: {'256 bytes (not root)' if bridges[b].acs.status == 'not-root' else 'unreadable'}"
                      for b in unreadable[:8]]))
    elif bridges:
        report.check("acs", "problem" if on else "ok", f"{len(bridges)} bridge(s) read")
    for bdf in on:
        node = bridges[bdf]
        crossing = _affected_pairs(bdf, paths)
        pairs = [pair for pair in crossing if pair not in nvlinked]  # NVLink pairs copy over NVLink instead
        acs_redirect(report, bdf, node.acs.control or 0, [f"{node.sysfs_path}/config: {acs_words(node.acs.control or 0)}"],
                     pairs=pairs, gpus=sorted({g for pair in crossing for g in pair}),
                     spared=len(crossing) - len(pairs))


def _links(paths: dict[str, GpuPciePath], report: DoctorReport, nvlinked: set[tuple[str, str]],
           states: dict[str, StateRead]) -> None:
    seen: set[str] = set()
    slow_width, slow_speed, any_link = [], [], False
    own_link: dict[str, str] = {}  # the GPU and the port right above it -> that GPU (both read its own link)
    for gpu_bdf, path in sorted(paths.items()):
        own_link[gpu_bdf] = gpu_bdf
        if len(path.nodes) >= 2:
            own_link.setdefault(path.nodes[-2].bdf, gpu_bdf)
        for node in path.nodes:
            if node.bdf in seen:
                continue
            seen.add(node.bdf)
            any_link = any_link or node.link.max_width is not None
            if node.link.width_below_max:
                slow_width.append(node)
            if node.link.speed_below_max:  # a narrow link's speed is said too (it may be idle, or trained down)
                slow_speed.append(node)
    if not any_link:
        report.check("pcie-links", "not-made", "no link files (current_link_width, max_link_width) under sysfs")
        return
    def gpus_below(node: PciNode) -> list[str]:
        return sorted(bdf for bdf, path in paths.items() if any(n.bdf == node.bdf for n in path.nodes))

    for node in slow_width:
        below = gpus_below(node)
        link = node.link
        what = "the GPU" if node.bdf in paths else "a bridge above " + and_list([report.label(b) for b in below])
        narrow_link(
            report, f"{node.bdf} ({what})", link.current_width, link.max_width, below=below,
            affected=and_list([report.label(b) for b in below]), spared=nvlinked,
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
