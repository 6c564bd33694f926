"""Which transport NCCL takes between two GPUs of one host, and the figure that transport gets.

NCCL uses P2P between two GPUs only on paths up to its P2P level (NVIDIA/nccl ``src/graph/paths.cc``,
``ncclTopoCheckP2p``); beyond it, it connects them through host memory (SHM). By default the level
is PXB, PCIe switches only: "By default don't use P2P across CPU Host Bridges and further apart";
SYS (any path) on AMD x86 CPUs with at most two GPUs. ``NCCL_P2P_DISABLE=1`` makes it LOC (no P2P,
NVLink included), ``NCCL_P2P_LEVEL`` sets it by name (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB,
SYS) or by the old numbers 0-5 (LOC, PIX, PXB, PHB, SYS, SYS). NCCL counts a host bridge as PHB
whether nvidia-smi says PHB or NODE; NVLink paths (NVL) are below PIX.

The level is the one an NCCL log of the topology shows set (``Topology.nccl.settings``), else NCCL's
default, stated as an assumption: the sources gputopo reads do not give the CPU's vendor.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from gputopo.analysis.expect.bandwidth import Estimate, estimate_link, host_staged_estimate
from gputopo.model import Gpu, Link, Topology

# NCCL's path types, nearest first (``topoPathTypeStr``); a P2P level lets P2P use paths up to it.
NCCL_LEVELS = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
# NCCL_P2P_LEVEL's old numbers (``levelsOldToNew``); a larger number is SYS.
NCCL_OLD_LEVELS = ("LOC", "PIX", "PXB", "PHB", "SYS", "SYS")
# nvidia-smi's PCIe words as NCCL's path types (NCCL's host bridge covers nvidia-smi's PHB and NODE).
NCCL_PATH_OF_WORD = {"PIX": "PIX", "PXB": "PXB", "PHB": "PHB", "NODE": "PHB", "SYS": "SYS"}
DEFAULT_LEVEL = "PXB"
DEFAULT_ASSUMPTION = ("NCCL's default P2P level, PXB (PCIe switches only), assumed: NCCL allows P2P through the CPU "
                      "only where NCCL_P2P_LEVEL says so, or on AMD CPUs with at most two GPUs, and the source shows "
                      "neither")


@dataclass(frozen=True)
class NcclLevel:
    """The P2P level NCCL is taken to use: ``level`` (one of ``NCCL_LEVELS``), ``source``
    (``"nccl-log"``: a log of this topology shows it set; ``"default"``: NCCL's default, assumed) and
    ``assumption`` (what was assumed, None where the log shows it)."""

    level: str
    source: str
    assumption: str | None

    def words(self) -> str:
        """``"NCCL_P2P_LEVEL=SYS, as the NCCL log shows"`` or the default's assumption."""
        if self.assumption is not None:
            return self.assumption
        return f"NCCL's P2P level {self.level}, as the NCCL log shows it set"


def level_of_settings(settings: dict[str, str]) -> str | None:
    """NCCL's P2P level as its variables set it (``NCCL_P2P_DISABLE=1`` is LOC and wins), read as
    NCCL reads them; None where they do not set one."""
    disable = (settings.get("NCCL_P2P_DISABLE") or "").strip()
    # ASCII digits compared as text: "²" passes isdigit() but not int(), nor do 5,000 digits
    if disable.isascii() and disable.isdigit() and disable.lstrip("0") == "1":
        return "LOC"
    level = (settings.get("NCCL_P2P_LEVEL") or "").strip()  # names compared as NCCL does (strcmp): "nvl" is none
    if level in NCCL_LEVELS:
        return level
    if level[:1].isascii() and level[:1].isdigit():  # as NCCL's str[0] >= '0' && str[0] <= '9'
        digits = level[: len(level) - len(level.lstrip("0123456789"))].lstrip("0")[:3] or "0"  # 3 digits: past the last
        return NCCL_OLD_LEVELS[min(int(digits), len(NCCL_OLD_LEVELS) - 1)]
    return None


def nccl_level(topology: Topology | None) -> NcclLevel:
    """The level for ``topology`` (once per topology): its NCCL log's setting, else the default."""
    if topology is None:
        return NcclLevel(DEFAULT_LEVEL, "default", DEFAULT_ASSUMPTION)
    return topology.cached("nccl_p2p_level", _nccl_level)


def _nccl_level(topology: Topology) -> NcclLevel:
    view = topology.nccl
    level = level_of_settings(view.settings) if view is not None else None
    if level is None:
        return NcclLevel(DEFAULT_LEVEL, "default", DEFAULT_ASSUMPTION)
    return NcclLevel(level, "nccl-log", None)


def uses_p2p(link: Link, level: NcclLevel) -> bool:
    """Whether NCCL connects the pair with P2P at ``level`` (its path no farther than the level); a
    link whose path is not known (a TF log's) is taken to be within it."""
    if link.is_nvlink:
        path = "NVL"
    else:
        path = NCCL_PATH_OF_WORD.get(link.type)
        if path is None:
            return level.level != "LOC"
    return NCCL_LEVELS.index(path) <= NCCL_LEVELS.index(level.level)


def nccl_estimate(link: Link, gpu_a: Gpu | None, gpu_b: Gpu | None, fewest_links: int, level: NcclLevel) -> Estimate:
    """What NCCL's transport between the pair gets per direction: the link's estimate where NCCL uses
    P2P (or the pair cannot peer: host memory either way), else the figure of copies through host
    memory (SHM), its words saying which transport and why."""
    estimate = estimate_link(link, gpu_a, gpu_b, fewest_links)
    if link.can_peer is False:
        return estimate
    if uses_p2p(link, level):
        return replace(estimate, explanation=f"{estimate.explanation}; NCCL: P2P")
    shm = host_staged_estimate(link, gpu_a, gpu_b)
    why = (f"beyond NCCL's P2P level {level.level}" + (" (its default, assumed)" if level.source == "default"
                                                       else " (as the NCCL log shows it set)"))
    return replace(shm, explanation=f"{link.type}: NCCL connects it through host memory (SHM), {why}; {shm.explanation}")

