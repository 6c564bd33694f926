"""ACS redirect on a PCIe bridge (``acs-redirect``): its one wording, whoever read it (sysfs on a live
host or an archive, a pasted ``lspci -vvv``, NCCL's ACS script), the GPUs and pairs it hits, and
who set it, with the fix that holds.

Who set it: once an IOMMU is on (translating or passthrough), Linux asks for ACS
(``pci_request_acs()`` from the Intel / AMD IOMMU init) and writes SrcValid, ReqRedir, CmpltRedir and
UpstreamFwd (control ``0x001d``, or the part of it a port supports) on every ACS-capable port at boot
(``pci_std_enable_acs()``); ``iommu=pt`` does not stop that, and neither does turning ACS off in the
BIOS. Such a word beside an IOMMU that is on is the kernel's doing: the ACS finding is ``caused_by`` the
IOMMU's finding (where there is one: a translating IOMMU), which carries the complete fix: the IOMMU
off where no VM needs it, else ``iommu=pt`` plus ACS cleared at every boot on every bridge at once
(one ``pci=disable_acs_redir=A;B``: the kernel keeps only the last such option). With the IOMMU off
the BIOS or firmware set it; where the evidence does not say whether an IOMMU is on, both are said.

Which pairs: the GPUs below a bridge are those on its secondary..subordinate buses (sysfs paths, or
lspci's ``Bus: primary=.., secondary=.., subordinate=..``), joined to GPU indices by bus id. Redirect
at a bridge reroutes the pairs with one GPU below it and one elsewhere; at a switch's downstream port,
only those whose other GPU is in the same switch (below the upstream port it hangs under): their peer
traffic would turn inside the switch and is sent up to the root complex instead. A pair that leaves
the switch goes through the root complex anyway: ACS does not change its path (the IOMMU does, where
it translates: its own finding). Where the evidence does not show the switch, one GPU below and one
elsewhere is said.

The doors: ``check_sysfs`` (the bridges above each GPU read from sysfs, on a live host or an
archive) and ``check_lspci`` (the ACSCtl words of a pasted ``lspci -vvv`` or ``setpci`` loop, with
the buses each bridge's ``Bus:`` line shows); ``link_causes`` joins each bridge to the IOMMU finding
that set it, once every door has been read.
"""

from __future__ import annotations

from itertools import combinations
from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list, at_line, gpus_in_range, pairs_text
from gputopo.model import Finding
from gputopo.quoting import shell_word
from gputopo.sources.host.pcie_health import ACS_REDIRECT_MASK, AcsState

if TYPE_CHECKING:
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.pcie_health import GpuPciePath, PciNode

# The bits Linux's pci_std_enable_acs() writes (SrcValid, ReqRedir, CmpltRedir, UpstreamFwd): 0x001d.
KERNEL_ACS_BITS = 0x001D

NO_BUS_IDS = ("the pastes give no PCI bus ids for the GPUs (p2pBandwidthLatencyTest's `Device: N, ..., pciBusID:` "
              "lines, `nvidia-smi -q` or the GPUs' own lspci headers give them)")

# grub-mkconfig copies GRUB_CMDLINE_LINUX unquoted into grub.cfg's `linux` line, and GRUB's script, like the
# shell, ends a command at a bare `;`: the kernel would get the option's first bridge and nothing after it.
GRUB = ("add the option to GRUB_CMDLINE_LINUX in /etc/default/grub with each `;` written `\\;` (GRUB's own script, "
        "like the shell, ends a command at a bare `;`, and the kernel would get nothing after the first bridge), run "
        "update-grub, check the `linux` line of /boot/grub/grub.cfg, reboot; the loop goes in a boot-time unit (a "
        "systemd oneshot service), not in GRUB")

# A kernel without pci=disable_acs_redir=: only the IOMMU option goes in GRUB (the loop's unit is said already).
GRUB_IOMMU_ONLY = "the IOMMU option goes in GRUB_CMDLINE_LINUX in /etc/default/grub: run update-grub, reboot"

DISABLE_ACS_REDIR_SINCE = (5, 1)  # the kernel that added pci=disable_acs_redir=


