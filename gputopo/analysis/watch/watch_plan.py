"""A watch judged against a plan: did the planned GPUs' NVLinks carry their traffic, did they idle
while PCIe (or the CPUs' link, SYS) carried it, did a link error, and the likely cause where the
environment, the watched links or the topology say.

The verdict is ``watch_summary.plan_verdict``'s (``nvlink``, ``pcie``, ``idle``, ``unknown``). Its
causes, each a finding the verdict's ``watch-plan-nvlink-idle`` names in ``caused_by`` (the first
that holds, in this order):

- ``watch-plan-p2p-off-by-setting``: the command ran with ``NCCL_P2P_DISABLE`` set (or
  ``NCCL_P2P_LEVEL=LOC``): NCCL moves the data through host memory (SHM), over PCIe;
- ``watch-plan-nvlink-down``: NVLinks of the planned GPUs read down (state 0), or fewer links join a
  planned pair than the topology says;
- ``watch-plan-no-p2p``: the topology says a planned pair has no NVLink, or that NVML refuses P2P
  between them (a P2P word other than OK): NCCL uses SHM there, by its rules, not by fault;
- ``watch-plan-traffic-elsewhere``: GPUs outside the plan moved more than the planned ones: the job
  ran on other GPUs (``CUDA_VISIBLE_DEVICES`` not as planned).

Link errors that rose on the planned GPUs are counted in the verdict (their finding is
``watch-link-errors-rising``, made each interval). Nothing here reads the outside world: the
environment and topology are given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gputopo.analysis.watch.watch_summary import PCIE_FLOOR_BYTES, Summary, plan_verdict
from gputopo.model import Finding, Topology
from gputopo.notation import pair_list
from gputopo.sources.host.nvml_counters import PEER_GPU, WatchedGpu

OFF_VALUES = ("", "0")
PCIE_WORDS = ("PIX", "PXB", "PHB", "NODE", "SYS")
MAX_NAMED = 8


@dataclass
class PlanVerdict:
    """The verdict on the planned GPUs, where the plan came from, and its findings (causes first)."""

    gpus: list[int]
    source: str  # "--planned-gpus", "plan file plan.json (host n1)", "recommend --gpus 4 (snap.json)"
    verdict: str
    nvlink_bytes: float = 0.0
    pcie_bytes: float = 0.0
    link_errors: int = 0
    findings: list[Finding] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"gpus": self.gpus, "verdict": self.verdict, "source": self.source,
                "nvlink_bytes": round(self.nvlink_bytes), "pcie_bytes": round(self.pcie_bytes),
                "link_errors": self.link_errors,
                "causes": [f.code for f in self.findings if f.code != "watch-plan-nvlink-idle"]}


def judge_plan(summary: Summary, planned: list[int], source: str, gpus: list[WatchedGpu],
               environ: Mapping[str, str], topology: Topology | None = None) -> PlanVerdict:
    """The verdict on ``planned`` with its likely causes (see the module)."""
    group = set(planned)
    verdict, finding = plan_verdict(summary, planned)
    result = PlanVerdict(sorted(group), source, verdict, summary.nvlink_bytes(group), summary.pcie_bytes(group),
                         sum(n for (gpu, _, _), n in summary.errors.items() if gpu in group))
    causes = [c for c in (_setting(environ), _links_down(planned, gpus, topology), _no_p2p(planned, topology),
                          _elsewhere(summary, group, gpus)) if c is not None]
    if verdict == "pcie":
        causes = [c for c in causes if c.code != "watch-plan-traffic-elsewhere"]
    elif verdict not in ("idle", "unknown"):  # the NVLinks carried it: only what is wrong with them
        causes = [c for c in causes if c.code == "watch-plan-nvlink-down"]
    if finding is not None and causes:
        finding.caused_by = causes[0].code
    result.findings = causes + ([finding] if finding is not None else [])
    return result


def _setting(environ: Mapping[str, str]) -> Finding | None:
    disable = environ.get("NCCL_P2P_DISABLE")
    level = environ.get("NCCL_P2P_LEVEL")
    if disable is not None and disable.strip() not in OFF_VALUES:
        setting = f"NCCL_P2P_DISABLE={disable.strip()[:16]}"
    elif level is not None and level.strip().upper() in ("LOC", "0"):
        setting = f"NCCL_P2P_LEVEL={level.strip()[:16]}"
    else:
        return None
    return Finding(
        "warning", "watch-plan-p2p-off-by-setting",
        f"{setting} is set in the environment the command ran in: NCCL turns P2P off and moves the data "
        "through host memory (SHM) over PCIe, so the planned NVLinks are not used",
        fix="unset NCCL_P2P_DISABLE / NCCL_P2P_LEVEL for the job (check the launcher's and the container's "
            "environment too)")


def _links_down(planned: list[int], gpus: list[WatchedGpu], topology: Topology | None) -> Finding | None:
    by_index = {g.index: g for g in gpus}
    parts: list[str] = []
    named: list[int] = []
    for index in planned:
        gpu = by_index.get(index)
        if gpu is not None and gpu.down_links:
            parts.append(f"GPU {index} NVLink {','.join(map(str, gpu.down_links[:MAX_NAMED]))} down")
            named.append(index)
    if topology is not None:
        for a, b in _pairs(planned):
            expected = _nvlink_count(topology, a, b)
            if not expected or a not in by_index or b not in by_index:
                continue
            seen = Counter(link.peer_gpu for link in by_index[a].links if link.peer_kind == PEER_GPU)[b]
            if by_index[a].links and all(link.peer_kind == PEER_GPU for link in by_index[a].links) and seen < expected:
                parts.append(f"GPUs {a}-{b}: {seen} of the topology's {expected} NVLinks active")
                named += [a, b]
    if not parts:
        return None
    return Finding(
        "warning", "watch-plan-nvlink-down",
        f"NVLinks of the planned GPUs are down ({'; '.join(parts[:MAX_NAMED])}): NCCL routes around them, "
        "over fewer links or PCIe", sorted(set(named)),
        fix="run `gputopo doctor` and `nvidia-smi nvlink -s`; a link that stays down needs a reset or a reseat")


def _no_p2p(planned: list[int], topology: Topology | None) -> Finding | None:
    if topology is None:
        return None
    pcie_only, refused = [], []
    for a, b in _pairs(planned):
        try:
            link = topology.link(a, b)
        except KeyError:
            continue
        if not link.nvlink_count and link.type in PCIE_WORDS:
            pcie_only.append((a, b, link.type))
        elif any(word not in (None, "ok") for word in (link.p2p_read, link.p2p_write)):
            refused.append((a, b, link.p2p_read or link.p2p_write))
    if not pcie_only and not refused:
        return None
    parts = []
    if pcie_only:
        words = ", ".join(sorted({t for _, _, t in pcie_only}))
        parts.append(f"no NVLink between {pair_list([(a, b) for a, b, _ in pcie_only])} ({words})")
    if refused:
        parts.append(f"NVML refuses P2P between {pair_list([(a, b) for a, b, _ in refused])} "
                     f"({', '.join(sorted({str(w) for _, _, w in refused}))})")
    gpus = sorted({g for a, b, _ in pcie_only + refused for g in (a, b)})
    return Finding(
        "info", "watch-plan-no-p2p",
        f"the topology says {'; '.join(parts)}: NCCL moves those pairs' data through host memory (SHM) over "
        "PCIe, by its rules", gpus,
        fix="plan on GPUs joined by NVLink (`gputopo recommend`), or check `nvidia-smi topo -p2p r`")


def _elsewhere(summary: Summary, group: set[int], gpus: list[WatchedGpu]) -> Finding | None:
    others = {g.index for g in gpus} - group
    moved = {g: summary.nvlink_bytes({g}) + summary.pcie_bytes({g}) for g in others}
    busy = sorted(g for g, n in moved.items() if n >= PCIE_FLOOR_BYTES)
    outside = sum(moved.values())
    inside = summary.nvlink_bytes(group) + summary.pcie_bytes(group)
    if not busy or outside <= inside:
        return None
    return Finding(
        "warning", "watch-plan-traffic-elsewhere",
        f"GPUs {','.join(map(str, busy[:MAX_NAMED * 4]))}, outside the plan, moved {outside / 1e9:.1f} GB while the "
        f"planned GPUs moved {inside / 1e9:.1f} GB: the job ran on other GPUs than planned", busy,
        fix="set CUDA_VISIBLE_DEVICES (with CUDA_DEVICE_ORDER=PCI_BUS_ID) as the plan says")


def _pairs(planned: list[int]) -> list[tuple[int, int]]:
    ordered = sorted(set(planned))
    return [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1:]]


def _nvlink_count(topology: Topology, a: int, b: int) -> int:
    try:
        link = topology.link(a, b)
    except KeyError:
        return 0
    return 0 if link.nvswitch else int(link.nvlink_count or 0)
