"""Doctor's NVML checks: NVLinks down or erroring, the NVSwitch fabric not registered (Fabric Manager
not running: CUDA error 802), pairs NVML says cannot peer, and the GPU's own PCIe link."""

from __future__ import annotations

from gputopo.analysis.expect import pstates
from gputopo.analysis.causes.doctor_common import DoctorReport
from gputopo.analysis.causes.doctor_links import narrow_link, nvml_state, slow_link
from gputopo.analysis.causes.observed_findings import nvlink_inactive_nvml
from gputopo.model import P2P_OK, Finding
from gputopo.model.words import P2P_STATUS_MEANING
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.host.nvml_health import GpuNvmlHealth, NvmlHealth


def nvml_checks(evidence: HealthEvidence, report: DoctorReport) -> None:
    if evidence.nvml is None:
        if evidence.topology is not None:  # a gathered archive: nvidia-smi's topo -p2p r stands in for NVML
            pairs = {(link.a, link.b): link.p2p_read for link in evidence.topology.links if link.p2p_read}
            if pairs:
                p2p_words(pairs, {}, "nvidia-smi topo -p2p r (gathered): GPU{a} - GPU{b}: {word}", report)
        if evidence.nvml_unavailable:
            report.check("nvml", "not-made", evidence.nvml_unavailable)
            report.add(Finding(
                "info", "nvml-not-checked",
                f"NVLink state and errors, the NVSwitch fabric and NVML's P2P status were not checked: "
                f"{evidence.nvml_unavailable}.",
                fix="run doctor where the NVIDIA driver is loaded (inside a container: with the NVIDIA container toolkit)"))
        return
    nvml = evidence.nvml
    report.check("nvml", "ok", f"{len(nvml.gpus)} GPU(s)")
    nvlinked = nvml.nvlink_pairs()
    in_vm = evidence.host is not None and evidence.host.is_vm
    for gpu in nvml.gpus:
        _nvlinks(gpu, nvml, report, in_vm)
        _fabric(gpu, report)
        if evidence.paths.get(gpu.pci_bus_id or "") is None:  # sysfs did not place it (a container)
            _pcie(gpu, report, nvlinked)
    _fabric_check(nvml, report)
    _p2p(nvml, report)


def _bdf(gpu: GpuNvmlHealth) -> str:
    return gpu.pci_bus_id or f"index {gpu.index}"


def _nvlinks(gpu: GpuNvmlHealth, nvml: NvmlHealth, report: DoctorReport, in_vm: bool = False) -> None:
    """Some NVLinks up and some down: on bare metal a bridge, a link or the board. In a VM that holds
    fewer than 8 GPUs, most often the links to the board's GPUs the VM was not given (down by design:
    4 of an 8-GPU V100 board, say), so said as a question; a VM with 8 or more holds a whole direct-NVLink
    board (they have at most 8 GPUs), and a down link there is a fault as on bare metal."""
    if not gpu.nvlinks:
        return
    down = [link.link for link in gpu.nvlinks if link.active is False]
    active = [link for link in gpu.nvlinks if link.active]
    if down and active and in_vm and len(nvml.gpus) < 8:
        report.add(nvlink_inactive_nvml(report.label(_bdf(gpu)), gpu.index, down, len(gpu.nvlinks), in_vm=True))
    elif down and active:
        report.mark_gpu(_bdf(gpu), "nvlink-down")
        for other in nvml.gpus:
            if other.index != gpu.index and other.pci_bus_id and gpu.pci_bus_id:
                report.mark_pair(gpu.pci_bus_id, other.pci_bus_id, "nvlink-down")
        report.add(nvlink_inactive_nvml(report.label(_bdf(gpu)), gpu.index, down, len(gpu.nvlinks), in_vm=False))
    erring = {link.link: link.errors for link in active if any(link.errors.get(k) for k in ("replay", "recovery", "crc_flit", "crc_data"))}
    if erring:
        shown = [f"link {n}: " + ", ".join(f"{k} {v}" for k, v in errs.items() if v) for n, errs in erring.items()]
        report.add(nvlink_errors(report.label(_bdf(gpu)), gpu.index, shown,
                                 [f"nvmlDeviceGetNvLinkErrorCounter(GPU {gpu.index}) {s}" for s in shown[:6]], since_load=True))