def check_sysfs(paths: dict[str, GpuPciePath], report: DoctorReport, nvlinked: set[tuple[str, str]]) -> None:
    """The bridges above each GPU as sysfs shows them (a live host, an archive): ACS read from each
    bridge's ``config`` (or why it could not be), a finding per bridge that redirects; NVLink pairs spared."""
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


def _affected_pairs(bridge: str, paths: dict[str, GpuPciePath]) -> list[tuple[str, str]]:
    """Pairs whose peer traffic a redirect at ``bridge`` reroutes (``pairs_hit``): it is on
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


def check_lspci(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """The ACSCtl words of a pasted ``lspci -vvv`` (or ``setpci`` loop): the GPUs each bridge hits from its
    ``Bus:`` line; words the paste does not tie to a bridge, said once."""
    on = [a for a in evidence.acs if a.control & ACS_REDIRECT_MASK]
    if evidence.acs:
        report.check("acs", "problem" if on else "ok", f"{len(evidence.acs)} ACS control word(s) in {label}")
    gpus = sorted(report.gpus)
    for acs in (a for a in on if a.bdf):
        bus_range, port = evidence.bus_ranges.get(acs.bdf), evidence.port_types.get(acs.bdf)
        below = gpus_in_range(gpus, acs.bdf, bus_range)
        why = ("the paste does not show the bridge's buses (lspci -vvv's `Bus: primary=.., secondary=.., "
               "subordinate=..` line)" if bus_range is None else NO_BUS_IDS if not gpus else
               "no GPU the evidence names is on its buses" if not below else "")
        switch = _switch_gpus(evidence, acs.bdf, gpus) if port == "Downstream Port" else None
        acs_redirect(report, acs.bdf, acs.control, [f"{at_line(label, acs.line)}: {acs_words(acs.control)}"],
                     pairs=pairs_hit(below, gpus, switch) if below else [], gpus=below, port=port, why_no_pairs=why)
    unnamed = [a for a in on if not a.bdf]
    if unnamed:
        acs_redirect(report, None, max(a.control for a in unnamed), [f"{at_line(label, a.line)}: {a.text}" for a in unnamed[:6]],
                     pairs=[], gpus=[], count=len(unnamed),
                     why_no_pairs="the paste does not say which bridges (find them with "
                                  "`sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'`)")


def _switch_gpus(evidence: PastedEvidence, port: str, gpus: list[str]) -> list[str] | None:
    """The GPUs below the switch a downstream port belongs to: below the upstream port whose
    secondary bus is the port's own bus; None where the paste does not show that upstream port."""
    domain, bus = port.split(":")[0], int(port.split(":")[1], 16)
    for bdf, (secondary, _) in evidence.bus_ranges.items():
        if (bdf.split(":")[0] == domain and secondary == bus
                and evidence.port_types.get(bdf) == "Upstream Port"):
            return gpus_in_range(gpus, bdf, evidence.bus_ranges[bdf])
    return None


def pairs_hit(below: list[str], gpus: list[str], switch: list[str] | None = None) -> list[tuple[str, str]]:
    """The pairs of ``gpus`` whose P2P a redirect at a bridge with ``below`` under it reroutes: one GPU
    below it, the other not. At a switch's port (``switch``: the GPUs below that switch), only the
    pairs within the switch: their traffic would turn inside it, and the redirect sends it up to the
    root complex; a pair that leaves the switch goes up there anyway (the IOMMU's finding covers it)."""
    under, inside = set(below), set(switch) if switch is not None else None
    return [(a, b) for a, b in combinations(sorted(gpus), 2)
            if (a in under) != (b in under) and (inside is None or (a in inside and b in inside))]


