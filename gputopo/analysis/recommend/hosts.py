"""A multi-host plan: the same GPU group on every host, one worker per host, and per host the
environment that makes TensorFlow's collective runtime (MultiWorkerMirroredStrategy over NCCL) use
those GPUs, the CPUs next to them and the NICs nearest them.

Pure: topologies in (one per host, each naming its host), a ``ClusterPlan`` out, whose JSON
(``gputopo.cluster-plan/1``) is what ``gputopo train --plan`` reads on each host:

- ``gpus`` / ``cuda_visible_devices``: the best group of ``gpus_per_host`` GPUs on that host
  (``recommend``), numbered as CUDA numbers them with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``;
- ``numactl``: the command prefix binding CPUs and memory to the group's NUMA node (``[]``: none);
- ``nics``: for each NIC the chosen GPUs use, the path word and those GPUs (PIX/PXB keep GPUDirect
  RDMA; SYS loses it, and is warned about);
- ``env``: ``CUDA_DEVICE_ORDER``, ``CUDA_VISIBLE_DEVICES``, ``NCCL_IB_HCA`` in NCCL's exact-match
  form (``=mlx5_0,mlx5_1``: a plain ``mlx5_1`` would also match ``mlx5_10``) where the RDMA names
  are known, ``NCCL_SOCKET_IFNAME`` (exact match, ``=ib0``) where the network interfaces are known;
- ``tf_config``: the worker list ``host:port`` in the order the hosts were given; worker 0 is the
  chief (it writes checkpoints and summaries).
"""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from gputopo.analysis.place.nics import FAR_PATH, NEAR_PATHS, NearestNics, nearest_nics
from gputopo.analysis.recommend import GroupAdvice, recommend
from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.model.cluster_plan import DEFAULT_PORT, NCCL_NAME_LIST_RE, PLAN_SCHEMA, ClusterPlan, HostPlan, NicUse

__all__ = ["DEFAULT_PORT", "PLAN_SCHEMA", "ClusterPlan", "HostPlan", "NicUse", "check_split", "plan_host", "plan_hosts"]
from gputopo.notation import count_word, gpus_word
from gputopo.numbering import cuda_env, host_cuda_numbers

def check_split(host_names: Sequence[str], gpu_counts: Sequence[int], gpus: int, gpus_per_host: int | None) -> int:
    """The GPUs per host for ``gpus`` in all over these hosts; a one-line InputError where the ask
    cannot give every host the same group."""
    hosts = len(host_names)
    if hosts < 2:
        raise InputError("a multi-host plan needs two or more hosts (one --from per host)")
    if len(set(host_names)) != hosts:
        twice = next(name for name, n in Counter(host_names).items() if n > 1)
        raise InputError(f"host {twice} is given twice: one snapshot per host")
    if gpus < 1:
        raise InputError(f"--gpus must be at least 1 (got {gpus})")
    if gpus_per_host is None:
        if gpus % hosts:
            raise InputError(f"--gpus {gpus} does not split evenly over {hosts} hosts: give a multiple of {hosts} "
                             "(one worker per host, the same number of GPUs on each)")
        gpus_per_host = gpus // hosts
    elif gpus_per_host * hosts != gpus:
        raise InputError(f"--gpus-per-host {gpus_per_host} x {hosts} hosts is {gpus_per_host * hosts}, not --gpus {gpus}")
    if gpus_per_host < 1:
        raise InputError(f"--gpus-per-host must be at least 1 (got {gpus_per_host})")
    if len(set(gpu_counts)) > 1 and gpus_per_host > min(gpu_counts):
        counts = ", ".join(f"{name}: {count}" for name, count in zip(host_names, gpu_counts))
        raise InputError(f"the hosts have different GPU counts ({counts}): {gpus_per_host} GPUs per host "
                         "cannot be the same group on every host")
    short = next(((name, count) for name, count in zip(host_names, gpu_counts) if count < gpus_per_host), None)
    if short is not None:
        raise InputError(f"{short[0]} has {count_word(short[1], 'GPU')}, fewer than the {gpus_per_host} per host asked for")
    return gpus_per_host


def group_shape(group: GroupAdvice) -> str:
    """``8x NV18, one NUMA node``: the ring's hops and where the group sits, to compare hosts."""
    hops = Counter(hop.label or hop.link_type for hop in group.hops)
    ring = ", ".join(f"{count}x {label}" for label, count in sorted(hops.items())) or "one GPU"
    unplaced = f" and {gpus_word(group.numa_unknown_gpus)} not placed" if group.numa_unknown_gpus else ""
    return f"{ring}, {count_word(group.numa_domains, 'NUMA node')}{unplaced}"


def _nic_uses(nearest: list[NearestNics]) -> list[NicUse]:
    uses: dict[tuple[str, str], NicUse] = {}
    for entry in nearest:
        for nic in entry.nics:
            name = nic.rdma_name or nic.name
            use = uses.setdefault((name, entry.path or "?"), NicUse(name, nic.netdev, entry.path or "?", []))
            use.gpus.append(entry.gpu)
    return list(uses.values())


