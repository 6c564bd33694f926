"""Doctor's host checks: the IOMMU, the kernel command line, GPUDirect RDMA's module, /dev/shm, a
VM or container, GPUs this process cannot see, and the NCCL/CUDA variables that turn P2P off."""

from __future__ import annotations

from itertools import combinations
from typing import Callable, Mapping

from gputopo.analysis.causes.doctor_common import DoctorReport, and_list
from gputopo.analysis.causes.vm_findings import virtual_machine
from gputopo.model import Finding
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.host.host_health import HostHealth

TRANSLATING = ("DMA", "DMA-FQ")
SHM_ENOUGH_BYTES = 512 << 20  # NCCL needs far more than Docker's 64 MB default (nccl#342)
IOMMU_FIX = ("boot with `iommu=pt` (keeps the IOMMU for VMs, passes host devices through), or turn it off with "
             "`intel_iommu=off` / `amd_iommu=off` (or in the BIOS: VT-d / AMD-Vi / IOMMU); e.g. add it to "
             "GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot")


def cmdline_iommu(cmdline: str | None) -> dict[str, str]:
    """The IOMMU and ACS options on a kernel command line: ``{"iommu": "pt", "intel_iommu": "on", ...}``."""
    options: dict[str, str] = {}
    for token in (cmdline or "").split():
        name, _, value = token.partition("=")
        if name in ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough"):
            options[name] = value
        if name == "pci" and ("noacs" in value or "disable_acs_redir" in value):
            options["pci"] = value
    return options


def iommu_fix(which: str | None) -> str:
    """``IOMMU_FIX`` for the IOMMU the evidence names (``intel`` / ``amd``): only its own off switch."""
    off = {"intel": "`intel_iommu=off` (or VT-d off in the BIOS)",
           "amd": "`amd_iommu=off` (or AMD-Vi / IOMMU off in the BIOS)"}.get(which or "")
    return IOMMU_FIX if off is None else (
        "boot with `iommu=pt` (keeps the IOMMU for VMs, passes host devices through), or turn it off with "
        f"{off}; e.g. add it to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, reboot")


def cmdline_vfio(cmdline: str | None) -> str | None:
    """The command line's ``vfio-pci.ids=...`` (devices bound to vfio-pci for VMs), None where it has none."""
    return next((t for t in (cmdline or "").split() if t.partition("=")[0] in ("vfio-pci.ids", "vfio_pci.ids")), None)


def host_checks(evidence: HealthEvidence, report: DoctorReport) -> None:
    host = evidence.host
    if host is None:
        return
    report.kernel_release = report.kernel_release or host.kernel_release
    report.vfio = report.vfio or cmdline_vfio(host.cmdline)
    _iommu(evidence, host, report)
    _peermem(evidence, host, report)
    _shm(host, report)
    _environment(evidence, host, report)
    _visibility(host, report)
    _virtual(host, len(evidence.gpu_bdfs), report)


def passthrough_or_off(cmdline: str | None) -> str | None:
    """``"passthrough"`` / ``"off"`` where the kernel command line says so, else None. The kernel
    reads its parameters in order: ``iommu=pt`` / ``iommu=nopt`` and ``iommu.passthrough=<bool>``
    set one default (the DMA domain type), so the last one given wins (``iommu=pt ...
    iommu.passthrough=0`` translates); ``iommu=off``, ``intel_iommu=off`` or ``amd_iommu=off`` turn
    the IOMMU off whatever that default. ``iommu=`` and the vendor options take comma lists."""
    passthrough: bool | None = None
    off = False
    for token in (cmdline or "").split():
        name, _, value = token.partition("=")
        words = value.split(",")
        if name == "iommu":
            for word in words:
                passthrough = True if word == "pt" else False if word == "nopt" else passthrough
            off = off or "off" in words
        elif name == "iommu.passthrough":
            passthrough = _kernel_bool(value, passthrough)
        elif name in ("intel_iommu", "amd_iommu"):
            off = off or "off" in words
    if off:  # off whatever the default domain type
        return "off"
    return "passthrough" if passthrough else None


def switched_on(options: dict[str, str]) -> bool:
    """Whether ``intel_iommu=`` or ``amd_iommu=`` says ``on`` (alone or in a list: ``on,sm_on``)."""
    return any("on" in options.get(name, "").split(",") for name in ("intel_iommu", "amd_iommu"))


