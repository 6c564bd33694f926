"""The words of the model: nvidia-smi's link words, NVML's P2P status words, severities, and the
normal forms of PCI bus ids and ``NV<n>`` words."""

from __future__ import annotations

import re

SCHEMA = "gputopo.topology/1"

# PCIe path words, best (shortest path) first. "SOC" is the pre-2017 nvidia-smi word for SYS.
PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")
PCIE_PATH_MEANING = {
    "PIX": "at most one PCIe bridge between them (same PCIe switch)",
    "PXB": "several PCIe bridges between them, without the CPU's host bridge",
    "PHB": "through a PCIe host bridge (the CPU)",
    "NODE": "across PCIe host bridges within one NUMA node",
    "SYS": "across the SMP interconnect between NUMA nodes (between CPU sockets on most two-socket servers; within one socket on EPYC NPS2/NPS4, Intel SNC or Grace)",
}
NVLINK_MEANING = "a bonded set of {n} NVLinks"

# nvmlGpuP2PStatus_t values and the words nvidia-smi topo -p2p prints for them.
P2P_OK = "ok"
P2P_STATUS_WORDS = {0: "ok", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
P2P_STATUS_MEANING = {
    "ok": "supported",
    "CNS": "chipset not supported (the PCIe root complex/chipset does not allow peer traffic)",
    "GNS": "GPU not supported (this GPU model or its mode does not allow peer access)",
    "TNS": "topology not supported (e.g. the GPUs sit under different CPU sockets / IOH)",
    "DR": "disabled by registry key / driver setting",
    "NS": "not supported",
    "U": "unknown (the driver could not tell)",
}

SEVERITIES = ("info", "warning", "error")

_NV_RE = re.compile(r"^NV(\d{1,3})$", re.ASCII)
# The most NVLinks one pair of GPUs has (B200: 18); more is a typo or a damaged file.
MAX_NVLINKS_PER_PAIR = 64
_BUS_ID_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])$"
)


def normalize_pci_bus_id(bus_id: str | None) -> str | None:
    """Return a PCI bus id as ``dddd:bb:dd.f`` in lower case (NVML prints 8 domain digits, TF 4).

    ``None`` or an unparseable id gives ``None``.
    """
    if bus_id is None:
        return None
    text = bus_id.strip().rstrip("\x00")
    match = _BUS_ID_RE.match(text)
    if not match:
        return None
    domain = int(match.group("domain") or "0", 16)
    return (
        f"{domain:04x}:{int(match.group('bus'), 16):02x}:"
        f"{int(match.group('dev'), 16):02x}.{match.group('fn')}"
    )


def nvlink_count_of(link_type: str) -> int:
    """``"NV4"`` -> 4; any PCIe word -> 0."""
    match = _NV_RE.match(link_type)
    return int(match.group(1)) if match else 0


def is_known_link_type(link_type: str) -> bool:
    """A PCIe path word, or ``NV<n>`` with 1 <= n <= ``MAX_NVLINKS_PER_PAIR``."""
    return link_type in PCIE_PATHS or 1 <= nvlink_count_of(link_type) <= MAX_NVLINKS_PER_PAIR
