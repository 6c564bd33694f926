"""What each finding is, in one table: a ``fault`` (something is broken or set wrong: fix it), a
``design`` fact (the machine is built this way: place jobs around it) or a ``note`` (what was read,
assumed or could not be checked).

``--fail-on LEVEL`` counts faults at or above LEVEL; ``--fail-on-design`` counts design facts too;
notes never fail a check. So a healthy two-socket box (cross-socket pairs, TNS between its
sockets, GeForce cards that cannot peer) passes a Slurm prolog, and a box with a link trained down,
ACS redirecting, an NVLink down or fewer GPUs than expected fails it.

Every code any finding can have is here (``tests/unit/analysis/causes/test_finding_kinds.py`` finds them
the way the code makes them); a code made from a word (``p2p-<word>``, ``xid-<n>``) is listed by
its prefix. Where one code covers both a rule and a fault, its severity decides, per code.
"""

from __future__ import annotations

from typing import Iterable, Union

from gputopo.model import Finding

FAULT, DESIGN, NOTE = "fault", "design", "note"
KINDS = (FAULT, DESIGN, NOTE)

# By severity: a code whose info is the machine's rule and whose warning is a fault.
KindRule = Union[str, dict[str, str]]
_INFO_DESIGN_ELSE_FAULT: dict[str, str] = {"info": DESIGN, "warning": FAULT, "error": FAULT}

