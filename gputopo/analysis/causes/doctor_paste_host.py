"""Doctor's reading of host settings users paste (``sources.evidence.pasted_env``, ``pasted_host_lines``,
``pasted_nccl_warn`` read them): NCCL/CUDA variables, ``docker run`` lines, ``/dev/shm``'s size
and NCCL's failures to use it, GPUDirect RDMA switched off, and the IOMMU options in a GRUB
config. Each cause is worded where the live check words it (``doctor_host``): the variables,
``shm-too-small``; what only a paste shows (a command line, a GRUB config) says what it is: a
setting seen, not the running host."""

from __future__ import annotations

import re

from gputopo.analysis.causes.doctor_common import DoctorReport
from gputopo.analysis.causes.doctor_host import (
    SHM_ENOUGH_BYTES,
    cmdline_iommu,
    env_findings,
    iommu_translating,
    passthrough_or_off,
    shm_too_small,
    switched_on,
)
from gputopo.model import Finding
from gputopo.sources.evidence.pasted_evidence import PastedEvidence

GDR_FIX = ("check `lsmod | grep -e nvidia_peermem -e nv_peer_mem` and `sudo modprobe nvidia-peermem`; where it is "
           "loaded, `dmesg | grep -i peermem` and `cat /sys/kernel/mm/memory_peers/nv_mem/version` (a module built "
           "against another ib_core registers nothing: reinstall the driver after MLNX OFED), or the DMA-BUF path "
           "(open kernel modules, Linux >= 5.12, NCCL >= 2.19)")


def host_paste_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    _environment(label, evidence, report)
    _shm(label, evidence, report)
    _gdr(label, evidence, report)
    _sysfs(label, evidence, report)
    _grub(label, evidence, report)