def _nic_warnings(topology: Topology, nearest: list[NearestNics]) -> list[str]:
    if not topology.nics:
        return ["no NIC is shown for this host: NCCL_IB_HCA is not set (NCCL picks a network itself)"]
    if all(entry.path is None for entry in nearest):
        return ["the source shows NICs but not how the GPUs reach them: NCCL_IB_HCA is not set"]
    warnings = []
    far = [e.gpu for e in nearest if e.path == FAR_PATH]
    if far:
        warnings.append(f"{gpus_word(far)} reach their nearest NIC only through SYS (across NUMA nodes): "
                        "GPUDirect RDMA is lost there and messages are staged through host memory")
    middle = [e.gpu for e in nearest if e.path is not None and e.path not in NEAR_PATHS and e.path != FAR_PATH]
    if middle:
        warnings.append(f"{gpus_word(middle)} reach their nearest NIC through the CPU's host bridge (PHB/NODE): "
                        "NCCL may not use GPUDirect RDMA there (NCCL_NET_GDR_LEVEL)")
    unnamed = list(dict.fromkeys(n.name for e in nearest for n in e.nics if n.rdma_name is None))
    if unnamed:
        warnings.append(f"the RDMA names of {', '.join(unnamed)} are not shown (no NIC Legend in the text): "
                        "NCCL_IB_HCA is not set")
    return warnings


def _nccl_env(nearest: list[NearestNics]) -> tuple[dict[str, str], list[str]]:
    """NCCL_IB_HCA and NCCL_SOCKET_IFNAME for the chosen GPUs' NICs, and notes where one is left out."""
    nics = list({id(n): n for e in nearest for n in e.nics}.values())
    env: dict[str, str] = {}
    notes = []
    rdma = list(dict.fromkeys(n.rdma_name for n in nics))
    if nics and None not in rdma:
        env["NCCL_IB_HCA"] = "=" + ",".join(str(name) for name in rdma)
    netdevs = list(dict.fromkeys(n.netdev for n in nics))
    if nics and None not in netdevs:
        env["NCCL_SOCKET_IFNAME"] = "=" + ",".join(str(name) for name in netdevs)
    elif nics:
        notes.append("NCCL_SOCKET_IFNAME is not set: the snapshot does not name the NICs' network interfaces "
                     "(a snapshot saved on the host through NVML does); NCCL picks an interface itself")
    for key in [k for k, v in env.items() if not NCCL_NAME_LIST_RE.fullmatch(v)]:
        # A NIC name from a snapshot that is no device name ('^lo', '=eth0'): it would change what
        # NCCL's list selects, so the variable is left out and said.
        notes.append(f"{key} is not set: a NIC name in the snapshot is not a device name ({env.pop(key)[:60]!r})")
    return env, notes


def plan_host(topology: Topology, task_index: int, gpus_per_host: int, workers: list[str]) -> HostPlan:
    """One host's part: the best group there, its CUDA/numactl/NCCL environment and its TF_CONFIG."""
    group = recommend(topology, gpus_per_host, alternatives=0).best
    numbers = host_cuda_numbers(topology, group.gpus, "the plan's")
    env = cuda_env(sorted(numbers))
    nearest = nearest_nics(topology, group.gpus)
    nccl, notes = _nccl_env(nearest)
    env.update(nccl)
    return HostPlan(
        host=str(topology.host),
        task_index=task_index,
        gpus=list(group.gpus),
        cuda_visible_devices=env["CUDA_VISIBLE_DEVICES"],
        numactl=group.numactl.split() if group.numactl else [],
        nics=_nic_uses(nearest),
        env=env,
        tf_config={"cluster": {"worker": list(workers)}, "task": {"type": "worker", "index": task_index}},
        warnings=_nic_warnings(topology, nearest) + notes,
        shape=group_shape(group),
        host_gpus=len(topology.gpus),
    )


def plan_hosts(topologies: Sequence[Topology], gpus: int, gpus_per_host: int | None = None,
               port: int = DEFAULT_PORT) -> ClusterPlan:
    """The plan for ``gpus`` GPUs over these hosts (each topology names its host), in their order."""
    names = [str(t.host) for t in topologies]
    if any(t.host is None for t in topologies):
        raise InputError("every host of a multi-host plan must be named (`gputopo scan --host NAME --save`)")
    if not 1 <= port <= 65535:
        raise InputError(f"--port must be a TCP port from 1 to 65535 (got {port})")
    per_host = check_split(names, [len(t.gpus) for t in topologies], gpus, gpus_per_host)
    workers = [f"{name}:{port}" for name in names]
    hosts = [plan_host(t, k, per_host, workers) for k, t in enumerate(topologies)]
    first = hosts[0]
    for plan in hosts[1:]:
        if plan.shape != first.shape:
            plan.warnings.append(f"its best {per_host}-GPU group ({plan.shape}) differs from {first.host}'s "
                                 f"({first.shape}): every step waits for the slowest host")
    reason = (f"the best {count_word(per_host, 'GPU')} on each of the {len(hosts)} hosts ({first.shape} on "
              f"{first.host}), one worker per host; worker 0 ({first.host}) is the chief")
    return ClusterPlan(gpus=gpus, gpus_per_host=per_host, hosts=hosts, reason=reason, port=port)