def _kernel_bool(value: str, before: bool | None) -> bool | None:
    """The kernel's ``kstrtobool``: 1/y/t true, 0/n/f false, on/off (any case); else the value is
    refused and the setting stays as it was."""
    word = value.lower()
    if word[:1] in ("1", "y", "t") or word[:2] == "on":
        return True
    if word[:1] in ("0", "n", "f") or word[:2] == "of":
        return False
    return before


def _iommu(evidence: HealthEvidence, host: HostHealth, report: DoctorReport) -> None:
    options = cmdline_iommu(host.cmdline)
    booted = " ".join(f"{k}={v}" if v else k for k, v in options.items()) or "no IOMMU option"
    if not host.iommu_group_of:
        # The folder exists and is empty: no IOMMU is active. Missing (an archive or root without it):
        # not known, unless the command line turned the IOMMU off or to passthrough.
        said = passthrough_or_off(host.cmdline)
        report.iommu = "off" if host.iommu_groups is not None else said
        if host.iommu_groups is not None:
            report.check("iommu", "ok", "no IOMMU groups: no IOMMU is active")
        elif said is not None:
            report.check("iommu", "ok", f"the kernel command line sets the IOMMU {said} ({booted})")
        else:
            report.check("iommu", "not-made", "/sys/kernel/iommu_groups was not read (missing here), and the kernel "
                         "command line does not turn the IOMMU off or to passthrough")
        return
    grouped = {bdf: host.iommu_group_of[bdf] for bdf in evidence.gpu_bdfs if bdf in host.iommu_group_of}
    kinds = {bdf: (host.iommu_groups or {}).get(group) for bdf, group in grouped.items()}
    translated = {bdf: grouped[bdf] for bdf, kind in kinds.items() if kind in TRANSLATING}
    evidence_lines = [f"/sys/kernel/iommu_groups/{group}/type: {(host.iommu_groups or {})[group]}"
                      for group in sorted(set(translated.values()), key=lambda g: (len(g), g))][:8]
    untyped = sorted(bdf for bdf, kind in kinds.items() if kind is None)
    if untyped and not translated:  # kernels before 5.11 have no `type` file: the command line decides
        said = passthrough_or_off(host.cmdline)
        if said is None and switched_on(options):
            translated = {bdf: grouped[bdf] for bdf in untyped}
            evidence_lines = [f"/sys/kernel/iommu_groups/{grouped[untyped[0]]}: no type file (Linux before 5.11)"]
        elif said is None:
            report.check("iommu", "not-made", f"{and_list(untyped)} are in IOMMU groups without a type file (Linux "
                         "before 5.11) and /proc/cmdline does not say passthrough: see `dmesg | grep -e DMAR -e AMD-Vi`")
            return
    if not translated:
        report.iommu = "passthrough" if "identity" in kinds.values() or passthrough_or_off(host.cmdline) == "passthrough" else None
        report.check("iommu", "ok", "passthrough or no IOMMU")
        return
    report.check("iommu", "problem", f"{len(translated)} GPU(s) behind a translating IOMMU")
    nvlinked = evidence.nvml.nvlink_pairs() if evidence.nvml is not None else set()
    iommu_translating(report, f"The IOMMU translates the DMA of {and_list([report.label(b) for b in sorted(translated)])}",
                      sorted(translated), [*evidence_lines, f"/proc/cmdline: {booted}"], vendor(options, None),
                      spared=nvlinked)


def vendor(options: dict[str, str], seen_at_work: str | None) -> str | None:
    """``intel`` / ``amd``: which IOMMU the command line or a kernel line names, else None."""
    if "intel_iommu" in options or (seen_at_work and "DMAR" in seen_at_work):
        return "intel"
    if "amd_iommu" in options or (seen_at_work and "AMD-Vi" in seen_at_work):
        return "amd"
    return None