def _environment(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    settings = evidence.facts.env
    if not settings:
        return
    env = {s.name: s.value for s in settings}  # the last one given wins, as in a shell
    line_of = {s.name: s.line for s in settings}
    hits = env_findings(env, lambda name: f"{label} line {line_of[name]}: {name}={env[name]!r}", report,
                        sorted(b for b in report.gpus))
    visible = env.get("CUDA_VISIBLE_DEVICES")
    shown = f"; CUDA_VISIBLE_DEVICES={visible!r}: the job sees only those GPUs" if visible is not None else ""
    report.check("environment", "problem" if hits else "ok",
                 f"{len(env)} NCCL/CUDA variable(s) in {label}{shown} (whether they reached every rank is not shown)")


def _shm(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    facts = evidence.facts
    sized = [s for s in facts.shm_sizes if s.size is not None]
    small = [s for s in sized if s.size < SHM_ENOUGH_BYTES]
    if facts.shm_failures:
        first = facts.shm_failures[0]
        segment = next((f.size for f in facts.shm_failures if f.size), None)
        shm_too_small(report, "NCCL could not create its shared-memory segment in /dev/shm"
                      + (f" ({segment / (1 << 20):.1f} MiB)" if segment else "")
                      + (f", which is {small[0].size >> 20} MiB" if small else ": /dev/shm is full or too small "
                         "(its size is not in the paste: `df -h /dev/shm` inside the container tells)"),
                      [f"{label} line {f.line}: {f.text}" for f in facts.shm_failures[:3]]
                      + [f"{label} line {s.line}: {s.text}" for s in small[:1]], severity="error")
        report.check("dev-shm", "problem", f"NCCL's error in {label} line {first.line}")
    elif small:
        shm_too_small(report, f"/dev/shm is only {small[0].size >> 20} MiB (Docker's default is 64 MB)",
                      [f"{label} line {s.line}: {s.text}" for s in small[:3]])
        report.check("dev-shm", "problem", f"{small[0].size >> 20} MiB")
    elif sized:
        report.check("dev-shm", "ok", f"{min(s.size for s in sized) >> 20} MiB ({label} line {sized[0].line})")
    elif facts.shm_sizes:
        report.check("dev-shm", "ok", f"{label} line {facts.shm_sizes[0].line}: no size= on the tmpfs mount: the "
                     "kernel's default applies (half of RAM)")
    _docker(label, evidence, report, said=bool(facts.shm_failures or sized))


def _docker(label: str, evidence: PastedEvidence, report: DoctorReport, said: bool) -> None:
    for run in evidence.facts.docker_runs:
        where = f"{label} line {run.line}: {run.text}"
        if run.shm_bytes is not None and run.shm_bytes < SHM_ENOUGH_BYTES:
            shm_too_small(report, f"This `docker run` gives the container a /dev/shm of {run.shm_option}", [where])
        elif run.shm_option is None and not said:
            shm_too_small(report, "This `docker run` has neither `--shm-size` nor `--ipc=host`, so the container "
                          "gets Docker's default /dev/shm of 64 MB (inferred from the command: the size inside the "
                          "container is not in the paste; `df -h /dev/shm` there tells). That is likely too small "
                          "for a job of several GPUs", [where])
        if run.shm_option is not None:
            report.check("dev-shm (docker run)", "ok", f"{run.shm_option} ({label} line {run.line})")


def _gdr(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    facts = evidence.facts
    if not facts.gdr_disabled:
        if facts.net_ib_used is not None:
            report.check("gpudirect-rdma", "not-made", f"NCCL uses NET/IB in {label} (line {facts.net_ib_used.line}); "
                         "whether with GPUDirect RDMA, its `NET/IB : GPU Direct RDMA Enabled/Disabled` line says (not in "
                         "the paste; NCCL_DEBUG_SUBSYS=INIT,NET shows it)")
        return
    loaded = facts.peermem_loaded
    cause = (f"nvidia-peermem is loaded ({label} line {loaded.line}), so it most likely did not register with the "
             "ib_core in use (built against another OFED or kernel), or the DMA-BUF path is not available"
             if loaded else
             "the most common cause is the nvidia-peermem module not loaded (the paste does not show `lsmod`: "
             "unknown here); a module built against another ib_core, or no DMA-BUF support, do the same")
    report.add(Finding(
        "warning", "gdr-disabled",
        f"NCCL reports GPUDirect RDMA disabled ({len(facts.gdr_disabled)} line(s)): network transfers are staged "
        f"through host memory, costing bandwidth and CPU (a slowdown, not a hang); {cause}.",
        evidence=[f"{label} line {s.line}: {s.text}" for s in facts.gdr_disabled[:4]],
        effect="inter-node bandwidth of every GPU", fix=GDR_FIX))
    report.check("gpudirect-rdma", "problem", f"NCCL in {label}")


_SYSFS_DEVICE = re.compile(r"/([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")


def _sysfs(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """NCCL could not resolve a device's path under /sys: its topology detection stops there."""
    said = evidence.facts.sysfs_unresolved
    if not said:
        return
    devices = sorted({m.group(1).lower() for s in said for m in _SYSFS_DEVICE.finditer(s.text)})
    named = f" ({', '.join(devices)})" if devices else ""
    report.add(Finding(
        "error", "nccl-sysfs-path",
        f"NCCL could not find the PCI device{'s' if len(devices) != 1 else ''}{named} under /sys ({len(said)} line(s)): "
        "its topology detection stops there and the communicator fails ('unhandled system error') before any "
        "transport is chosen. The process sees a /sys that does not hold {'them' if len(devices) > 1 else 'it'}: a container without the "
        "host's /sys, or a VM whose virtual PCI bus the guest's sysfs links otherwise; which, the paste does not show.",
        evidence=[f"{label} line {s.line}: {s.text}" for s in said[:4]],
        effect="every NCCL communicator of the job",
        fix=("check `ls -l /sys/bus/pci/devices/` for the device inside the job's environment (in a container, "
             "give it the host's /sys read-only, as `docker run --gpus` does); a newer NCCL, whose topology code "
             "reads more sysfs layouts (the paste's `NCCL version` line says which one failed)")))


def _grub(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A GRUB config is what the next boot will use: it is judged only where no booted command line
    (``/proc/cmdline``, dmesg's) is in the paste, and worded as a configuration."""
    grub = evidence.facts.grub_cmdline
    if grub is None or evidence.cmdline is not None or evidence.default_domain is not None:
        return
    value, said = grub
    options = cmdline_iommu(value)
    booted = " ".join(f"{k}={v}" for k, v in options.items()) or "no IOMMU option"
    mode = passthrough_or_off(value)
    unproven = "whether the running kernel booted with it, `cat /proc/cmdline` shows"
    if mode is not None:
        report.check("iommu (GRUB config)", "ok", f"{booted}: {'passthrough' if mode == 'passthrough' else 'IOMMU off'}"
                     f" ({unproven})")
    elif switched_on(options):
        iommu_translating(report, "The GRUB configuration boots the kernel with the IOMMU on and without `iommu=pt`, "
                          f"so it would translate every GPU DMA ({unproven})", [],
                          [f"{label} line {said.line}: {said.text}"], None)
    else:
        report.check("iommu (GRUB config)", "not-made",
                     f"{booted}: the kernel's default applies, which the configuration does not show; read "
                     "/sys/kernel/iommu_groups/*/type")
