"""The report doctor's checks fill, which every cause module shares: findings, checks made or not,
which GPUs and pairs have which problem, and how GPUs, pairs and paste lines are named in its words."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gputopo.model import SEVERITIES, Finding

if TYPE_CHECKING:
    from gputopo.sources.host.nvml_health import GpuNvmlHealth

SCHEMA = "gputopo.doctor/1"
# Problems a pair of GPUs can have, as recommend/report see them (Link.health words).
PAIR_PROBLEMS = ("acs", "downtrained", "nvlink-down", "iommu", "p2p-disabled")


@dataclass
class Check:
    """One check: ``status`` is ``ok``, ``problem`` or ``not-made`` (``detail`` says why)."""

    name: str
    status: str
    detail: str | None = None


@dataclass
class DoctorReport:
    source: str
    findings: list[Finding] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    gpus: dict[str, int | None] = field(default_factory=dict)  # bdf -> NVML index where known
    gpu_problems: dict[str, list[str]] = field(default_factory=dict)  # bdf -> problem words
    pair_problems: dict[tuple[str, str], list[str]] = field(default_factory=dict)  # (bdf, bdf) sorted
    # What links findings (``acs.link_causes``, ``doctor``): the GPU pairs a finding hits (bus ids), the finding that
    # causes another (by ``id()``: findings are plain dataclasses), what the IOMMU was found to do
    # ("translating", "passthrough", "off"; None: not known) and the bridges ACS redirect is on at.
    finding_pairs: dict[int, list[tuple[str, str]]] = field(default_factory=dict)
    causes: dict[int, Finding] = field(default_factory=dict)
    iommu: str | None = None
    iommu_vendor: str | None = None  # "intel" / "amd" where the evidence says which IOMMU
    kernel_release: str | None = None  # the running kernel where the evidence says (a fix may need a newer one)
    vfio: str | None = None  # a command line's `vfio-pci.ids=...`: devices passed to VMs need the IOMMU kept on
    acs_on: list[tuple[Finding, str | None, int, str | None]] = field(default_factory=list)  # (finding, bdf, control, port)

    def add(self, finding: Finding, pairs: list[tuple[str, str]] | None = None) -> None:
        self.findings.append(finding)
        if pairs:
            self.finding_pairs[id(finding)] = sorted({(a, b) if a < b else (b, a) for a, b in pairs})

    def index_pairs(self, finding: Finding) -> list[list[int]]:
        """The GPU pairs ``finding`` hits, as GPU indices (pairs with a GPU of no known index left out)."""
        pairs = [(self.gpus.get(a), self.gpus.get(b)) for a, b in self.finding_pairs.get(id(finding), [])]
        return sorted([min(a, b), max(a, b)] for a, b in pairs if a is not None and b is not None)

    def check(self, name: str, status: str, detail: str | None = None) -> None:
        self.checks.append(Check(name, status, detail))

    def mark_gpu(self, bdf: str, problem: str) -> None:
        words = self.gpu_problems.setdefault(bdf, [])
        if problem not in words:
            words.append(problem)

    def mark_pair(self, a: str, b: str, problem: str) -> None:
        key = (a, b) if a < b else (b, a)
        words = self.pair_problems.setdefault(key, [])
        if problem not in words:
            words.append(problem)

    def label(self, bdf: str) -> str:
        """``GPU 2 (0000:41:00.0)``, or ``GPU 0000:41:00.0`` where NVML's index is not known."""
        index = self.gpus.get(bdf)
        return f"GPU {index} ({bdf})" if index is not None else f"GPU {bdf}"

    def indices(self, bdfs: list[str]) -> list[int]:
        return sorted({i for i in (self.gpus.get(b) for b in bdfs) if i is not None})

    def sorted_findings(self) -> list[Finding]:
        """Worst first; within a severity, in the order the checks found them."""
        order = {id(f): k for k, f in enumerate(self.findings)}
        return sorted(self.findings, key=lambda f: (-SEVERITIES.index(f.severity), order[id(f)]))

    def to_dict(self) -> dict[str, Any]:
        """The ``gputopo.doctor/1`` JSON (docs/json.md)."""
        from dataclasses import asdict

        findings = self.sorted_findings()
        ids = finding_ids(self.findings)
        return {
            "schema": SCHEMA,
            "source": self.source,
            "findings": [{**asdict(f), "id": ids[id(f)], "pairs": self.index_pairs(f),
                          "caused_by": ids.get(id(self.causes[id(f)])) if id(f) in self.causes else None}
                         for f in findings],
            "checks": [asdict(c) for c in self.checks],
            "gpus": [{"pci_bus_id": bdf, "index": index, "problems": self.gpu_problems.get(bdf, [])}
                     for bdf, index in sorted(self.gpus.items())],
            "pairs": [{"a": a, "b": b, "problems": words} for (a, b), words in sorted(self.pair_problems.items())],
        }


def finding_ids(findings: list[Finding]) -> dict[int, str]:
    """Each finding's id in JSON: its code, with ``#2``, ``#3`` ... for the later findings of one code."""
    seen: dict[str, int] = {}
    ids = {}
    for finding in findings:
        seen[finding.code] = seen.get(finding.code, 0) + 1
        ids[id(finding)] = finding.code if seen[finding.code] == 1 else f"{finding.code}#{seen[finding.code]}"
    return ids


def pairs_text(report: DoctorReport, pairs: list[tuple[str, str]]) -> str:
    """``GPU 0 (0000:1a:00.0) <-> GPU 1 (0000:1b:00.0), ...`` (six shown, then how many more)."""
    shown = [f"{report.label(a)} <-> {report.label(b)}" for a, b in pairs[:6]]
    more = f" and {len(pairs) - 6} more" if len(pairs) > 6 else ""
    return ", ".join(shown) + more


def nvml_bus_id(gpu: GpuNvmlHealth) -> str:
    """An NVML GPU's bus id, or ``index N`` where NVML gave none (the key its problems are marked under)."""
    return gpu.pci_bus_id or f"index {gpu.index}"


def at_line(label: str, line: int) -> str:
    """``paste.txt line 12``: where in a paste a reading was."""
    return f"{label} line {line}"


def gpus_in_range(gpus: list[str], bdf: str, bus_range: tuple[int, int] | None) -> list[str]:
    """The GPUs (bus ids) on the buses below bridge ``bdf`` (its domain, secondary..subordinate)."""
    if bus_range is None:
        return []
    domain = bdf.split(":")[0]
    return sorted(g for g in gpus if g.split(":")[0] == domain and bus_range[0] <= int(g.split(":")[1], 16) <= bus_range[1])


def and_list(items: list[str]) -> str:
    items = list(items)
    if len(items) <= 1:
        return "".join(items)
    return ", ".join(items[:-1]) + " and " + items[-1]


_GENS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def gts_to_gen(gts: float | None) -> str:
    """``16.0`` -> ``Gen4``; ``None`` -> ``?``."""
    return f"Gen{_GENS[gts]}" if gts in _GENS else f"{gts} GT/s" if gts is not None else "?"


def gen_number(gts: float | None) -> int | None:
    """``16.0`` -> ``4``; a rate that is no PCIe generation's, or None -> None."""
    return _GENS.get(gts) if gts is not None else None
