"""GPUDirect RDMA between nodes: the nvidia-peermem module missing on a host with RDMA NICs
(``nvidia-peermem-missing``: this host's or an archive's ``/proc/modules``, ``check_host``; a pasted
``lsmod | grep`` that printed no peer-memory module, ``check_nccl_log``), or NCCL reporting GPUDirect
RDMA disabled in a pasted log (``gdr-disabled``, ``check_nccl_log``: a slowdown, staged through host
memory, not a hang)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list
from gputopo.model import Finding

if TYPE_CHECKING:
    from gputopo.sources.evidence.health import HealthEvidence
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.host_health import HostHealth

GDR_FIX = ("check `lsmod | grep -e nvidia_peermem -e nv_peer_mem` and `sudo modprobe nvidia-peermem`; where it is "
           "loaded, `dmesg | grep -i peermem` and `cat /sys/kernel/mm/memory_peers/nv_mem/version` (a module built "
           "against another ib_core registers nothing: reinstall the driver after MLNX OFED), or the DMA-BUF path "
           "(open kernel modules, Linux >= 5.12, NCCL >= 2.19)")


def check_host(evidence: HealthEvidence, host: HostHealth, report: DoctorReport) -> None:
    """This host's (or an archive's) ``/proc/modules`` where it has RDMA NICs: nvidia-peermem loaded?"""
    if not evidence.rdma_nics or not evidence.gpu_bdfs:
        return
    if host.modules is None:
        report.check("gpudirect-rdma", "not-made", "/proc/modules could not be read")
        return
    loaded = "nvidia_peermem" in host.modules or "nv_peer_mem" in host.modules or host.nv_mem_peer
    report.check("gpudirect-rdma", "ok" if loaded else "problem")
    if not loaded:
        _peermem_missing(report, f"This host has RDMA NICs ({and_list(evidence.rdma_nics[:4])}) but the nvidia-peermem "
                         "module is not loaded", ["/proc/modules: no nvidia_peermem, no nv_peer_mem",
                                                  "/sys/kernel/mm/memory_peers/nv_mem: absent"])


def _peermem_missing(report: DoctorReport, what: str, evidence: list[str]) -> None:
    report.add(Finding(
        "warning", "nvidia-peermem-missing",
        f"{what}: NCCL cannot use GPUDirect RDMA through it and stages every inter-node transfer through host "
        "memory, unless its DMA-BUF path serves instead (NVIDIA's open kernel modules, Linux 5.12 or newer and a "
        "NCCL that has it; NCCL_DEBUG=INFO then shows `DMABUF` on its NET/IB lines).",
        evidence=evidence, effect="inter-node bandwidth of every GPU",
        fix="`sudo modprobe nvidia-peermem` (and add it to /etc/modules-load.d/ to load at boot)"))


def check_nccl_log(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A pasted NCCL log: GPUDirect RDMA disabled, or NET/IB used without saying whether with it."""
    facts = evidence.facts
    absent = facts.peermem_absent if facts.peermem_loaded is None else None
    if absent is not None:
        uses_ib = f"; NCCL uses NET/IB here (line {facts.net_ib_used.line})" if facts.net_ib_used else ""
        _peermem_missing(report, f"`lsmod | grep` printed no nvidia_peermem or nv_peer_mem row ({label} line "
                         f"{absent.line}): the peer-memory module is not loaded{uses_ib}", [f"{label} line {absent.line}: "
                                                                                          f"{absent.text} (no output)"])
        if not facts.gdr_disabled:
            report.check("gpudirect-rdma", "problem", f"no peer-memory module in {label}")
            return
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
             f"the paste shows the peer-memory module not loaded ({label} line {absent.line})" if absent else
             "the most common cause is the nvidia-peermem module not loaded (the paste does not show `lsmod`: "
             "unknown here); a module built against another ib_core, or no DMA-BUF support, do the same")
    report.add(Finding(
        "warning", "gdr-disabled",
        f"NCCL reports GPUDirect RDMA disabled ({len(facts.gdr_disabled)} line(s)): network transfers are staged "
        f"through host memory, costing bandwidth and CPU (a slowdown, not a hang); {cause}.",
        evidence=[f"{label} line {s.line}: {s.text}" for s in facts.gdr_disabled[:4]],
        effect="inter-node bandwidth of every GPU", fix=GDR_FIX))
    report.check("gpudirect-rdma", "problem", f"NCCL in {label}")