# The one table: finding code -> kind (or severity -> kind).
KIND_OF_CODE: dict[str, KindRule] = {
    # diagnose: the wiring
    "virtual-machine": NOTE,
    "cross-socket": DESIGN,
    "sys-within-numa-node": NOTE,
    "pcie-width-degraded": FAULT,  # (scan's codes before one wording: snapshots saved then)
    "pcie-gen-degraded": FAULT,
    "pcie-gen-below-max-idle": NOTE,
    "pcie-gen-below-max": NOTE,
    "nvswitch-fabric": NOTE,
    "nvlink-summary": NOTE,
    "no-nvlink": NOTE,
    "nvlink-links-down": FAULT,
    "mig-enabled": DESIGN,
    "mixed-gpu-models": DESIGN,
    "sources-disagree": NOTE,
    "gpus-joined-by-index": NOTE,
    "gpus-missing": FAULT,
    "gpus-not-counted": NOTE,
    # measurements, NCCL logs, nccl-tests, NVLink states (observed_findings, nccl_paths, collective_findings)
    "measured-above-line-rate": NOTE,
    "measured-above-card-line-rate": NOTE,  # above the card's generation inferred from its name: to check
    "measured-below-expected": FAULT,
    "p2p-slower-than-staged": FAULT,
    "pcie-path-narrow": FAULT,
    "gpu-slow-to-every-peer": FAULT,
    "nccl-not-p2p": FAULT,
    "nccl-p2p-ipc-failed": FAULT,
    "nccl-p2p-off-by-setting": FAULT,
    "nccl-p2p-refused": _INFO_DESIGN_ELSE_FAULT,  # info: another source gives the pairs a design word (GNS...)
    "nccl-shm-between-gpus": _INFO_DESIGN_ELSE_FAULT,  # SYS / host bridge: NCCL's level (info); a switch: a fault
    "nvlink-inactive": {"info": NOTE, "warning": FAULT, "error": FAULT},  # info: spare slots of a card (can be normal)
    "collective-wrong-results": FAULT,
    "collective-busbw-vs-ring": FAULT,
    "collective-busbw-vs-pcie": FAULT,
    "measured-host-memory": NOTE,
    "p2p-bytes-mismatch": FAULT,
    # TensorFlow's view
    "tf-gpu-not-in-topology": NOTE,
    "tf-join-assumed": NOTE,
    "tf-join-impossible": NOTE,
    "tf-no-gpu": FAULT,
    "tf-no-peer-matrix": NOTE,
    "tf-order-differs": NOTE,
    "tf-ordinals-renumbered": NOTE,
    "tf-peer-groups": DESIGN,
    "tf-peers-across-sockets": NOTE,
    "tf-cannot-peer-cross-socket": DESIGN,
    "tf-cannot-peer-disabled": FAULT,
    "tf-cannot-peer-chipset": DESIGN,
    "tf-cannot-peer-gpu": DESIGN,
    "tf-cannot-peer-acs": FAULT,
    "tf-cannot-peer-host-bridge": DESIGN,
    "tf-cannot-peer-nvlink": FAULT,
    "tf-cannot-peer-unknown": NOTE,
    "tf-gpu-ignored": DESIGN,
    "tf-gpu-memory-short": NOTE,
    "tf-too-many-peers": DESIGN,
    # watch: live counters (analysis/watch/watch.py, watch_summary.py)
    "watch-link-errors-rising": FAULT,
    "watch-counters-zero-while-busy": NOTE,
    "watch-counters-unsupported": NOTE,
    "watch-plan-nvlink-idle": DESIGN,
    "watch-plan-p2p-off-by-setting": FAULT,
    "watch-plan-nvlink-down": FAULT,
    "watch-plan-no-p2p": DESIGN,
    "watch-plan-traffic-elsewhere": FAULT,
    # several hosts (cluster)
    "cluster-gpu-count": DESIGN,
    "cluster-gpu-model": DESIGN,
    "cluster-driver": FAULT,
    "cluster-cuda": FAULT,
    "cluster-link-shape": DESIGN,
    "cluster-no-nic": DESIGN,
    "cluster-nic-far": DESIGN,
    "cluster-nic-paths-unknown": NOTE,
    # doctor
    "acs-redirect": FAULT,
    "acs-not-checked": NOTE,
    "pcie-link-narrow": FAULT,
    "pcie-link-slow": FAULT,
    "pcie-link-slow-idle": NOTE,
    "pcie-link-slow-maybe-idle": NOTE,
    "pcie-link-limited": NOTE,
    "pcie-slot-limited": DESIGN,  # a GPU's link at its slot's top (x8/x8 lanes, an older port): the board's design
    "iommu-translating": FAULT,
    "iommu-fault": FAULT,
    "nvidia-peermem-missing": FAULT,
    "shm-too-small": FAULT,
    "env-nccl-p2p-disable": FAULT,
    "env-nccl-p2p-level": FAULT,
    "env-nccl-shm-disable": FAULT,
    "env-nccl-ib-disable": NOTE,
    "gdr-disabled": FAULT,
    "nccl-sysfs-path": FAULT,
    "slurm-gpu-missing": FAULT,
    "slurm-links-differ": FAULT,
    "slurm-cores-wrong-socket": FAULT,
    "slurm-nvswitch-links-zero": NOTE,
    "fabric-manager-no-nvswitch": NOTE,
    "cuda-peer-access-unsupported": DESIGN,
    "cuda-too-many-peers": DESIGN,
    "cuda-peer-access-no": DESIGN,
    "cuda-peer-access-already-enabled": NOTE,
    "gpus-hidden": NOTE,
    "nvlink-errors": FAULT,
    "fabric-not-ready": FAULT,
    "fabric-degraded": FAULT,
    "nvml-not-checked": NOTE,
    "gpu-fallen-off-bus": FAULT,
    "pcie-aer-uncorrected": FAULT,
    "pcie-aer-corrected": FAULT,
    "pcie-errors-logged": FAULT,
    "pcie-aer-not-recovered": FAULT,
    # the readers' notes in words (analysis/notes/reading_notes.py)
    "repaired-paste": NOTE,
    "several-topo-matrices": NOTE,
    "asymmetric-matrix": NOTE,
    "asymmetric-p2p-matrix": NOTE,
    "nic-rows-missing": NOTE,
    "p2p-capability-assumed": NOTE,
    "vm-evidence": NOTE,
    "soc-between-sockets": NOTE,
    "pcie-only-matrix": NOTE,
    "cuda-ordinals-only": NOTE,
    "nccl-gpus-by-bus-id": NOTE,
    "nccl-xml-cut": NOTE,
    "nccl-xml-no-root": NOTE,
    "nccl-tests-no-rows": NOTE,
    "nccl-tests-separate-jobs": NOTE,
    "nccl-tests-gpus-from-command": NOTE,
    "p2p-enabled-not-measured": NOTE,
    "nccl-p2p-disabled-unplaced": NOTE,
    "nccl-log-hosts-missing": NOTE,
    "no-pair-measured": NOTE,
    "nvbandwidth-wrong-data": FAULT,
    "smi-q-gpu-repeated": NOTE,
    "smi-q-gpus-not-listed": NOTE,
    "smi-q-grep-gaps": NOTE,
    "nvlink-list-cut": NOTE,
    "paste-part-empty": NOTE,
    "smi-q-no-bus-id": NOTE,
    "smi-q-unavailable": NOTE,
    "gpu-lost": FAULT,
    "multi-gpu-board": NOTE,
    "tf-log-alone": NOTE,
    "tf-log-cut": NOTE,
    "tf-log-startups": NOTE,
    "tf-gpus-implied": NOTE,
    "tf-log-contradiction": NOTE,
    "tf-peer-unknown": NOTE,
    "tf-peer-walk-order": NOTE,
    "tf-no-gpu-reason": NOTE,
    "tf-log-nccl-only": NOTE,
    "tf-no-visible-gpu": NOTE,
    "tf-log-windows": NOTE,
}

