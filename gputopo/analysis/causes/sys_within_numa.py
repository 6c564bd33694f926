"""``sys-within-numa-node``: nvidia-smi says SYS between GPUs whose affinities put them on one NUMA
node. SYS names the link between NUMA nodes, which such a pair does not cross by its affinity; some
boards (each GPU behind its own root complex) and drivers print SYS there. gputopo reads those pairs
as within the node (``analysis.place.locality``: not a crossing) and says so, with what would tell.
A virtual machine's flat view (every GPU on one CPU set) is ``virtual-machine``'s, not this."""

from __future__ import annotations

from gputopo.analysis.place.locality import link_sides, pcie_path, same_numa_side, vm_evidence
from gputopo.model import Finding, Topology
from gputopo.notation import gpu_set, number_list, pair_list


def sys_within_numa_node(topology: Topology) -> list[Finding]:
    if not link_sides(topology).sys_within_node or vm_evidence(topology) is not None:
        return []
    gpus = {gpu.index: gpu for gpu in topology.gpus}
    pairs = [(link.a, link.b) for link in topology.links
             if pcie_path(link) == "SYS" and link.a in gpus and link.b in gpus
             and same_numa_side(topology, gpus[link.a], gpus[link.b])]
    if not pairs:
        return []
    named = sorted({g for pair in pairs for g in pair})
    nodes = sorted({gpus[g].numa_node for g in named if gpus[g].numa_node is not None})
    where = f"NUMA node {number_list(nodes)}" if len(nodes) == 1 else f"the same NUMA node (nodes {', '.join(map(str, nodes[:-1]))} and {nodes[-1]})"
    return [Finding(
        "info", "sys-within-numa-node",
        f"GPU pairs {pair_list(pairs)} are SYS although the two GPUs of each pair are on {where} by "
        "their affinity: SYS names the link between NUMA nodes, which these pairs do not cross. gputopo reads them "
        "as within the node; which way their copies really go is not in the source (some boards, each GPU "
        "behind its own root complex, and drivers print SYS there)",
        gpus=named,
        fix=f"`lspci -tv` (or `gputopo gather` on the host) shows the PCIe tree of GPUs {gpu_set(named)}; "
            "`gputopo bench-p2p` measures what the pairs give",
    )]