def nvlink_errors(who: str, index: int, shown: list[str], evidence: list[str], *, since_load: bool = False) -> Finding:
    """``nvlink-errors``, whoever counted them (NVML on a live host, a pasted ``nvidia-smi nvlink -e``):
    ``shown`` the links and their counts in words."""
    return Finding(
        "warning", "nvlink-errors",
        f"{who} counts NVLink errors on {len(shown)} link(s){' since the driver loaded' if since_load else ''}: "
        f"{'; '.join(shown[:6])}. Replays and CRC errors cost bandwidth; recoveries retrain the link.",
        gpus=[index], evidence=evidence,
        effect=f"NVLink traffic of {who} over those links",
        fix="reset the counters (`sudo nvidia-smi nvlink -re`) and watch whether they grow under load "
            "(`nvidia-smi nvlink -e`); growing counts need the bridge or the board checked")


def _pcie(gpu: GpuNvmlHealth, report: DoctorReport, nvlinked: set[tuple[str, str]]) -> None:
    """NVML's view of the GPU's own link, where sysfs could not be read: the width is judged, the
    generation by the performance state NVML read with it (``doctor_links``)."""
    label = report.label(_bdf(gpu))
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


def _fabric(gpu: GpuNvmlHealth, report: DoctorReport) -> None:
    if gpu.fabric_state in (None, "not-supported"):
        return
    if gpu.fabric_state == "completed" and gpu.fabric_status == 0:
        if gpu.fabric_degraded_bandwidth:  # (the health mask: the V call's only)
            fabric_degraded(report, report.label(_bdf(gpu)), "degraded bandwidth", [gpu.index],
                            [f"nvmlDeviceGetGpuFabricInfoV(GPU {gpu.index}): healthMask degraded bandwidth"])
        return
    report.mark_gpu(_bdf(gpu), "nvlink-down")
    said = f"state {gpu.fabric_state}, status {gpu.fabric_status}"
    fabric_not_ready(report, report.label(_bdf(gpu)), said, [gpu.index],
                     [f"nvmlDeviceGetGpuFabricInfo(GPU {gpu.index}): {said}"], refused=gpu.fabric_state == "completed" and gpu.fabric_status is not None)


FABRIC_FIX = ("`sudo systemctl enable --now nvidia-fabricmanager` with the package at exactly the driver's version "
              "(`nvidia-smi` shows it); see `journalctl -u nvidia-fabricmanager`; where GPUs share a fabric by "
              "partitions (FABRIC_MODE=1) they stay In Progress until their partition is activated")


# Registration finished, but refused: Fabric Manager runs (it answered), so starting it is not the fix.
FABRIC_REFUSED_FIX = ("the status names why the fabric refused the GPU: read `journalctl -u nvidia-fabricmanager` (on "
                      "multi-node NVLink racks, also the NVLink switch trays' fabric manager) and `nvidia-smi -q` "
                      "(Fabric: CliqueId, ClusterUUID, Health); once the cause is fixed, restart nvidia-fabricmanager "
                      "and reset the GPU (or reboot) so it registers again")


def fabric_not_ready(report: DoctorReport, who: str, said: str, gpus: list[int], evidence: list[str], *,
                     refused: bool = False) -> None:
    """``fabric-not-ready``, whichever door read the fabric (NVML here, a pasted ``-q`` in
    ``doctor_smi_pasted``): a GPU not registered with the NVSwitch fabric cannot run CUDA. ``said``:
    the state and status in the source's words. ``refused``: the state is Completed with an error
    status (registration ran and failed), not a registration still to come."""
    if refused:
        report.add(Finding(
            "error", "fabric-not-ready",
            f"{who} finished registering with the NVSwitch fabric with an error ({said}): it is not part of an "
            "NVLink fabric, so it has no NVLink peers through it, and CUDA may refuse to start on it (error 802 "
            "'system not yet initialized').",
            gpus=gpus, evidence=evidence, effect="NVLink traffic of this GPU, and possibly every CUDA program on it",
            fix=FABRIC_REFUSED_FIX))
        return
    report.add(Finding(
        "error", "fabric-not-ready",
        f"{who} is not registered with the NVSwitch fabric ({said}): CUDA fails with "
        "error 802 'system not yet initialized' until Fabric Manager has registered every GPU.",
        gpus=gpus, evidence=evidence, effect="every CUDA program on this GPU", fix=FABRIC_FIX))


