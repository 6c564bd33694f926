"""The paste readers of issue 31, run on every line of a paste beside ``pasted_lspci``,
``pasted_kernel`` and ``pasted_smi`` (``pasted_health.parse_pasted`` calls them): environment and
``docker run`` lines (``pasted_env``), ``setpci`` ACS reads (``pasted_setpci``), CUDA's peer answers
and errors (``pasted_cuda``), NCCL's shared-memory and GPUDirect RDMA warnings
(``pasted_nccl_warn``), short nvidia-smi / nvtop / Fabric Manager answers (``pasted_smi_lines``),
GRUB and ``/dev/shm`` lines (``pasted_host_lines``). Each line goes to the first that takes it."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.sources.evidence.pasted_cuda import scan_cuda
from gputopo.sources.evidence.pasted_env import EnvState, finish_env, scan_env
from gputopo.sources.evidence.pasted_evidence import PastedEvidence
from gputopo.sources.evidence.pasted_host_lines import scan_host_lines
from gputopo.sources.evidence.pasted_nccl_warn import LsmodGrep, ShmCrash, finish_nccl_warn, grep_output, scan_nccl_warn, scan_shm_crash
from gputopo.sources.evidence.pasted_setpci import SetpciState, scan_setpci
from gputopo.sources.evidence.pasted_smi_lines import SmiLinesState, scan_smi_lines
from gputopo.sources.evidence.pasted_text import MAX_LINE_CHARS


@dataclass
class MoreState:
    env: EnvState = field(default_factory=EnvState)
    setpci: SetpciState = field(default_factory=SetpciState)
    smi: SmiLinesState = field(default_factory=SmiLinesState)
    lsmod: LsmodGrep = field(default_factory=LsmodGrep)
    crash: ShmCrash = field(default_factory=ShmCrash)


def scan_more(evidence: PastedEvidence, line: str, number: int, state: MoreState) -> bool:
    """Read one line (its first ``MAX_LINE_CHARS``); whether a reader took it."""
    line = line[:MAX_LINE_CHARS]
    if state.lsmod.said is not None:  # the output of `lsmod | grep`, whatever else reads the line
        grep_output(evidence, line, state.lsmod)
    return (scan_env(evidence, line, number, state.env)
            or scan_setpci(evidence, line, number, state.setpci)
            or scan_nccl_warn(evidence, line, number, state.lsmod)
            or scan_shm_crash(line, number, state.crash)
            or scan_cuda(evidence, line, number)
            or scan_host_lines(evidence, line, number)
            or scan_smi_lines(evidence, line, number, state.smi))


def finish_more(evidence: PastedEvidence, state: MoreState) -> None:
    """The paste has ended: what a reader held open is read as far as it goes."""
    finish_env(evidence, state.env)
    finish_nccl_warn(evidence, state.lsmod, state.crash)
