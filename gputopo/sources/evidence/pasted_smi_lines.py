"""Short nvidia-smi (and friends') answers users paste, for doctor:

- ``NVML: Unable to retrieve NVLink information as all links are inActive`` (``nvidia-smi nvlink
  -s`` on a GPU with no link up), for the GPU of the ``GPU N: ...`` line before it where there is one;
- ``Link K: <inactive>`` lines with no ``GPU N:`` line before them (the header cut off), or on one
  line with it (``GPU 0: ... Link 0: <inactive>``);
- ``nvidia-smi --query-gpu=...,pstate,pcie.link.gen.current,... --format=csv``: the header line
  names the columns (or, with ``noheader``, the command line does); each row is a GPU;
- nvtop's device header (``Device 1 [GeForce GTX 1080 Ti] PCIe GEN 1@16x``);
- Fabric Manager's log: ``NV_WARN_NOTHING_TO_DO`` (it found no NVSwitch to manage), and its refusal to
  start with another driver (``fabric manager NVIDIA GPU driver interface version 530.30.02 don't match
  with driver version 530.41.03``: any apostrophe, "doesn't" or "does not", with or without the
  journal's prefix or a closing full stop).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.sources.evidence.pasted_evidence import PastedEvidence, full_bdf, shown
from gputopo.sources.evidence.pasted_facts import FabricVersions, Said, SmiRow

_GPU = re.compile(r"\bGPU ([0-9]{1,4}):")
_LINK_INACTIVE = re.compile(r"\bLink ([0-9]{1,2}):\s*<inactive>")
_QUERY = re.compile(r"--query-gpu[= ]([\w.,]{1,1024})")
_NVTOP = re.compile(r"\bDevice ([0-9]{1,3})\b.{0,120}?PCIe GEN ([0-9]{1,2})\s*@\s*([0-9]{1,2})x")
_NVTOP_NAME = re.compile(r"\[([^\]]{1,80})\]")
_VERSION = r"([0-9]{2,4}(?:\.[0-9]{1,4}){1,3})"
_FM_VERSIONS = re.compile(r"fabric manager\b.{0,60}?\binterface version " + _VERSION
                          + r".{0,16}?(?:n['’`]?t|\bnot) match(?:es)? with (?:the )?(?:nvidia )?driver version "
                          + _VERSION, re.IGNORECASE)
_BUS = re.compile(r"^([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])$")
_COLUMNS = {"index": "index", "pci.bus_id": "bus_id", "name": "name", "gpu_name": "name", "pstate": "pstate",
            "pcie.link.gen.current": "gen", "pcie.link.gen.gpucurrent": "gen", "pcie.link.gen.max": "gen_max",
            "pcie.link.gen.gpumax": "gen_gpu_max", "pcie.link.gen.hostmax": "gen_host_max",
            "pcie.link.width.current": "width", "pcie.link.width.max": "width_max"}
# ``gen.max`` is what the GPU and the system can both do; ``gen.gpumax`` the GPU's own, ``gen.hostmax``
# the host's: the link's top is the lower of those two, and the GPU's alone says nothing of the slot.
_NUMBERS = ("index", "gen", "gen_max", "gen_gpu_max", "gen_host_max", "width", "width_max")
MAX_COLUMNS = 64


@dataclass
class SmiLinesState:
    gpu: int | None = None  # the GPU of the last ``GPU N:`` line
    columns: list[str] = field(default_factory=list)  # the --query-gpu columns, where known
    headed: bool = False  # the columns came from a header line (else from the command line)


def scan_smi_lines(evidence: PastedEvidence, line: str, number: int, state: SmiLinesState) -> bool:
    """Read one line into ``evidence.facts``; whether it was one of these."""
    facts, lower = evidence.facts, line.lower()
    gpu = _GPU.search(line)
    if gpu:
        state.gpu = int(gpu.group(1))
    if "all links are inactive" in lower:
        evidence.add_kind("nvidia-smi nvlink -s")
        facts.nvml_no_links[state.gpu] = Said(number, shown(line))
        return True
    link = _LINK_INACTIVE.search(line)
    if link and (gpu or not line[:1].isspace() or state.gpu is None):
        evidence.add_kind("nvidia-smi nvlink -s")
        facts.links_inactive.setdefault(state.gpu if gpu else None, {})[int(link.group(1))] = Said(number, shown(line))
        return True
    if "nv_warn_nothing_to_do" in lower:
        evidence.add_kind("Fabric Manager log")
        facts.fabric_nothing_to_do = Said(number, shown(line))
        return True
    versions = _FM_VERSIONS.search(line) if "interface version" in lower else None
    if versions and versions.group(1) != versions.group(2):  # one version twice: no mismatch to tell of
        evidence.add_kind("Fabric Manager log")
        facts.fabric_versions = FabricVersions(number, shown(line), manager=versions.group(1), driver=versions.group(2))
        return True
    if "pcie gen" in lower:
        return _nvtop(evidence, line, number)
    return _query_gpu(evidence, line, number, state)


def _nvtop(evidence: PastedEvidence, line: str, number: int) -> bool:
    nvtop = _NVTOP.search(line)
    if nvtop is None:
        return False
    name = _NVTOP_NAME.search(line)
    evidence.add_kind("nvtop")
    evidence.facts.keep(evidence.facts.smi_rows, SmiRow(
        number, shown(line), index=int(nvtop.group(1)), name=name.group(1) if name else None,
        gen=int(nvtop.group(2)), width=int(nvtop.group(3)), source="nvtop"))
    return True


def _query_gpu(evidence: PastedEvidence, line: str, number: int, state: SmiLinesState) -> bool:
    query = _QUERY.search(line)
    if query:
        if not state.headed:
            state.columns = [c.strip().lower() for c in query.group(1).split(",")][:MAX_COLUMNS]
        return True
    cells = [c.strip() for c in line.split(",")]
    if "pcie.link." in line and any(c.split(" [")[0].lower() in _COLUMNS for c in cells):
        state.columns, state.headed = [c.split(" [")[0].lower() for c in cells][:MAX_COLUMNS], True
        evidence.add_kind("nvidia-smi --query-gpu")
        return True
    if not state.columns or len(cells) != len(state.columns):
        return False
    row, ends = SmiRow(number, shown(line)), {}
    for column, cell in zip(state.columns, cells):
        field_name = _COLUMNS.get(column)
        if field_name is None or cell in ("", "N/A", "[N/A]", "[Not Supported]"):
            continue
        if field_name in _NUMBERS:
            if not (cell.isascii() and cell.isdigit()) or len(cell) > 4:  # "²" passes isdigit(), not int()
                return False
            if field_name in ("gen_gpu_max", "gen_host_max"):
                ends[field_name] = int(cell)
            else:
                setattr(row, field_name, int(cell))
        elif field_name == "bus_id":
            bus = _BUS.match(cell)
            row.bus_id = full_bdf(f"{int(bus.group(1), 16):04x}:{bus.group(2)}") if bus else None
        else:
            setattr(row, field_name, cell[:80])
    if row.gen_max is None and len(ends) == 2:  # both ends' tops: the link's is the lower
        row.gen_max = min(ends.values())
    if row.gen is None and row.width is None and row.pstate is None:
        return False
    evidence.add_kind("nvidia-smi --query-gpu")
    evidence.facts.keep(evidence.facts.smi_rows, row)
    return True