def fabric_not_ready_from_error(report: DoctorReport, module: str | None, gpus: list[int], evidence: list[str]) -> None:
    """``fabric-not-ready`` from a pasted CUDA error 802: the cause on a machine with NVSwitches, which
    the paste shows only where it names a module of such boards (``module``)."""
    report.add(Finding(
        "error", "fabric-not-ready",
        "CUDA error 802 'system not yet initialized': on a machine with NVSwitches (HGX/DGX A100, H100, H200, "
        "B200) CUDA refuses to start until Fabric Manager has registered the GPUs with the fabric (Fabric "
        "Manager not installed, not running, or not at the driver's version). "
        + (f"The paste names {module}, a module of such boards." if module else
           "Whether this machine has NVSwitches the paste does not show (`nvidia-smi topo -m`: the same NV# "
           "to every peer; `nvidia-smi -q | grep -A3 Fabric`: the fabric's State)."),
        gpus=gpus, evidence=evidence, effect="every CUDA program on this machine", fix=FABRIC_FIX))


def fabric_degraded(report: DoctorReport, who: str, health: str, gpus: list[int], evidence: list[str]) -> None:
    """``fabric-degraded``, whichever door read it: the fabric is up but says ``health``."""
    report.add(Finding(
        "warning", "fabric-degraded", f"{who}: the NVSwitch fabric reports {health}.",
        gpus=gpus, evidence=evidence, effect="NVLink traffic through the fabric",
        fix="read the whole Fabric section of `nvidia-smi -q` (which health bit is set) and the Fabric Manager "
            "log; `nvidia-smi nvlink -s` and `-e` for links down or erring"))


def _fabric_check(nvml: NvmlHealth, report: DoctorReport) -> None:
    """The fabric as a check: made where NVML gave a fabric state; not made where GPUs sit on NVSwitches
    but NVML gave none (it reports the fabric of Hopper and newer GPUs, from driver R525; an A100's
    Fabric Manager cannot be seen through it); no check where there is no fabric (a GPU on no NVSwitch
    answers the state "not supported")."""
    answered = [gpu for gpu in nvml.gpus if gpu.fabric_state not in (None, "not-supported")]
    registered = [gpu for gpu in answered if gpu.fabric_state == "completed" and gpu.fabric_status == 0]
    on_switch = [gpu for gpu in nvml.gpus if gpu.fabric_state is None and not gpu.lost
                 and any(link.active and link.remote == "switch" for link in gpu.nvlinks or [])]
    if answered:
        troubled = len(answered) - len(registered) + sum(1 for gpu in registered if gpu.fabric_degraded_bandwidth)
        report.check("nvswitch-fabric", "problem" if troubled else "ok",
                     f"{len(registered)} of {len(answered)} GPU(s) registered by Fabric Manager")
    elif on_switch:
        report.check("nvswitch-fabric", "not-made",
                     f"NVML gave no fabric state for the {len(on_switch)} GPU(s) on NVSwitches: it reports the fabric "
                     "of Hopper and newer GPUs only, from driver R525")


def _p2p(nvml: NvmlHealth, report: DoctorReport) -> None:
    bus_of = {g.index: g.pci_bus_id for g in nvml.gpus}
    p2p_words(nvml.p2p_read, bus_of, "nvmlDeviceGetP2PStatus(GPU {a}, GPU {b}, READ): {word}", report)


def p2p_words(pairs: dict[tuple[int, int], str], bus_of: dict[int, str | None], evidence_format: str,
              report: DoctorReport) -> None:
    """Findings for the pairs whose P2P read status is not ``ok`` (NVML's, or a gathered ``topo -p2p r``)."""
    bad = {pair: word for pair, word in pairs.items() if word != P2P_OK}
    report.check("p2p-status", "problem" if bad else "ok", f"{len(pairs)} pair(s)")
    by_word: dict[str, list[tuple[int, int]]] = {}
    for pair, word in sorted(bad.items()):
        by_word.setdefault(word, []).append(pair)
    for word, word_pairs in by_word.items():
        for a, b in word_pairs:
            ga, gb = bus_of.get(a), bus_of.get(b)
            if word == "DR" and ga and gb:
                report.mark_pair(ga, gb, "p2p-disabled")
        meaning = P2P_STATUS_MEANING.get(word, word)
        report.add(Finding(
            "warning" if word == "DR" else "info", "p2p-status-" + word.lower(),
            f"{len(word_pairs)} GPU pair(s) cannot use P2P reads: {word} ({meaning}).",
            gpus=sorted({g for pair in word_pairs for g in pair}),
            evidence=[evidence_format.format(a=a, b=b, word=word) for a, b in word_pairs[:6]],
            effect="these pairs copy through host memory",
            fix="a driver registry key turned P2P off: check NVreg_RegistryDwords in /etc/modprobe.d" if word == "DR"
            else "a property of the hardware or platform: place jobs on GPUs that can peer (`gputopo recommend`)"))