def acs_redirect(report: DoctorReport, bdf: str | None, control: int, evidence: list[str], *,
                 pairs: list[tuple[str, str]], gpus: list[str], port: str | None = None, why_no_pairs: str = "",
                 spared: int = 0, count: int = 1) -> Finding:
    """``acs-redirect`` at bridge ``bdf`` (None: ``count`` devices a grepped paste does not name):
    ``pairs`` (bus ids) the pairs it hits, ``gpus`` the GPUs below it; ``why_no_pairs`` says why none
    are named. Its cause and fix are set once every check has run (``link_causes``)."""
    where = f"PCIe bridge {bdf}" + (f" (a switch's {port.lower()})" if port == "Downstream Port" else "") if bdf else \
        f"{count} device(s) the paste does not name (their header lines are not in it: grepped out or cut off)"
    if pairs:
        effect = f"P2P between {pairs_text(report, pairs)}"
    else:
        effect = f"P2P of the GPU(s) below {'it' if bdf else 'them'}" + (f": {why_no_pairs}" if why_no_pairs else "")
    if spared:
        effect += f" ({spared} pair(s) joined by NVLink copy over it, not through this bridge)"
    finding = Finding(
        "error", "acs-redirect",
        f"ACS redirect is on at {where}: peer-to-peer traffic through it is sent up to the root complex (and the "
        "IOMMU) instead of straight across: slow copies, hangs or wrong data (NVIDIA/nccl#2079, #606); "
        "`nvidia-smi topo -p2p` can still say OK.",
        gpus=report.indices(gpus), evidence=evidence,
        effect=effect + "; GPUDirect RDMA between those GPUs and NICs across it",
        fix=None)
    for a, b in pairs:
        report.mark_pair(a, b, "acs")
    report.add(finding, pairs)
    report.acs_on.append((finding, bdf, control, port))
    return finding


def acs_words(control: int) -> str:
    return f"ACS control 0x{control:04x} ({AcsState('read', control).words()})"


def _clear_all(bdfs: list[str]) -> tuple[str, str]:
    """The two ways to clear ACS on every bridge at every boot: one kernel option, one shell loop."""
    option = f"`pci=disable_acs_redir={';'.join(bdfs)}`"
    loop = f"`for b in {' '.join(shell_word(b) for b in bdfs)}; do sudo setpci -s \"$b\" ECAP_ACS+6.w=0000; done`"
    return option, loop


MAX_LISTED_IN_EVERY_FIX = 16


def _referred(bdfs: list[str]) -> tuple[str, str]:
    """``_clear_all``'s two ways, said without the list (the first acs-redirect finding holds it)."""
    first = f"the acs-redirect finding of {bdfs[0]}"
    return (f"`pci=disable_acs_redir=` listing all {len(bdfs)} bridges (written out in {first})",
            f"the `setpci` loop over all {len(bdfs)} bridges (written out in {first})")


def _ways(report: DoctorReport, option: str, loop: str) -> tuple[str, str, str]:
    """(the kernel option as said, clearing every bridge at once, the fix that lasts) for the kernel
    the evidence shows."""
    old = _older_than(report.kernel_release, DISABLE_ACS_REDIR_SINCE)
    if old:  # the evidence shows a kernel that has no pci=disable_acs_redir=: the loop is the way
        at_once = (f"{loop} at every boot (this kernel, {report.kernel_release}, predates `pci=disable_acs_redir=`, "
                   f"which Linux 5.1 added; run the loop from a systemd oneshot unit)")
        option = f"{option} (on Linux 5.1 or newer; this kernel is {report.kernel_release}: the loop at every boot instead)"
    else:
        at_once = (f"ONE {option} (Linux 5.1 or newer; the kernel keeps only the last `pci=disable_acs_redir=` option, "
                   f"so list every bridge, `;`-separated), or {loop}")
    clear = f"clear ACS at every boot on every bridge at once: {at_once}"
    kernel_fix = ((f"keep the IOMMU on: the command line passes devices to VMs (`{report.vfio}`); boot with `iommu=pt` "
                   f"AND {clear}; " if report.vfio else
                   f"{_iommu_off(report.iommu_vendor)} where no VM or device passthrough needs the IOMMU: that removes "
                   f"the IOMMU's translation and Linux no longer turns ACS on; otherwise boot with `iommu=pt` AND {clear}; ")
                  + (GRUB_IOMMU_ONLY if old else GRUB))
    return option, at_once, kernel_fix


def _iommu_off(vendor: str | None) -> str:
    return {"intel": "`intel_iommu=off` (VT-d off in the BIOS)", "amd": "`amd_iommu=off` (AMD-Vi / IOMMU off in the BIOS)"}.get(
        vendor or "", "`intel_iommu=off` / `amd_iommu=off` (VT-d / AMD-Vi off in the BIOS)")


