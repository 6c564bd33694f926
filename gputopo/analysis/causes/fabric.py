"""The NVSwitch fabric: a GPU not registered with it (``fabric-not-ready``: CUDA fails with error
802 until Fabric Manager has registered it) or registered and unhealthy (``fabric-degraded``), in
one wording whichever door read it: NVML's fabric state on a live host (``check_nvml_gpu``, and the
fabric as a check: ``check_nvml``), a pasted ``nvidia-smi -q`` Fabric section (``check_smi_paste``),
a pasted CUDA error 802 (``check_cuda_errors``), Fabric Manager's log refusing to start on another
driver version (``fabric-not-ready``) and saying it found no NVSwitch (``fabric-manager-no-nvswitch``,
both ``check_fabric_manager_log``).

A Fabric section grep cut from its GPU block is said for "a GPU the paste does not name"."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list, nvml_bus_id
from gputopo.analysis.causes.nvlink import BOARD_MODULE
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence, PastedFabric
    from gputopo.sources.host.nvml_health import GpuNvmlHealth, NvmlHealth

FABRIC_FIX = ("`sudo systemctl enable --now nvidia-fabricmanager` with the package at exactly the driver's version "
              "(`nvidia-smi` shows it); see `journalctl -u nvidia-fabricmanager`; where GPUs share a fabric by "
              "partitions (FABRIC_MODE=1) they stay In Progress until their partition is activated")

# Registration finished, but refused: Fabric Manager runs (it answered), so starting it is not the fix.
FABRIC_REFUSED_FIX = ("the status names why the fabric refused the GPU: read `journalctl -u nvidia-fabricmanager` (on "
                      "multi-node NVLink racks, also the NVLink switch trays' fabric manager) and `nvidia-smi -q` "
                      "(Fabric: CliqueId, ClusterUUID, Health); once the cause is fixed, restart nvidia-fabricmanager "
                      "and reset the GPU (or reboot) so it registers again")

NOT_A_VALUE = ("", "N/A", "Not Supported", "[N/A]", "[Not Supported]")


def check_nvml_gpu(gpu: GpuNvmlHealth, report: DoctorReport) -> None:
    """One GPU's fabric state as NVML reads it: not registered, refused, or registered and degraded."""
    if gpu.fabric_state in (None, "not-supported"):
        return
    if gpu.fabric_state == "completed" and gpu.fabric_status == 0:
        if gpu.fabric_degraded_bandwidth:  # (the health mask: the V call's only)
            fabric_degraded(report, report.label(nvml_bus_id(gpu)), "degraded bandwidth", [gpu.index],
                            [f"nvmlDeviceGetGpuFabricInfoV(GPU {gpu.index}): healthMask degraded bandwidth"])
        return
    report.mark_gpu(nvml_bus_id(gpu), "nvlink-down")
    said = f"state {gpu.fabric_state}, status {gpu.fabric_status}"
    fabric_not_ready(report, report.label(nvml_bus_id(gpu)), said, [gpu.index],
                     [f"nvmlDeviceGetGpuFabricInfo(GPU {gpu.index}): {said}"], refused=gpu.fabric_state == "completed" and gpu.fabric_status is not None)


def check_nvml(nvml: NvmlHealth, report: DoctorReport) -> None:
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


