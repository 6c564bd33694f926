"""NCCL's warnings about shared memory and GPUDirect RDMA, alone or in a log, for doctor:

- ``Call to posix_fallocate failed : No space left on device`` (``include/shm.h`` of NCCL 2.7-2.11,
  ``shmutils.cc`` later) and ``Error while creating shared memory segment <name> (size N)``:
  NCCL could not create a segment in ``/dev/shm``;
- ``NET/IB : GPU Direct RDMA Disabled for HCA 0 'mlx5_0'`` (and ``GDR ... not supported`` /
  ``... disabled``): NCCL stages network traffic through host memory;
- an ``lsmod`` line of ``nvidia_peermem`` / ``nv_peer_mem``: the peer-memory module is loaded;
- ``Could not find real path of /sys/class/pci_bus/...`` (``include/topo.h`` of NCCL 2.4): NCCL's
  topology detection could not resolve a GPU's (or NIC's) PCI device under ``/sys``.
- ``NET/IB : Using [0]mlx5_0:1/IB ...``: NCCL takes the IB/RoCE transport between nodes (whether
  with GPUDirect RDMA, its own line says).

Lines of an NCCL log that say more (rings, channels, ``P2P is disabled between connected GPUs``)
are ``sources.tools.nccl_log``'s, read as ``scan --from`` reads them.
"""

from __future__ import annotations

import re

from gputopo.sources.evidence.pasted_evidence import PastedEvidence, shown
from gputopo.sources.evidence.pasted_facts import Said, ShmFailure

_SIZE = re.compile(r"\(size ([0-9]{1,15})\)")
_GDR = re.compile(r"\bGDR\b")
_NET_IB_USING = re.compile(r"NET/IB ?: Using \[\d{1,3}\]")
_LSMOD = re.compile(r"^\s*(nvidia_peermem|nv_peer_mem)\s+[0-9]{1,12}\s+[0-9]{1,6}")


def scan_nccl_warn(evidence: PastedEvidence, line: str, number: int) -> bool:
    """Read one line into ``evidence.facts``; whether it was one of these."""
    lower = line.lower()
    if ("posix_fallocate" in lower and "no space left" in lower) or "error while creating shared memory segment" in lower:
        size = _SIZE.search(line)
        evidence.add_kind("NCCL shared-memory error")
        evidence.facts.keep(evidence.facts.shm_failures,
                            ShmFailure(number, shown(line), int(size.group(1)) if size else None))
        return True
    if ("gpu direct rdma" in lower or _GDR.search(line)) and ("disabled" in lower or "not supported" in lower):
        evidence.add_kind("NCCL GPUDirect RDMA")
        evidence.facts.keep(evidence.facts.gdr_disabled, Said(number, shown(line)))
        return True
    if "could not find real path of /sys/" in lower:
        evidence.add_kind("NCCL sysfs path")
        evidence.facts.keep(evidence.facts.sysfs_unresolved, Said(number, shown(line)))
        return True
    if _NET_IB_USING.search(line):
        evidence.add_kind("NCCL NET/IB")
        evidence.facts.net_ib_used = evidence.facts.net_ib_used or Said(number, shown(line))
        return True
    lsmod = _LSMOD.match(line)
    if lsmod:
        evidence.add_kind("lsmod")
        evidence.facts.peermem_loaded = Said(number, shown(line))
        return True
    return False
