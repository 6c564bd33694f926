"""Slurm's block topology (topology/block, topology.conf ``BlockName=... Nodes=...``) from the NVLink
domain each host is in.

A block is a set of nodes Slurm keeps a job inside where it can: here, the hosts one NVLink fabric
joins (a GB200 NVL72 rack's 18 trays), so a job's GPUs talk over NVLink rather than the network.
Which domain a host is in, in the order of what is known:

1. the fabric's own ids, where the snapshot has them (``Gpu.fabric_cluster_uuid`` and
   ``fabric_clique_id``, NVML's ``nvmlDeviceGetGpuFabricInfo``): hosts whose GPUs share both are
   one domain (a cluster UUID of zeros is a fabric not yet set up, and tells nothing);
2. NVLinks between GPUs of different hosts in one topology (a rack read as one, as the
   ``gb200-nvl72`` reference machine): hosts so joined are one domain;
3. otherwise a host is its own block, and the file says so.

``BlockSizes=`` is the planning base block size, in nodes: the smallest block (a block smaller than
the base is not used for multi-block jobs); Slurm makes the larger levels from it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.quoting import slurm_node

ZERO_UUID_CHARS = frozenset("0-")


@dataclass
class Block:
    name: str
    nodes: list[str]
    why: str  # how its nodes were found to share a domain


@dataclass
class BlockTopology:
    blocks: list[Block]
    sizes: list[int]
    notes: list[str] = field(default_factory=list)


def _host_of(topology: Topology, gpu_host: str | None) -> str | None:
    return gpu_host or topology.host


def _fabric_keys(topology: Topology) -> dict[str | None, set[tuple[str | None, int | None]]]:
    """Each host's (cluster UUID, clique id) pairs its GPUs report: one pass over the GPUs (a pass per
    host made a snapshot of 4,096 one-GPU hosts cost 16 million steps)."""
    keys: dict[str | None, set[tuple[str | None, int | None]]] = {}
    for gpu in topology.gpus:
        keys.setdefault(_host_of(topology, gpu.host), set()).add((gpu.fabric_cluster_uuid, gpu.fabric_clique_id))
    return keys


def _fabric_key(keys: set[tuple[str | None, int | None]]) -> tuple[str, int] | None:
    """The (cluster UUID, clique id) every GPU of a host reports, or None where not all say one."""
    if len(keys) != 1:
        return None
    uuid, clique = next(iter(keys))
    if uuid is None or clique is None or set(uuid) <= ZERO_UUID_CHARS:
        return None
    return uuid, clique


def _find(parent: dict[str, str], host: str) -> str:
    while parent[host] != host:
        parent[host] = parent[parent[host]]
        host = parent[host]
    return host


def block_topology(topologies: list[Topology]) -> BlockTopology:
    """One block per NVLink domain over every host of ``topologies`` (module docstring)."""
    hosts: list[str] = []
    parent: dict[str, str] = {}
    why: dict[str, str] = {}
    for topology in topologies:
        names = {gpu.index: _host_of(topology, gpu.host) for gpu in topology.gpus}
        for host in dict.fromkeys(names.values()):
            if host is None:
                raise InputError("a topology without a host name cannot be placed in a block: name it "
                                 "(`scan --host NAME --save`)")
            if host in parent:
                raise InputError(f"host {host} is given twice")
            slurm_node(host)
            hosts.append(host)
            parent[host] = host
        if len(set(names.values())) > 1:
            for link in topology.links:  # one pass: hosts joined by NVLink in one topology
                if link.nvlink_count > 0 and names.get(link.a) != names.get(link.b):
                    a, b = _find(parent, names[link.a]), _find(parent, names[link.b])  # type: ignore[index]
                    if a != b:
                        parent[b] = a
                        why[a] = "hosts joined by NVLink in one topology"
    by_fabric: dict[tuple[str, int], str] = {}
    for topology in topologies:
        for host, keys in _fabric_keys(topology).items():
            key = _fabric_key(keys)
            if key is None:
                continue
            root = _find(parent, host)  # type: ignore[arg-type]
            if key in by_fabric and _find(parent, by_fabric[key]) != root:
                parent[root] = _find(parent, by_fabric[key])
            by_fabric.setdefault(key, host)  # type: ignore[arg-type]
            why[_find(parent, host)] = f"NVLink fabric cluster {key[0]} clique {key[1]}"  # type: ignore[arg-type]
    groups: dict[str, list[str]] = {}
    for host in hosts:
        groups.setdefault(_find(parent, host), []).append(host)
    alone = "one host: the source has no NVLink fabric ids (cluster UUID, clique) and no NVLink to another host"
    blocks = [Block(f"b{i}", members, why.get(root, alone)) for i, (root, members) in enumerate(groups.items(), start=1)]
    notes = []
    if any(b.why == alone for b in blocks):
        notes.append("hosts whose NVLink domain is unknown are one block each: a snapshot gives it in its GPUs' "
                     "fabric_cluster_uuid and fabric_clique_id (nvidia-smi -q's Fabric ClusterUUID and CliqueId; "
                     "gputopo's NVML probe does not fill them yet)")
    sizes = [min(len(b.nodes) for b in blocks)]
    notes.append(f"BlockSizes= is the base block size in nodes: the smallest block ({sizes[0]})")
    return BlockTopology(blocks, sizes, notes)
