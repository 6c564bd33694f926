"""Which GPU pairs can use peer-to-peer at all, whichever door asked: NVML's P2P read status on a live
host (``check_nvml``), a gathered archive's ``nvidia-smi topo -p2p r`` (``check_gathered``), the
peer answers of a pasted simpleP2P or kmcuda run (``check_peer_answers``: ``cuda-peer-access-no``),
and CUDA's errors on peer access in a paste (``check_cuda_errors``: 217 not supported, 711 too many
peers, 704 harmless). A capability, not a speed: ACS or the IOMMU can still make copies of pairs
that can peer slow (``acs``, ``iommu``). What the paste cannot show (which pair an error was) is
said to be unknown, with what would tell."""

from __future__ import annotations

from typing import TYPE_CHECKING

from gputopo.analysis.causes.doctor_report import DoctorReport, and_list
from gputopo.model import P2P_OK, Finding
from gputopo.model.words import P2P_STATUS_MEANING

if TYPE_CHECKING:
    from gputopo.model import Topology
    from gputopo.sources.evidence.pasted_evidence import PastedEvidence
    from gputopo.sources.host.nvml_health import NvmlHealth

TOPO_P2P = "`nvidia-smi topo -p2p r` shows which pairs can peer"


def check_nvml(nvml: NvmlHealth, report: DoctorReport) -> None:
    """NVML's P2P read status of every pair."""
    bus_of = {g.index: g.pci_bus_id for g in nvml.gpus}
    p2p_words(nvml.p2p_read, bus_of, "nvmlDeviceGetP2PStatus(GPU {a}, GPU {b}, READ): {word}", report)


def p2p_words(pairs: dict[tuple[int, int], str], bus_of: dict[int, str | None], evidence_format: str,
              report: DoctorReport) -> None:
    """Findings for the pairs whose P2P read status is not ``ok`` (NVML's, or a gathered ``topo -p2p r``)."""
    bad = {pair: word for pair, word in pairs.items() if word != P2P_OK}
    report.check("p2p-status", "problem" if bad else "ok", f"{len(pairs)} pair(s)")
    by_word: dict[str, list[tuple[int, int]]] = {}
    for pair, word in sorted(bad.items()):
        by_word.setdefault(word, []).append(pair)
    for word, word_pairs in by_word.items():
        for a, b in word_pairs:
            ga, gb = bus_of.get(a), bus_of.get(b)
            if word == "DR" and ga and gb:
                report.mark_pair(ga, gb, "p2p-disabled")
        meaning = P2P_STATUS_MEANING.get(word, word)
        report.add(Finding(
            "warning" if word == "DR" else "info", "p2p-status-" + word.lower(),
            f"{len(word_pairs)} GPU pair(s) cannot use P2P reads: {word} ({meaning}).",
            gpus=sorted({g for pair in word_pairs for g in pair}),
            evidence=[evidence_format.format(a=a, b=b, word=word) for a, b in word_pairs[:6]],
            effect="these pairs copy through host memory",
            fix="a driver registry key turned P2P off: check NVreg_RegistryDwords in /etc/modprobe.d" if word == "DR"
            else "a property of the hardware or platform: place jobs on GPUs that can peer (`gputopo recommend`)"))


def check_cuda_errors(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """CUDA's answers about peer access: 217 (not supported), 711 (too many peers), 704 (harmless).
    Error 802 is the fabric's (``fabric.check_cuda_errors``)."""
    by_code: dict[int, list] = {}
    for error in evidence.facts.cuda_errors:
        by_code.setdefault(error.code, []).append(error)
    shown = {code: [f"{label} line {e.line}: {e.text}" for e in errors[:3]] for code, errors in by_code.items()}
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


def check_peer_answers(label: str, evidence: PastedEvidence, report: DoctorReport) -> None:
    """A pasted simpleP2P or kmcuda run's answers: which pairs can access each other's memory."""
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



def check_gathered(topology: Topology, report: DoctorReport) -> None:
    """A gathered archive without NVML's answers: its ``nvidia-smi topo -p2p r`` stands in for NVML."""
    pairs = {(link.a, link.b): link.p2p_read for link in topology.links if link.p2p_read}
    if pairs:
        p2p_words(pairs, {}, "nvidia-smi topo -p2p r (gathered): GPU{a} - GPU{b}: {word}", report)