# P2P status words (NVML's, nvidia-smi's): ``p2p-<word>`` (scan) and ``p2p-status-<word>`` (doctor).
# TNS, GNS, CNS and NS are what the GPU model, chipset or sockets allow; DR is a switch someone set.
KIND_OF_P2P_WORD: dict[str, str] = {"tns": DESIGN, "gns": DESIGN, "cns": DESIGN, "ns": DESIGN, "dr": FAULT,
                                    "u": NOTE}

# Codes made from a number or a name: the prefix's kind.
KIND_OF_PREFIX: dict[str, str] = {
    "xid-": FAULT,  # an Xid in the kernel log
}
# ``nvml-<query>-unavailable``: an NVML query that failed (reading_notes), a note of what is unknown.
_NVML_PREFIX, _NVML_SUFFIX = "nvml-", "-unavailable"
# doctor's findings kept in a snapshot: ``doctor-<code>``.
DOCTOR_PREFIX = "doctor-"


def kind_rule(code: str) -> KindRule | None:
    """The table's entry for ``code`` (None: a code this version does not know)."""
    if code in KIND_OF_CODE:
        return KIND_OF_CODE[code]
    if code.startswith(DOCTOR_PREFIX):
        return kind_rule(code[len(DOCTOR_PREFIX):])
    for prefix in ("p2p-status-", "p2p-"):
        if code.startswith(prefix) and code[len(prefix):] in KIND_OF_P2P_WORD:
            return KIND_OF_P2P_WORD[code[len(prefix):]]
    if code.startswith(_NVML_PREFIX) and code.endswith(_NVML_SUFFIX) and len(code) > len(_NVML_PREFIX + _NVML_SUFFIX):
        return NOTE
    for prefix, kind in KIND_OF_PREFIX.items():
        if code.startswith(prefix) and len(code) > len(prefix):
            return kind
    return None


def kind_of(finding: Finding) -> str:
    """``finding``'s kind: the table's; a code it does not know keeps the kind it was saved with,
    else is a fault at warning or above (a check never passes what it cannot place) and a note below."""
    rule = kind_rule(finding.code)
    if isinstance(rule, dict):
        return rule.get(finding.severity, FAULT)
    if rule is not None:
        return rule
    if finding.kind in KINDS:
        return finding.kind
    return NOTE if finding.severity == "info" else FAULT


def with_kinds(findings: Iterable[Finding]) -> list[Finding]:
    """Set each finding's ``kind`` (in place); returns them as a list."""
    findings = list(findings)
    for finding in findings:
        finding.kind = kind_of(finding)
    return findings


def worst_first(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` worst first: errors, warnings, then infos; in each, faults, then design facts,
    then notes; else in the order they were made."""
    from gputopo.model import SEVERITIES

    return sorted(findings, key=lambda f: (-SEVERITIES.index(f.severity), KINDS.index(kind_of(f))))


def counted(findings: Iterable[Finding], level: str, design: bool = False) -> list[Finding]:
    """The findings ``--fail-on level`` counts: faults at or above ``level`` (and design facts with
    ``design``, ``--fail-on-design``); notes never."""
    from gputopo.model import SEVERITIES

    kinds = (FAULT, DESIGN) if design else (FAULT,)
    floor = SEVERITIES.index(level)
    return [f for f in findings if SEVERITIES.index(f.severity) >= floor and kind_of(f) in kinds]
