"""Multi-host plan files (``gputopo.cluster-plan/1``) built by hand for the launcher tests, with
exactly the keys ``gputopo recommend --from a.json --from b.json ... --save plan.json`` writes."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

# What two different snapshots give their host: a DGX-1 half (4 mlx5 NICs, NUMA node 0) and a
# PCIe box's other socket (one NIC, NUMA node 1).
DGX1_ENTRY = {"gpus": [0, 1, 2, 3], "numa_node": 0, "nics": ["mlx5_0", "mlx5_1"], "ifname": "ib0"}
PCIE_ENTRY = {"gpus": [4, 5, 6, 7], "numa_node": 1, "nics": ["mlx5_3"], "ifname": "ens1f0"}


def host_entry(
    host: str, task_index: int, workers: list[str], gpus: list[int], numa_node: int | None = None,
    nics: list[str] | None = None, ifname: str = "ib0", warnings: list[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    visible = ",".join(str(g) for g in gpus)
    nics = nics or []
    env = {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": visible, "NCCL_SOCKET_IFNAME": ifname}
    if nics:
        env["NCCL_IB_HCA"] = "=" + ",".join(nics)
    return {
        "host": host,
        "task_index": task_index,
        "gpus": list(gpus),
        "cuda_visible_devices": visible,
        "numactl": [] if numa_node is None else ["numactl", f"--cpunodebind={numa_node}", f"--membind={numa_node}"],
        "nics": [{"name": nic, "netdev": None, "path": "PIX", "gpus": list(gpus)} for nic in nics],
        "env": env,
        "tf_config": {"cluster": {"worker": list(workers)}, "task": {"type": "worker", "index": task_index}},
        "warnings": list(warnings or []),
    }


def cluster_plan(hosts: list[str], port: int = 12345, entries: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A plan with one entry per item of ``hosts`` (a host named twice runs two tasks), each with
    the GPUs and NICs of another snapshot (``DGX1_ENTRY``, ``PCIE_ENTRY`` in turn)."""
    kinds = entries or [DGX1_ENTRY, PCIE_ENTRY]
    seen: dict[str, int] = {}
    workers = []
    for host in hosts:
        workers.append(f"{host}:{port + seen.get(host, 0)}")
        seen[host] = seen.get(host, 0) + 1
    plan_hosts = [host_entry(host, i, workers, **kinds[i % len(kinds)]) for i, host in enumerate(hosts)]
    per_host = len(plan_hosts[0]["gpus"])
    return {"schema": "gputopo.cluster-plan/1", "gpus": per_host * len(hosts), "gpus_per_host": per_host,
            "hosts": plan_hosts}  # fmt: skip


def write_plan(path: Path, plan: dict[str, Any]) -> str:
    path.write_text(json.dumps(plan, indent=2), encoding="utf-8")
    return str(path)


def slurm_env(node: str, procid: int, localid: int, nodelist: str = "node[1-2]", tasks_per_node: str = "1(x2)",
              tasks: int = 2) -> dict[str, str]:  # fmt: skip
    return {"SLURM_PROCID": str(procid), "SLURM_LOCALID": str(localid), "SLURMD_NODENAME": node,
            "SLURM_STEP_NUM_TASKS": str(tasks), "SLURM_STEP_NODELIST": nodelist,
            "SLURM_STEP_TASKS_PER_NODE": tasks_per_node}  # fmt: skip


def free_ports(count: int) -> list[int]:
    """``count`` loopback ports free now, for the workers of a local multi-worker run."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
