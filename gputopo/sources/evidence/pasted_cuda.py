"""CUDA's answers about peers as programs print them, for doctor:

- CUDA errors by number, name or message, whatever program printed them (``CUDA error 217 at
  ggml-cuda.cu:6292``, ``code=802(cudaErrorSystemNotReady)``, ``Error 802: system not yet
  initialized``, cuda-gdb's ``cudaDeviceEnablePeerAccess returned (0x2c0)``): 802 (system not yet
  initialized), 217 (peer access is not supported between these two devices), 704 (peer access is
  already enabled), 711 (peer mapping resources exhausted: ``CUDA_ERROR_TOO_MANY_PEERS``). A bare hex code is read only on a line that names a CUDA call or CUDA;
- CUDA sample ``simpleP2P``: ``> Peer access from <name> (GPU0) -> <name> (GPU1) : Yes``;
- kmcuda's ``p2p 1 <-> 0 is impossible``.

Lines of an NCCL log (``NCCL WARN`` / ``NCCL INFO``) are left to ``sources.tools.nccl_log``, which reads
them with their ranks. The GPU models are read from ``GPU N: <name>`` lines by ``pasted_smi`` (``nvlink_names``).
"""

from __future__ import annotations

import re

from gputopo.sources.evidence.pasted_evidence import PastedEvidence, shown
from gputopo.sources.evidence.pasted_facts import CudaError, PeerAnswer

# Each code by the words CUDA gives it (message, runtime name, driver name): lower case, searched as is.
CODES = {
    802: ("system not yet initialized", "cudaerrorsystemnotready", "cuda_error_system_not_ready"),
    217: ("peer access is not supported between these two devices", "cudaerrorpeeraccessunsupported",
          "cuda_error_peer_access_unsupported"),
    704: ("peer access is already enabled", "cudaerrorpeeraccessalreadyenabled",
          "cuda_error_peer_access_already_enabled"),
    711: ("peer mapping resources exhausted", "cudaerrortoomanypeers", "cuda_error_too_many_peers"),
}
_NUMBER = re.compile(r"\b(?:error|code|err)\s*[=:]?\s*(802|217|704|711)\b|\(0x(2c0|0d9|322|2c7)\)")
_HEX = {"2c0": 704, "0d9": 217, "322": 802, "2c7": 711}
_SIMPLE_P2P = re.compile(r"\(GPU([0-9]{1,4})\)")
_ANSWER = re.compile(r":\s*(Yes|No)\s*$")
_KMCUDA = re.compile(r"\bp2p ([0-9]{1,4}) <-> ([0-9]{1,4}) is impossible")


def scan_cuda(evidence: PastedEvidence, line: str, number: int) -> bool:
    """Read one line into ``evidence.facts``; whether it said something about CUDA and peers."""
    lower = line.lower()
    if "peer access from" in lower and _simple_p2p(evidence, line, number):
        return True  # else TF's "failed to enable peer access from 0x.. to 0x..: CUDA_ERROR_...": its error is read below
    kmcuda = _KMCUDA.search(line)
    if kmcuda:
        evidence.add_kind("peer access answers")
        evidence.facts.keep(evidence.facts.peer_answers, PeerAnswer(
            number, shown(line), int(kmcuda.group(1)), int(kmcuda.group(2)), False))
        return True
    if " nccl warn " in lower or " nccl info " in lower:
        return False  # an NCCL log's line: sources.tools.nccl_log reads it with its ranks (nccl-p2p-ipc-failed ...)
    code = next((c for c, words in CODES.items() if any(w in lower for w in words)), None)
    if code is None and "cuda" in lower:
        numbered = _NUMBER.search(lower)
        if numbered:
            code = int(numbered.group(1)) if numbered.group(1) else _HEX[numbered.group(2)]
    if code is None:
        return False
    evidence.add_kind("CUDA error")
    evidence.facts.keep(evidence.facts.cuda_errors, CudaError(number, shown(line), code))
    return True


def _simple_p2p(evidence: PastedEvidence, line: str, number: int) -> bool:
    gpus = _SIMPLE_P2P.findall(line)
    answer = _ANSWER.search(line)
    if len(gpus) != 2 or answer is None:
        return False
    names = None
    body = line.split("Peer access from", 1)[1] if "Peer access from" in line else ""
    left, arrow, right = body.partition("->")
    if arrow:
        names = (left.split("(GPU", 1)[0].strip()[:80], right.split("(GPU", 1)[0].strip()[:80])
    evidence.add_kind("simpleP2P")
    evidence.facts.keep(evidence.facts.peer_answers, PeerAnswer(
        number, shown(line), int(gpus[0]), int(gpus[1]), answer.group(1) == "Yes", names))
    return True