def _older_than(release: str | None, version: tuple[int, int]) -> bool:
    """Whether the kernel ``release`` ("4.15.0-112-generic") is older than ``version``; False where not known."""
    # ASCII digits, a few of them: a gathered osrelease of "².15" (``isdigit`` says yes, ``int`` no) or of
    # thousands of digits ended doctor in a ValueError traceback, exit 1.
    parts = (release or "").split(".")
    if len(parts) < 2 or not (parts[0].isascii() and parts[0].isdigit() and len(parts[0]) <= 4):
        return False
    minor = "".join(ch for ch in parts[1][:3] if ch.isascii() and ch.isdigit()) if parts[1][:1].isdigit() else ""
    return bool(minor) and (int(parts[0]), int(minor)) < version


def link_causes(report: DoctorReport) -> None:
    """Once every check has run: each ACS finding said as the kernel's or the firmware's doing, linked
    to the IOMMU finding that causes it, and the complete fix on the root cause."""
    named = sorted({bdf for _, bdf, _, _ in report.acs_on if bdf})
    full = _ways(report, *_clear_all(named or ["<bdf>"]))
    # Every bridge listed in every bridge's fix grew as the square of the bridges (a paste of 4,000
    # made 4,000 fixes of 4,000 bus ids): past a few, the first finding lists them, the rest refer to it.
    short = full if len(named) <= MAX_LISTED_IN_EVERY_FIX else _ways(report, *_referred(named))
    cause = next((f for f in report.findings if f.code == "iommu-translating"), None)
    state = report.iommu
    kernel_set = [f for f, _, control, _ in report.acs_on if state in ("translating", "passthrough")
                  and control & ~KERNEL_ACS_BITS == 0]
    for k, (finding, bdf, control, _) in enumerate(report.acs_on):
        option, at_once, kernel_fix = full if k == 0 else short
        here = f"`sudo setpci -s {shell_word(bdf)} ECAP_ACS+6.w=0000`" if bdf else \
            "per bridge `sudo setpci -s <bdf> ECAP_ACS+6.w=0000` (find them with `sudo lspci -vvv | grep -E '^[0-9a-f]|ACSCtl'`)"
        if finding in kernel_set:
            finding.message += (
                f" Linux set it: the IOMMU is on ({state}), and with an IOMMU on the kernel turns ACS on at boot on "
                "every ACS-capable port (SrcValid, ReqRedir, CmpltRedir, UpstreamFwd: 0x001d), so turning ACS off in "
                "the BIOS does not last and `iommu=pt` leaves it on.")
            if cause is not None:
                report.causes[id(finding)] = cause
                keep = (f"`iommu=pt` (keep the IOMMU: the command line passes devices to VMs, `{report.vfio}`) plus one"
                        if report.vfio else
                        f"{_iommu_off(report.iommu_vendor)} where no VM needs the IOMMU, else `iommu=pt` plus one")
                finding.fix = (f"fix the cause, the IOMMU (iommu-translating, whose fix covers every bridge): {keep} "
                               f"{option} listing every bridge; this bridge alone until the next boot: {here}")
            else:
                finding.fix = f"this bridge alone until the next boot: {here}; to last: {kernel_fix}"
        elif state == "off":
            finding.message += " The IOMMU is off, so Linux did not set it: the BIOS or the switch's firmware did."
            finding.fix = (f"turn ACS off in the BIOS (often 'PCIe ACS' / 'ACS Enable' under PCIe or IIO settings) or "
                           f"the switch's firmware settings; until then {here} at every boot, or for every bridge at once {at_once}")
        else:
            unknown = state is None
            finding.message += (
                " Who set it is not known: " + ("the evidence does not say whether an IOMMU is on (Linux turns ACS on "
                "where one is; give dmesg or /proc/cmdline)" if unknown else
                f"the IOMMU is {state}, but this control word is not the kernel's 0x001d") + ".")
            finding.fix = (f"{here} clears it until the next boot; to last: where an IOMMU is on, Linux sets ACS at boot: "
                           f"{kernel_fix}; where it is off, turn ACS off in the BIOS ('PCIe ACS' / 'ACS Enable')")
    if cause is not None and kernel_set:
        bridges = and_list([b for f, b, _, _ in report.acs_on if f in kernel_set and b]) or "the bridges named"
        cause.message += f" It is also why Linux turned ACS redirect on at {bridges} (see acs-redirect)."
        cause.fix = full[2]