def iommu_translating(report: DoctorReport, what: str, bdfs: list[str], evidence: list[str], which: str | None,
                      spared: set[tuple[str, str]] | frozenset[tuple[str, str]] = frozenset()) -> None:
    """``iommu-translating``, whoever read it (sysfs's group types, a pasted command line or dmesg):
    ``what`` the IOMMU was seen doing, ``bdfs`` the GPUs it translates for (every GPU known where the
    evidence names none). Its fix becomes the complete one where it also turned ACS on (``doctor_acs``)."""
    report.iommu, report.iommu_vendor = "translating", which
    pairs = [(a, b) for a, b in combinations(sorted(bdfs), 2) if (a, b) not in spared]  # NVLink pairs spared
    for a, b in pairs:
        report.mark_pair(a, b, "iommu")
    report.add(Finding(
        "warning", "iommu-translating",
        f"{what}: peer-to-peer copies between GPUs can hang, run slowly or silently deliver zeros (NVIDIA/nccl#257 "
        "with tensorflow#32654, pytorch#84803).",
        gpus=report.indices(bdfs),
        evidence=evidence,
        effect=("P2P over PCIe between " + (f"{and_list([report.label(b) for b in sorted(bdfs)])}" if bdfs else
                                            "every pair of GPUs (the evidence names no GPU)")
                + " (pairs joined by NVLink are spared) and GPUDirect RDMA"),
        fix=(f"boot with `iommu=pt` (passes host devices through); keep the IOMMU on: the command line passes devices "
             f"to VMs (`{report.vfio}`); e.g. add it to GRUB_CMDLINE_LINUX in /etc/default/grub, run update-grub, "
             "reboot" if report.vfio else iommu_fix(which))), pairs)


def _peermem(evidence: HealthEvidence, host: HostHealth, report: DoctorReport) -> None:
    if not evidence.rdma_nics or not evidence.gpu_bdfs:
        return
    if host.modules is None:
        report.check("gpudirect-rdma", "not-made", "/proc/modules could not be read")
        return
    loaded = "nvidia_peermem" in host.modules or "nv_peer_mem" in host.modules or host.nv_mem_peer
    report.check("gpudirect-rdma", "ok" if loaded else "problem")
    if not loaded:
        report.add(Finding(
            "warning", "nvidia-peermem-missing",
            f"This host has RDMA NICs ({and_list(evidence.rdma_nics[:4])}) but the nvidia-peermem module is not "
            "loaded: NCCL cannot use GPUDirect RDMA through it and stages every inter-node transfer through host "
            "memory, unless its DMA-BUF path serves instead (NVIDIA's open kernel modules, Linux 5.12 or newer and a "
            "NCCL that has it; NCCL_DEBUG=INFO then shows `DMABUF` on its NET/IB lines).",
            evidence=["/proc/modules: no nvidia_peermem, no nv_peer_mem", "/sys/kernel/mm/memory_peers/nv_mem: absent"],
            effect="inter-node bandwidth of every GPU",
            fix="`sudo modprobe nvidia-peermem` (and add it to /etc/modules-load.d/ to load at boot)"))


def _shm(host: HostHealth, report: DoctorReport) -> None:
    if host.shm_bytes is None:
        return
    small = host.shm_bytes < SHM_ENOUGH_BYTES
    report.check("dev-shm", "problem" if small else "ok", f"{host.shm_bytes >> 20} MiB")
    if small:
        shm_too_small(report, f"/dev/shm is only {host.shm_bytes >> 20} MiB (Docker's default is 64 MB)",
                      [host.shm_evidence or "/dev/shm"])


SHM_FIX = "run the container with `--shm-size=1g --ulimit memlock=-1` (or `--ipc=host`)"


def shm_too_small(report: DoctorReport, said: str, evidence: list[str], severity: str = "warning") -> None:
    """``shm-too-small``, whichever door read it (this host's mounts, or a paste: ``df``, NCCL's own
    error, a ``docker run`` line). ``said``: what shows it, in the source's words."""
    report.add(Finding(
        severity, "shm-too-small",
        f"{said}: NCCL's shared-memory transport fails or hangs (NVIDIA/nccl#342).",
        evidence=evidence, effect="NCCL between processes on this host", fix=SHM_FIX))


