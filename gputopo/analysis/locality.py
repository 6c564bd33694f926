"""Where the GPUs sit: CPU sockets, NUMA nodes, a virtual machine's flat view. Pure functions.

A NUMA node is not a socket: AMD EPYC in NPS2/NPS4, Intel sub-NUMA clustering and NVIDIA Grace put
several NUMA nodes in one socket, and nvidia-smi's ``SYS`` means "between NUMA nodes". So:

- sockets are *known* only where the source says them (``Gpu.socket``: the NVML probe reads sysfs,
  reference machines carry public facts); ``nvidia-smi`` text never says them;
- one NUMA node implies one socket: a PCIe path below SYS (PIX, PXB, PHB, NODE), or GPUs whose
  NUMA affinity (or, without one, CPU affinity) is the same and tells the GPUs apart;
- different NUMA nodes say nothing about sockets: ``same_socket`` is then ``None`` unless known;
- a virtual machine shows the hypervisor's PCI topology: nothing is concluded from it.
"""

from __future__ import annotations

from collections import defaultdict

from gputopo.model import Gpu, Link, Topology
from gputopo.notation import parse_cpu_list

# What nvidia-smi's SYS means, for findings made where the sockets are not known.
SYS_MEANING = (
    "SYS: the link between NUMA nodes, across CPU sockets on most two-socket servers, "
    "within one socket on AMD EPYC NPS2/NPS4, Intel SNC or Grace"
)
BELOW_SYS = ("PIX", "PXB", "PHB", "NODE")


def pcie_path(link: Link) -> str | None:
    """The PCIe path word of a link (``Link.type`` is NV<n> where NVLink exists)."""
    if link.pcie_path:
        return link.pcie_path
    return None if link.is_nvlink or link.type == "UNKNOWN" else link.type


def sockets_known(topology: Topology, gpus: list[int] | None = None) -> bool:
    """Whether the source says the CPU socket of every GPU (of ``gpus``)."""
    chosen = topology.gpus if gpus is None else [topology.gpu(g) for g in gpus]
    return bool(chosen) and all(g.socket is not None for g in chosen)


# --- a virtual machine's flat topology -----------------------------------------------------------


def _affinity_text(gpu: Gpu) -> str | None:
    if gpu.numa_affinity:
        return gpu.numa_affinity
    return None if gpu.numa_node is None else str(gpu.numa_node)


def vm_evidence(topology: Topology) -> str | None:
    """Why the topology looks like a virtual machine's (the hypervisor's virtual PCI topology), or
    None. Conservative: every GPU shares one CPU set / NUMA affinity yet every pair shows SYS (SOC),
    or every GPU shares one CPU set and a multi-node NUMA set and reaches every NIC through PHB."""
    gpus = topology.gpus
    if len(gpus) < 2 or topology.is_reference or len({g.host for g in gpus}) > 1:
        return None
    cpus = {g.cpu_affinity for g in gpus}
    numa = {_affinity_text(g) for g in gpus}
    if len(cpus) > 1 or len(numa) > 1 or cpus == {None} and numa == {None}:
        return None  # the GPUs differ (or nothing is known): a real layout, or no evidence
    shared = [f"CPUs {next(iter(cpus))}"] if cpus != {None} else []
    if numa != {None}:
        nodes = next(iter(numa))
        shared.append(f"NUMA node{'s' if len(gpus[0].numa_nodes or ()) > 1 else ''} {nodes}")
    everyone = f"{'both GPUs' if len(gpus) == 2 else f'all {len(gpus)} GPUs'} share {' and '.join(shared)}"
    paths = [pcie_path(link) for link in topology.links]
    if paths and all(path == "SYS" for path in paths):
        return f"{everyone}, yet nvidia-smi shows SYS (SOC) between every pair"
    multi_node = len(gpus[0].numa_nodes or ()) > 1 and all(g.gpu_numa_id is None for g in gpus)
    nic_paths = {link.type for link in topology.nic_links}
    if multi_node and cpus != {None} and nic_paths == {"PHB"}:
        return f"{everyone}, and every GPU reaches every NIC through one host bridge (PHB)"
    return None


# --- NUMA nodes and sockets ----------------------------------------------------------------------


