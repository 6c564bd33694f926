"""Doctor's reading of what CUDA, NVML and nvidia-smi answered in a paste (``sources.evidence.pasted_cuda``
and ``pasted_smi_lines`` read it): CUDA errors 802 / 217 / 704 / 711, which pairs can access each other
(simpleP2P, kmcuda), NVLinks all inactive (NVML's one line), Fabric Manager finding no NVSwitch,
and PCIe links from ``--query-gpu`` CSV or nvtop. A cause the live checks also find keeps their code
and words (``fabric-not-ready``'s fix, ``nvlink-inactive``, the PCIe link findings of
``doctor_links``); what the paste cannot show (which pair, whether the box has NVSwitches) is said
to be unknown, with what would tell."""

from __future__ import annotations

import re

from gputopo.analysis.causes.doctor_common import DoctorReport, and_list
from gputopo.analysis.causes.doctor_links import LINK_QUERY, StateRead, narrow_link, slow_link
from gputopo.analysis.causes.doctor_nvml import fabric_not_ready_from_error
from gputopo.analysis.causes.observed_findings import nvlink_all_inactive_finding, nvlink_unheaded_finding
from gputopo.model import Finding
from gputopo.sources.evidence.pasted_evidence import PastedEvidence

# GPU models sold only as modules on boards that wire every NVLink (most behind NVSwitches): SXM parts,
# the H100 SXM5 ("H100 80GB HBM3"), H200 (its PCIe card is "H200 NVL"), B100/B200/B300, GB200/GB300.
_MODULE = re.compile(r"SXM|H100 80GB HBM3|\bH200\b(?! NVL)|\bG?B[123]00\b", re.IGNORECASE)
TOPO_P2P = "`nvidia-smi topo -p2p r` shows which pairs can peer"