ENV_RULES = {
    "NCCL_P2P_DISABLE": (lambda v: v.strip() not in ("", "0"), "warning",
                         "turns GPU peer-to-peer off: NCCL copies through host memory instead"),
    "NCCL_P2P_LEVEL": (lambda v: v.strip().upper() in ("LOC", "0"), "warning",
                       "LOC allows P2P between no GPUs at all (NVIDIA/nccl-tests#228)"),
    "NCCL_SHM_DISABLE": (lambda v: v.strip() not in ("", "0"), "info",
                         "turns NCCL's shared-memory transport off: processes fall back to the network"),
    "NCCL_IB_DISABLE": (lambda v: v.strip() not in ("", "0"), "info",
                        "turns InfiniBand / RoCE off: NCCL between nodes goes over TCP sockets, and GPUDirect RDMA "
                        "is not used"),
}


def _environment(evidence: HealthEvidence, host: HostHealth, report: DoctorReport) -> None:
    if host.env is None:
        report.check("environment", "not-made", "the NCCL/CUDA variables of that host were not saved (no gputopo/env)")
        return
    hits = env_findings(host.env, lambda name: f"environment: {name}={host.env[name]!r}", report, evidence.gpu_bdfs)
    report.check("environment", "problem" if hits else "ok")


def env_findings(env: Mapping[str, str], where: Callable[[str], str], report: DoctorReport,
                 gpu_bdfs: list[str] = ()) -> int:
    """``env-<name>`` for each variable of ``env`` that turns a transport off, whichever door read
    it (this host's environment, a gathered archive's, a paste's ``export`` line); ``where(name)``:
    the evidence line. Returns how many were found."""
    hits = 0
    for name, (is_bad, severity, meaning) in ENV_RULES.items():
        value = env.get(name)
        if value is None or not is_bad(value):
            continue
        hits += 1
        if name == "NCCL_P2P_DISABLE" or name == "NCCL_P2P_LEVEL":
            for a, b in combinations(sorted(gpu_bdfs), 2):
                report.mark_pair(a, b, "p2p-disabled")
        report.add(Finding(
            severity, "env-" + name.lower().replace("_", "-"),
            f"{name}={value!r} is set: it {meaning}.",
            evidence=[where(name)],
            effect="every NCCL job started from this environment",
            fix=f"`unset {name}` (and remove it from your shell profile, job script or container image)"))
    return hits


def _visibility(host: HostHealth, report: DoctorReport) -> None:
    if host.driver_gpus is None or host.device_nodes is None or not host.driver_gpus:
        return
    if len(host.device_nodes) >= len(host.driver_gpus):
        report.check("gpu-visibility", "ok")
        return
    report.check("gpu-visibility", "problem", f"{len(host.device_nodes)} of {len(host.driver_gpus)} GPUs")
    report.add(Finding(
        "info", "gpus-hidden",
        f"This process sees {len(host.device_nodes)} of the {len(host.driver_gpus)} GPUs the driver has "
        "(a container or a Slurm/cgroup device limit): NVLink or P2P peers outside the set are invisible, so NCCL "
        "cannot use them (NVIDIA/nccl#1066).",
        evidence=[f"/proc/driver/nvidia/gpus: {len(host.driver_gpus)} entries",
                  f"/dev/nvidia*: {and_list([f'nvidia{n}' for n in host.device_nodes]) or 'none'}"],
        effect="which peers a job can reach",
        fix="give each task all GPUs of the node (Slurm: `--gpus-per-node` with `--gpu-bind=none` instead of "
            "`--gpus-per-task`) and pick the device per rank with CUDA_VISIBLE_DEVICES or the local rank"))


def _virtual(host: HostHealth, gpus_seen: int, report: DoctorReport) -> None:
    """A VM: what the guest sees of PCIe, NUMA and ACS is the hypervisor's. With one GPU in the guest
    no peer-to-peer happens inside it, so the finding says so instead of warning about P2P (a real
    one-GPU H200 microVM, tests/hardware/README.md)."""
    if host.is_vm:
        what = " ".join(x for x in (host.dmi_vendor, host.dmi_product) if x) or "the CPU's hypervisor flag"
        report.add(virtual_machine(
            what, [], one_gpu=gpus_seen == 1, from_topology=False,
            evidence=[x for x in (f"/sys/class/dmi/id/sys_vendor: {host.dmi_vendor}" if host.dmi_vendor else None,
                                  "/proc/cpuinfo: hypervisor flag" if host.hypervisor_flag else None) if x]))
    if host.container:
        report.check("container", "ok", f"in a container ({host.container}): the host's /sys may be partly hidden")