def _tells_apart(topology: Topology, kind: str) -> bool:
    """Whether the GPUs' NUMA (``kind="numa"``) or CPU affinities are per-GPU facts: not one value
    shared by all GPUs where that value cannot be the truth (a multi-node NUMA set, or one CPU set
    with SYS between GPUs: a job's cpuset or a container's view)."""
    values = {_affinity_text(g) if kind == "numa" else g.cpu_affinity for g in topology.gpus}
    if len(values) > 1 or len(topology.gpus) < 2:
        return True
    if kind == "numa":
        return len(topology.gpus[0].numa_nodes or ()) <= 1
    return not any(pcie_path(link) == "SYS" for link in topology.links)


def same_numa_side(topology: Topology, a: Gpu, b: Gpu) -> bool | None:
    """Whether two GPUs hang off the same NUMA node, from their NUMA (else CPU) affinity: True,
    False, or None where the facts do not tell (unknown, overlapping, shared by a flat view)."""
    if a.host != b.host:
        return False
    if vm_evidence(topology) is not None:
        return None
    nodes_a, nodes_b = a.numa_nodes, b.numa_nodes
    if nodes_a is not None and nodes_b is not None:
        if nodes_a == nodes_b:
            return True if _tells_apart(topology, "numa") else None
        return False if not nodes_a & nodes_b else None
    if nodes_a is None and nodes_b is None and a.cpu_affinity and b.cpu_affinity:
        if a.cpu_affinity == b.cpu_affinity:
            return True if _tells_apart(topology, "cpu") else None
        return None if _overlap(a.cpu_affinity, b.cpu_affinity) else False
    return None


def _overlap(cpus_a: str, cpus_b: str) -> bool:
    try:
        return bool(set(parse_cpu_list(cpus_a)) & set(parse_cpu_list(cpus_b)))
    except ValueError:
        return True


def same_socket(topology: Topology, a: int, b: int) -> bool | None:
    """Whether GPUs ``a`` and ``b`` share a CPU socket: known sockets decide; one NUMA node (a PCIe
    path below SYS, or the same NUMA side) implies one socket; different NUMA nodes leave it None."""
    gpu_a, gpu_b = topology.gpu(a), topology.gpu(b)
    if gpu_a.host != gpu_b.host:
        return False
    if gpu_a.socket is not None and gpu_b.socket is not None:
        return gpu_a.socket == gpu_b.socket
    if vm_evidence(topology) is not None:
        return None
    path = pcie_path(topology.link(a, b))
    if path in BELOW_SYS:
        return True
    if path is None and same_numa_side(topology, gpu_a, gpu_b):
        return True
    return None


def link_crosses_numa(topology: Topology, link: Link) -> bool:
    """Whether a link's GPUs sit on different NUMA nodes: a SYS path, or (nvidia-smi text shows only
    NV<n> for NVLinked pairs) NVLinked GPUs whose affinities differ. Unknown links (a TF log alone)
    and a virtual machine's flat view are not claimed either way."""
    if vm_evidence(topology) is not None:
        return False
    path = pcie_path(link)
    if path == "SYS":
        return True
    return path is None and link.is_nvlink and same_numa_side(topology, topology.gpu(link.a), topology.gpu(link.b)) is False


def socket_groups(topology: Topology) -> list[list[int]]:
    """GPUs grouped by what they share below the interconnect between NUMA nodes.

    Connected components of "PCIe path known and not SYS" (per host): GPUs 0-3 of a DGX-1, the GPU
    pairs of an NPS4 DGX A100. Where a pair's PCIe path is unknown (``nvidia-smi topo -m`` shows only
    NV<n> for NVLinked pairs), the two GPUs are joined when their NUMA (else CPU) affinity says so.
    """
    parent = {g: g for g in topology.gpu_indices}

    def find(g: int) -> int:
        while parent[g] != g:
            parent[g] = parent[parent[g]]
            g = parent[g]
        return g

    for link in topology.links:
        path = pcie_path(link)
        if path is None:
            joined = bool(same_numa_side(topology, topology.gpu(link.a), topology.gpu(link.b)))
        else:
            joined = path != "SYS"
        if joined:
            ra, rb = find(link.a), find(link.b)
            if ra != rb:
                parent[max(ra, rb)] = min(ra, rb)
    groups: dict[int, list[int]] = defaultdict(list)
    for g in topology.gpu_indices:
        groups[find(g)].append(g)
    return sorted((sorted(members) for members in groups.values()), key=lambda m: m[0])