def check_smi_paste(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A finding per GPU whose fabric is not ready or not healthy; one check for the paste."""
    if not evidence.fabric:
        return
    outcomes = [_fabric(label, fabric, report) for fabric in evidence.fabric]
    said = {word: outcomes.count(word) for word in ("registered", "no fabric", "problem") if word in outcomes}
    report.check("nvswitch fabric", "problem" if "problem" in said else "ok",
                 f"{len(outcomes)} Fabric section(s) in {label}: "
                 + ", ".join(f"{n} {'with a problem' if word == 'problem' else word}" for word, n in said.items())
                 + (" (State N/A: no NVSwitch fabric to register with)" if "no fabric" in said else ""))


def _fabric(label: str, fabric: PastedFabric, report: DoctorReport) -> str:
    """``registered``, ``no fabric`` or ``problem`` (a finding said)."""
    state, status = fabric.fields.get("State", ""), fabric.fields.get("Status", "")
    summary, bandwidth = fabric.fields.get("Health/Summary", ""), fabric.fields.get("Health/Bandwidth", "")
    who = report.label(fabric.gpu) if fabric.gpu else "A GPU (the paste does not say which)"
    where = f"{label} line {fabric.line}: Fabric State {state or '?'}, Status {status or '?'}"
    if state in NOT_A_VALUE:
        return "no fabric"
    gpus = report.indices([fabric.gpu]) if fabric.gpu else []
    if state != "Completed" or status != "Success":
        if fabric.gpu:
            report.mark_gpu(fabric.gpu, "nvlink-down")
        fabric_not_ready(report, who, f"State {state}, Status {status}", gpus, [where],
                         refused=state == "Completed" and status not in (*NOT_A_VALUE, ""))
        return "problem"
    if summary not in (*NOT_A_VALUE, "Healthy") or bandwidth not in (*NOT_A_VALUE, "Full"):
        fabric_degraded(report, who, f"its health as {summary or '?'} (bandwidth {bandwidth or '?'})", gpus,
                        [f"{where}, Health Summary {summary or '?'}, Bandwidth {bandwidth or '?'}"])
        return "problem"
    return "registered"


def _models(evidence: PastedEvidence) -> str | None:
    names = sorted({n for n in evidence.nvlink_names.values() if BOARD_MODULE.search(n)})
    return and_list(names[:3]) if names else None


def check_cuda_errors(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A pasted CUDA error 802 ('system not yet initialized'): the fabric not ready, where the paste
    names a module of NVSwitch boards; the other CUDA errors are peer access's (``p2p_support``)."""
    errors = [e for e in evidence.facts.cuda_errors if e.code == 802]
    if errors:
        module = _models(evidence)
        fabric_not_ready_from_error(report, module, sorted(g for g, n in evidence.nvlink_names.items() if BOARD_MODULE.search(n)),
                                    [f"{label} line {e.line}: {e.text}" for e in errors[:3]])


def check_fabric_manager_log(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """Fabric Manager's log: refusing to start because it was built for another driver (the fabric is
    then never initialised), or saying it found no NVSwitch (``NV_WARN_NOTHING_TO_DO``: harmless)."""
    versions = evidence.facts.fabric_versions
    if versions is not None:
        report.check("nvswitch-fabric", "problem", f"Fabric Manager refuses to start ({label} line {versions.line}): "
                     f"built for driver {versions.manager}, the driver is {versions.driver}")
        report.add(Finding(
            "error", "fabric-not-ready",
            f"Fabric Manager refuses to start: it was built for driver {versions.manager} and the loaded driver is "
            f"{versions.driver} (they must be the same version). On a machine with NVSwitches (HGX/DGX) nothing "
            "registers the GPUs with the fabric, so CUDA fails with error 802 'system not yet initialized' and the "
            "GPUs have no NVLink peers; a machine without NVSwitches does not need Fabric Manager at all.",
            evidence=[f"{label} line {versions.line}: {versions.text}"], effect="every CUDA program on an NVSwitch machine",
            fix=f"install the nvidia-fabricmanager package of exactly the driver's version ({versions.driver}), or the "
                f"driver of Fabric Manager's ({versions.manager}), hold both against upgrades (`apt-mark hold`), then "
                "`sudo systemctl restart nvidia-fabricmanager`"))
    said = evidence.facts.fabric_nothing_to_do
    if said is None:
        return
    report.check("nvswitch-fabric", "ok", f"Fabric Manager found no NVSwitch ({label} line {said.line}): none to manage")
    report.add(Finding(
        "info", "fabric-manager-no-nvswitch",
        "Fabric Manager stopped with NV_WARN_NOTHING_TO_DO: it found no NVSwitch. Only NVSwitch systems (HGX/DGX) "
        "need it; GPUs joined by an NVLink bridge, or by PCIe alone, do not. Its failed service is harmless here.",
        evidence=[f"{label} line {said.line}: {said.text}"],
        fix="`sudo systemctl disable --now nvidia-fabricmanager` (or remove the package); `nvidia-smi nvlink -s` "
            "shows whether bridge links are up"))


def fabric_not_ready(report: DoctorReport, who: str, said: str, gpus: list[int], evidence: list[str], *,
                     refused: bool = False) -> None:
    """``fabric-not-ready``, whichever door read the fabric (NVML, ``check_nvml_gpu``; a pasted ``-q``,
    ``check_smi_paste``): a GPU not registered with the NVSwitch fabric cannot run CUDA. ``said``:
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

