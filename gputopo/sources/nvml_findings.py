"""The NVML probe's failures in words: one grouped ``Finding`` per kind of query that NVML did not
answer (which GPUs or pairs, why, and what would help), one per GPU that fell off the bus."""

from __future__ import annotations

from typing import Any

from gputopo.model import Finding
from gputopo.notation import gpu_list

# Reasons that mean "this GPU/driver simply does not have it": reported as info, not warning.
_BENIGN_REASONS = {"not supported", "not in this driver"}

# What each query kind fills in, for the findings ("NVML could not report the <what> of GPUs ...").
_QUERY_WHAT = {
    "handle": "handle (the GPU could not be opened)",
    "name": "name",
    "uuid": "UUID",
    "pci": "PCI bus id",
    "memory": "memory size and use",
    "utilization": "utilisation",
    "processes": "running compute processes",
    "numa": "NUMA node",
    "cpu-affinity": "CPU affinity",
    "pcie-gen": "PCIe link generation",
    "pcie-width": "PCIe link width",
    "nvlink": "NVLink state",
    "nvlink-version": "NVLink version",
    "nvlink-remote": "NVLink remote ends",
    "mig": "MIG mode",
    "compute-capability": "CUDA compute capability",
    "topology": "PCIe path (common ancestor)",
    "p2p": "P2P capabilities",
}
_QUERY_FIX = {
    "no permission": "run gputopo as a user with access to /dev/nvidia* (or as root) to see these fields",
    "not in this driver": "a newer NVIDIA driver / nvidia-ml-py reports this field",
}



def failure_findings(failures: dict[str, dict[Any, str]], lost: dict[int, str]) -> list[Finding]:
    """One finding per lost GPU, one for multi-GPU boards, one per query kind that failed.

    ``failures`` maps a query kind to ``{gpu or (a, b) pair: reason}`` (kind ``_board``: the pairs
    NVML says share a board); ``lost`` maps a GPU that fell off the bus to its bus id (or "?").
    """
    findings: list[Finding] = []
    failures = dict(failures)
    for gpu, bus_id in sorted(lost.items()):
        where = f" ({bus_id})" if bus_id and bus_id != "?" else ""
        findings.append(
            Finding(
                severity="warning",
                code="gpu-lost",
                message=(
                    f"GPU {gpu}{where} fell off the bus (NVML: GPU is lost); its remaining fields and "
                    "links are unknown"
                ),
                gpus=[gpu],
                fix=f"check `dmesg` for Xid 79, then reset the GPU (nvidia-smi -r -i {gpu}) or reboot; reseat it if it recurs",
            )
        )
    boards = failures.pop("_board", {})
    if boards:
        gpus = sorted({g for pair in boards for g in pair})
        pairs = ", ".join(f"{a}-{b}" for a, b in sorted(boards))
        findings.append(
            Finding(
                severity="info",
                code="multi-gpu-board",
                message=f"GPU pairs {pairs} sit on one multi-GPU board (NVML: INTERNAL); shown as PIX",
                gpus=gpus,
            )
        )
    for kind, by_key in failures.items():
        # GPUs that fell off the bus are explained by their own finding.
        by_key = {k: r for k, r in by_key.items() if not _touches(k, lost)}
        if not by_key:
            continue
        reasons = sorted(set(by_key.values()))
        gpus = sorted({g for k in by_key for g in (k if isinstance(k, tuple) else (k,))})
        what = _QUERY_WHAT.get(kind, kind)
        if any(isinstance(k, tuple) for k in by_key):
            subject = "pairs " + ", ".join(f"{a}-{b}" for a, b in sorted(k for k in by_key if isinstance(k, tuple)))
        else:
            subject = ("GPU " if len(gpus) == 1 else "GPUs ") + gpu_list(gpus)
        severity = "info" if set(reasons) <= _BENIGN_REASONS else "warning"
        fix = next((_QUERY_FIX[r] for r in reasons if r in _QUERY_FIX), None)
        findings.append(
            Finding(
                severity=severity,
                code=f"nvml-{kind}-unavailable",
                message=f"NVML could not report the {what} of {subject} ({'; '.join(reasons)}); shown as unknown",
                gpus=gpus,
                fix=fix,
            )
        )
    return findings


def _touches(key: Any, lost: dict[int, str]) -> bool:
    gpus = key if isinstance(key, tuple) else (key,)
    return any(g in lost for g in gpus)