def cuda_paste_checks(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    _cuda_errors(label, evidence, report)
    _peer_answers(label, evidence, report)
    _nvlink(label, evidence, report)
    _fabric_manager(label, evidence, report)
    _smi_rows(label, evidence, report)


def _models(evidence: PastedEvidence) -> str | None:
    names = sorted({n for n in evidence.nvlink_names.values() if _MODULE.search(n)})
    return and_list(names[:3]) if names else None


def _cuda_errors(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    by_code: dict[int, list] = {}
    for error in evidence.facts.cuda_errors:
        by_code.setdefault(error.code, []).append(error)
    shown = {code: [f"{label} line {e.line}: {e.text}" for e in errors[:3]] for code, errors in by_code.items()}
    if 802 in by_code:
        module = _models(evidence)
        fabric_not_ready_from_error(report, module, sorted(g for g, n in evidence.nvlink_names.items() if _MODULE.search(n)),
                                    shown[802])
    if 217 in by_code:
        report.add(Finding(
            "warning", "cuda-peer-access-unsupported",
            f"CUDA refused peer access between two GPUs (error 217, 'peer access is not supported between these two "
            f"devices', {len(by_code[217])} line(s)): that pair cannot do P2P (GeForce cards on the stock driver, "
            "GPUs of different models, a path the chipset does not support, or a VM without P2P), and the program "
            "asked for it anyway or treated the refusal as fatal. Which pair it was, the paste does not say.",
            evidence=shown[217], effect="the program that asked; copies between that pair go through host memory",
            fix=f"{TOPO_P2P}; a program must check cudaDeviceCanAccessPeer first (update it; sglang/vLLM: "
                "`--disable-custom-all-reduce` lets NCCL carry the all-reduce; NCCL_P2P_DISABLE=1 for a job that "
                "maps peers through CUDA IPC)"))
    if 711 in by_code:
        report.add(Finding(
            "warning", "cuda-too-many-peers",
            f"CUDA refused another peer mapping (error 711, 'peer mapping resources exhausted', "
            f"{len(by_code[711])} line(s)): a GPU maps at most 8 peers, system-wide (NVIDIA/nccl#51), so one process "
            "enabling peer access among more than 9 GPUs (each to every other), or several libraries mapping peers "
            "on one GPU, hits the limit. A limit of CUDA, not a fault of the GPUs or the PCIe tree.",
            evidence=shown[711], effect="the program that mapped the peers (it stops, or runs without those peers)",
            fix="give one process at most 9 GPUs (CUDA_VISIBLE_DEVICES; split the job), or keep the program from "
                "enabling peer access to every other GPU; NCCL_P2P_DISABLE=1 does not stop a program's own "
                "cudaDeviceEnablePeerAccess calls (NVIDIA/nccl#356)"))
    if 704 in by_code:
        report.add(Finding(
            "info", "cuda-peer-access-already-enabled",
            "CUDA error 704 (0x2c0, 'peer access is already enabled'): harmless. A program (NCCL among them) enabled "
            "peer access for a pair that already had it, then cleared the error; a debugger (cuda-gdb, "
            "compute-sanitizer) reports every such return. It says peer access works, not that it is missing.",
            evidence=shown[704], fix="nothing to fix; in cuda-gdb `set cuda api_failures ignore` silences it"))


def _peer_answers(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    answers = evidence.facts.peer_answers
    if not answers:
        return
    can = {frozenset((a.a, a.b)) for a in answers if a.can}
    cannot = {frozenset((a.a, a.b)) for a in answers if not a.can} - can
    pairs = lambda found: ", ".join(f"{min(p)}-{max(p)}" for p in sorted(found, key=sorted)[:12])  # noqa: E731
    gpus = sorted({g for a in answers for g in (a.a, a.b)})
    asked = {(a.a, a.b) for a in answers}
    cut = "" if len(asked) >= len(gpus) * (len(gpus) - 1) else (
        f" The paste shows {len(asked)} of the {len(gpus) * (len(gpus) - 1)} ordered pairs of these GPUs: the others "
        "are unknown.")
    if not cannot:
        report.check("p2p-status", "ok", f"peer access Yes for every pair shown ({len(can)}) in {label}: a capability, "
                     "not a speed (IOMMU translation or ACS can still make copies slow or hang)" + cut)
        return
    report.check("p2p-status", "problem", f"{len(cannot)} pair(s) without peer access in {label}")
    models = {n for a in answers if not a.can and a.names for n in a.names}
    mixed = (" GPUs of different models never peer (here: " + and_list(sorted(models)[:4]) + ")."
             if len(models) > 1 else "")
    report.add(Finding(
        "info", "cuda-peer-access-no",
        f"CUDA says {len(cannot)} GPU pair(s) cannot access each other's memory directly ({pairs(cannot)}): copies "
        "between them go through host memory (slower, not wrong)."
        + (f" Pairs that can: {pairs(can)}." if can else "") + mixed
        + (" Only some pairs peering is what a host with GPUs under different CPUs or root complexes shows: "
           "`nvidia-smi topo -m` tells where each GPU sits." if can and not mixed else "") + cut,
        gpus=gpus, evidence=[f"{label} line {a.line}: {a.text}" for a in answers if not a.can][:4],
        effect="copies and collectives between those pairs",
        fix="place the GPUs that work together on pairs that can peer (CUDA_VISIBLE_DEVICES); " + TOPO_P2P))


def _nvlink(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    facts = evidence.facts
    for gpu, said in sorted(facts.nvml_no_links.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        name = evidence.nvlink_names.get(gpu) if gpu is not None else None
        module = name is not None and _MODULE.search(name)
        report.add(nvlink_all_inactive_finding(gpu, name, bool(module), [f"{label} line {said.line}: {said.text}"]))
    for gpu, links in sorted(facts.links_inactive.items(), key=lambda item: (item[0] is None, item[0] or 0)):
        if gpu is not None and gpu in evidence.nvlink_states:
            continue  # read with its header by pasted_smi, judged there
        report.add(nvlink_unheaded_finding(gpu, sorted(links),
                                           [f"{label} line {s.line}: {s.text}" for _, s in sorted(links.items())[:4]]))
    if facts.nvml_no_links or facts.links_inactive:
        report.check("nvlink", "problem" if any(f.code == "nvlink-inactive" and f.severity != "info"
                                                for f in report.findings) else "ok",
                     f"NVLink state in {label}")


def _fabric_manager(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    said = evidence.facts.fabric_nothing_to_do
    if said is None:
        return
    report.check("nvswitch-fabric", "ok", f"Fabric Manager found no NVSwitch ({label} line {said.line}): none to manage")
    report.add(Finding(
        "info", "fabric-manager-no-nvswitch",
        "Fabric Manager stopped with NV_WARN_NOTHING_TO_DO: it found no NVSwitch. Only NVSwitch systems (HGX/DGX) "
        "need it; GPUs joined by an NVLink bridge, or by PCIe alone, do not. Its failed service is harmless here.",
        evidence=[f"{label} line {said.line}: {said.text}"],
        fix="`sudo systemctl disable --now nvidia-fabricmanager` (or remove the package); `nvidia-smi nvlink -s` "
            "shows whether bridge links are up"))


def _smi_rows(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    rows = evidence.facts.smi_rows
    if not rows:
        return
    judged = 0
    for row in rows:
        who = f"GPU {row.index}" if row.index is not None else "a GPU"
        if row.name:
            who += f" ({row.name})"
        where = [f"{label} line {row.line}: {row.text}"]
        gpus = [row.index] if row.index is not None else []
        if row.width is not None and row.width_max is not None:
            judged += 1
            if row.width < row.width_max:
                narrow_link(report, who, row.width, row.width_max, below=[row.bus_id] if row.bus_id else [],
                            affected=who, evidence=where, gpus=gpus)
        if row.gen is not None and row.gen_max is not None:
            judged += 1
            if row.gen < row.gen_max:
                state = _pstate(row.pstate)
                slow_link(report, who, f"Gen{row.gen}", f"Gen{row.gen_max}", gpus=gpus, evidence=where, bdf=row.bus_id,
                          state=StateRead(state, row.gen, row.gen_max, f"{label} line {row.line}: {row.pstate}")
                          if state is not None else None, gen_now=row.gen)
    if judged:
        report.check("pcie-links", "ok" if not any(f.code in ("pcie-link-narrow", "pcie-link-slow") for f in report.findings)
                     else "problem", f"{len(rows)} GPU link(s) in {label}")
        return
    idle = [r for r in rows if (_pstate(r.pstate) or 0) >= 8]
    report.check("pcie-links", "not-made",
                 f"{label} shows each GPU's current link ({', '.join(f'Gen{r.gen} x{r.width}' for r in rows[:4])}) "
                 "but not what it can do: "
                 + ("add pcie.link.gen.max,pcie.link.width.max to the query" if all(r.source != "nvtop" for r in rows)
                    else f"nvtop shows only the current link; `{LINK_QUERY}` shows both")
                 + (f"; {len(idle)} GPU(s) in P8 or lower power, where a low generation is by design" if idle else
                    "; the performance state is not shown either (idle GPUs lower their link by design)"))


def _pstate(text: str | None) -> int | None:
    if text and text[:1] == "P" and text[1:].isdigit() and len(text) <= 3:
        return int(text[1:])
    return None
