"""The one data model every source produces and every command consumes.

A ``Topology`` is plain data: GPUs, NICs, the link between every pair of GPUs (and between GPUs
and NICs), where it all came from, what its readers noticed (``ReadingNote``: facts, which
analysis words) and the findings made about it. It round-trips exactly through
JSON (``to_dict`` / ``from_dict``) under the schema ``gputopo.topology/1``.

Link words are nvidia-smi's (``nvidia-smi topo -m``):

=========  ===========================================================================
``NV<n>``  a bonded set of n NVLinks (on NVSwitch machines every pair shows NV12/NV18)
``PIX``    at most one PCIe bridge (same PCIe switch)
``PXB``    several PCIe bridges, no host bridge
``PHB``    through a PCIe host bridge (the CPU)
``NODE``   across host bridges within one NUMA node
``SYS``    across the SMP interconnect between NUMA nodes / sockets (QPI/UPI, Infinity Fabric)
=========  ===========================================================================

P2P capability words are NVML's ``nvmlGpuP2PStatus_t`` as ``nvidia-smi topo -p2p`` prints them,
with ``ok`` for success; ``None`` means "not known" (the source did not say).
"""

from __future__ import annotations

from gputopo.model.cluster import CLUSTER_SCHEMA, Cluster
from gputopo.model.fabric import Fabric, FabricEdge, FabricNode
from gputopo.model.observed import CollectiveRow, CollectiveRun, NcclRank, NcclTransport, NcclView, NvLinkState
from gputopo.model.parts import GPU_NUMBERING_SUBJECT, Disagreement, Finding, Gpu, GpuProcess, Link, Measurement, Nic, NicLink, make_link
from gputopo.model.reading_notes import ReadingNote
from gputopo.model.tf_view import TfDevice, TfView
from gputopo.model.topology import Topology, plain_data
from gputopo.model.words import (
    MAX_NVLINKS_PER_PAIR,
    NVLINK_MEANING,
    P2P_OK,
    P2P_STATUS_MEANING,
    P2P_STATUS_WORDS,
    PCIE_PATH_MEANING,
    PCIE_PATHS,
    SCHEMA,
    SEVERITIES,
    is_known_link_type,
    normalize_pci_bus_id,
    nvlink_count_of,
)

__all__ = [
    "Fabric",
    "FabricEdge",
    "FabricNode",
    "plain_data",
    "CLUSTER_SCHEMA", "Cluster", "CollectiveRow", "CollectiveRun", "NcclRank", "NcclTransport", "NcclView", "NvLinkState", "MAX_NVLINKS_PER_PAIR", "NVLINK_MEANING", "P2P_OK", "P2P_STATUS_MEANING", "P2P_STATUS_WORDS",
    "PCIE_PATH_MEANING", "PCIE_PATHS", "SCHEMA", "SEVERITIES", "GPU_NUMBERING_SUBJECT", "Disagreement", "Finding", "Gpu", "GpuProcess", "Link", "Measurement",
    "Nic", "NicLink", "ReadingNote", "TfDevice", "TfView", "Topology", "is_known_link_type", "make_link",
    "normalize_pci_bus_id", "nvlink_count_of",
]
