"""What a process sees of the host's GPUs: fewer GPUs than the driver has (``gpus-hidden``: a
container or a Slurm/cgroup device limit, read from this host's ``/proc/driver/nvidia`` and
``/dev/nvidia*``, ``check_host``), and PCI devices NCCL could not find under the ``/sys`` it was
given (``nccl-sysfs-path``: a pasted NCCL log, ``check_nccl_sysfs``)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.host_health import HostHealth

def check_host(host: HostHealth, report: DoctorReport) -> None:
    """How many GPUs this process sees (``/dev/nvidia*``) of those the driver has."""
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


_SYSFS_DEVICE = re.compile(r"/([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\b")


def check_nccl_sysfs(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
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

