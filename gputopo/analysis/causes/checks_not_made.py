"""What doctor could not check, and what would make it: the whole check list for pasted evidence
(``doctor --from`` text files): every check a live run makes is listed, ``ok``, ``problem`` or ``not
made``, and a check no paste could make says what would make it (``acs: not made — no lspci -vvv or
setpci output in the pastes``). A paste shows what it shows; a check it says nothing about is never
reported as passed. On a host or an archive without NVML's answers, ``nvml-not-checked`` says which
checks that leaves out."""

from __future__ import annotations

from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.model import Finding

# (check name, finding codes that show it made, what would make it)
CHECKS = (
    ("acs", ("acs-",), "no lspci -vvv (run as root) or setpci ECAP_ACS+6.w output in the pastes"),
    ("pcie-links", ("pcie-",), "no lspci -vvv LnkCap/LnkSta lines, nvidia-smi -q, or "
     "`nvidia-smi --query-gpu=index,pstate,pcie.link.gen.current,pcie.link.gen.max,pcie.link.width.current,"
     "pcie.link.width.max --format=csv` in the pastes"),
    ("iommu", ("iommu-",), "no /proc/cmdline, dmesg IOMMU lines (`dmesg | grep -i -e DMAR -e AMD-Vi -e iommu`) or "
     "/sys/kernel/iommu_groups/*/type in the pastes"),
    ("kernel-log", ("xid-", "gpu-fallen-off-bus", "pcie-aer-", "iommu-fault"),
     "no dmesg / journal lines in the pastes (Xid, AER, IOMMU faults)"),
    ("nvlink", ("nvlink-",), "no `nvidia-smi nvlink -s` / `-e` output in the pastes"),
    ("nvswitch-fabric", ("fabric-",), "no `nvidia-smi -q` Fabric section or Fabric Manager log in the pastes "
     "(only NVSwitch systems have a fabric)"),
    ("p2p-status", ("p2p-", "cuda-peer-", "nccl-p2p-", "nccl-not-p2p"),
     "no `nvidia-smi topo -p2p r`, simpleP2P or NCCL INFO log in the pastes"),
    ("gpudirect-rdma", ("gdr-", "nvidia-peermem-"), "no NCCL NET/IB lines or `lsmod | grep peermem` in the pastes "
     "(it matters only between nodes)"),
    ("dev-shm", ("shm-",), "no `df -h /dev/shm`, `mount | grep shm`, NCCL shared-memory error or `docker run` line "
     "in the pastes"),
    ("environment", ("env-",), "no `printenv | grep NCCL` or `export NCCL_...` lines in the pastes"),
)


def _norm(name: str) -> str:
    return name.replace("-", " ").replace("_", " ").lower()


def list_checks_not_made(report: DoctorReport, pasted_kinds: list[str], scan_read: bool) -> None:
    """Add a ``not-made`` row for each check no paste made. ``pasted_kinds``: every kind the
    pastes held (a dmesg paste makes the kernel-log check); ``scan_read``: some paste was read as
    ``scan --from`` reads it (its findings stand; a clean one makes its check without a row)."""
    made = [_norm(c.name) for c in report.checks]
    codes = [f.code for f in report.findings]
    for name, families, would in CHECKS:
        if any(m.startswith(_norm(name)) for m in made) or any(c.startswith(families) for c in codes):
            continue
        if name == "kernel-log" and "dmesg" in pasted_kinds:
            report.check(name, "ok", "no Xid, AER error, IOMMU fault or fallen-off-the-bus line in the dmesg pasted")
            continue
        if name == "p2p-status" and scan_read:
            continue
        report.check(name, "not-made", would)



def nvml_not_checked(reason: str, report: DoctorReport) -> None:
    """``nvml-not-checked``: NVML could not be asked (``reason``), so the checks it answers were not made."""
    report.check("nvml", "not-made", reason)
    report.add(Finding(
        "info", "nvml-not-checked",
        f"NVLink state and errors, the NVSwitch fabric and NVML's P2P status were not checked: "
        f"{reason}.",
        fix="run doctor where the NVIDIA driver is loaded (inside a container: with the NVIDIA container toolkit)"))
