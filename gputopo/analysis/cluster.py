"""Several hosts together: what each host is in a few words, and where they do not match.

Synchronous multi-host training goes at the pace of the slowest host, so hosts that differ in GPU
model or count, driver or CUDA version, or in how their GPUs are wired, are worth knowing about
before a run; so are hosts whose GPUs have no NIC near them (no GPUDirect RDMA). Codes of the
cluster findings (each host keeps its own findings too):

=============================  ===================================================================
``cluster-gpu-count``          the hosts have different numbers of GPUs
``cluster-gpu-model``          the hosts have different GPU models
``cluster-driver``             different NVIDIA driver versions
``cluster-cuda``               different CUDA driver versions
``cluster-link-shape``         the GPUs are wired differently (link words, NUMA nodes)
``cluster-no-nic``             a host shows no NIC at all
``cluster-nic-far``            every GPU of a host reaches its nearest NIC only through SYS
``cluster-nic-paths-unknown``  a host shows NICs but not how its GPUs reach them
=============================  ===================================================================
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Callable

from gputopo.analysis import with_findings
from gputopo.analysis.causes.finding_kinds import with_kinds
from gputopo.analysis.place.nics import FAR_PATH, nearest_nics, nic_label
from gputopo.model import PCIE_PATHS, Finding, Topology, nvlink_count_of
from gputopo.model.cluster import Cluster
from gputopo.notation import count_word, gpus_word


@dataclass
class HostSummary:
    """One host in a few words, for the side-by-side table."""

    host: str
    gpus: str  # "8x NVIDIA H100 80GB HBM3", "8 GPUs (model not shown)"
    versions: str  # "535.104.05 / CUDA 12.2", "?" (the source does not say)
    links: str  # "NV18 all-to-all", "PCIe (PIX/SYS), 2 NUMA nodes"
    nics: str  # "NIC0 (mlx5_10) PXB: GPU 0; ...", "none"


def gpu_models(topology: Topology) -> str:
    """``8x NVIDIA H100 80GB HBM3`` (several models: each with its count), or the count alone."""
    if not topology.gpus:
        return "no GPUs"
    names = Counter(gpu.name for gpu in topology.gpus)
    if None in names:
        return f"{count_word(len(topology.gpus), 'GPU')} (model ?)"
    return ", ".join(f"{count}x {name}" for name, count in sorted(names.items()))


def versions(topology: Topology) -> str:
    driver, cuda = topology.driver_version, topology.cuda_driver_version
    if driver is None and cuda is None:
        return "?"
    return f"{driver or '?'} / CUDA {cuda or '?'}"


def _numa_count(topology: Topology) -> int:
    return len({gpu.numa_node for gpu in topology.gpus if gpu.numa_node is not None})


def link_shape(topology: Topology) -> str:
    """How the GPUs are wired, in a few words: ``NV18 all-to-all``, ``NVLink NV1/NV2 on 16 of 28
    pairs, else SYS``, ``PCIe (PIX/SYS)``; with ``, 2 NUMA nodes`` where the GPUs sit on several."""
    n = len(topology.gpus)
    if n < 2:
        return "one GPU" if n == 1 else "no GPUs"
    words = Counter(link.type for link in topology.links)
    nvlink = {w: c for w, c in words.items() if nvlink_count_of(w) > 0}
    pcie = sorted((w for w in words if w not in nvlink), key=lambda w: PCIE_PATHS.index(w) if w in PCIE_PATHS else 99)
    pairs = n * (n - 1) // 2
    if len(nvlink) == 1 and sum(nvlink.values()) == pairs:
        shape = f"{next(iter(nvlink))} all-to-all"
    elif nvlink:
        shape = (f"NVLink {'/'.join(sorted(nvlink, key=nvlink_count_of))} on {sum(nvlink.values())} of {pairs} pairs"
                 + (f", else {'/'.join(pcie)}" if pcie else ""))
    else:
        shape = f"PCIe ({'/'.join(pcie)})" if pcie else "links ?"
    numa = _numa_count(topology)
    return shape + (f", {numa} NUMA nodes" if numa > 1 else "")


def _shape_signature(topology: Topology) -> tuple[object, ...]:
    """The GPU count and how many pairs have each link word (NUMA nodes are left out: text without
    a NUMA Affinity column does not show them)."""
    return len(topology.gpus), tuple(sorted(Counter(link.type for link in topology.links).items()))


def nic_summary(topology: Topology) -> str:
    """Which NICs are nearest which GPUs: ``mlx5_0 PIX: GPUs 2,3; mlx5_1 ...``, or why none."""
    if not topology.nics:
        return "none shown"
    nearest = nearest_nics(topology)
    if all(entry.path is None for entry in nearest):
        return f"{count_word(len(topology.nics), 'NIC')}, paths to the GPUs ?"
    own = [entry.nics[0].name for entry in nearest if len(entry.nics) == 1]
    paths = {entry.path for entry in nearest}
    if len(own) == len(nearest) > 1 and len(set(own)) == len(own) and len(paths) == 1:
        return f"one NIC per GPU at {paths.pop()} ({nic_label(nearest[0].nics[0])} ... {nic_label(nearest[-1].nics[0])})"
    by_nic: dict[tuple[str, str], list[int]] = {}
    for entry in nearest:
        for nic in entry.nics:
            by_nic.setdefault((nic_label(nic), entry.path or "?"), []).append(entry.gpu)
    return "; ".join(f"{label} {path}: {gpus_word(gpus)}" for (label, path), gpus in by_nic.items())


def host_summary(topology: Topology, name: str) -> HostSummary:
    return HostSummary(host=name, gpus=gpu_models(topology), versions=versions(topology),
                       links=link_shape(topology), nics=nic_summary(topology))


def _mismatch(cluster: Cluster, value: Callable[[Topology], object], shown: Callable[[Topology], str],
              code: str, what: str, fix: str) -> list[Finding]:
    """One warning when ``value`` differs between the hosts that show it (None: not shown)."""
    groups: dict[str, tuple[list[str], str]] = {}
    for name, topology in zip(cluster.host_names, cluster.hosts):
        if value(topology) is not None:
            groups.setdefault(repr(value(topology)), ([], shown(topology)))[0].append(name)
    if len(groups) <= 1:
        return []
    listing = "; ".join(f"{', '.join(names)}: {text}" for names, text in groups.values())
    return [Finding("warning", code, f"the hosts have different {what} ({listing})", fix=fix)]


def _nic_findings(name: str, topology: Topology) -> list[Finding]:
    if not topology.gpus:
        return []
    if not topology.nics:
        return [Finding("warning", "cluster-no-nic", f"{name} shows no NIC: traffic between hosts may go over a slow "
                        "network or the source leaves NICs out", fix="save the snapshot on the host through NVML "
                        "(`gputopo scan --save`), which reads the RDMA NICs from sysfs")]
    nearest = nearest_nics(topology)
    if all(entry.path is None for entry in nearest):
        return [Finding("info", "cluster-nic-paths-unknown",
                        f"{name} shows {count_word(len(topology.nics), 'NIC')} but not how its GPUs reach them")]
    if all(entry.path in (None, FAR_PATH) for entry in nearest):
        return [Finding("warning", "cluster-nic-far",
                        f"every GPU on {name} reaches its nearest NIC only through SYS (across NUMA nodes): "
                        "GPUDirect RDMA is lost and traffic between hosts is staged through host memory",
                        fix="check the PCIe slots of the NICs, or that the NICs are shown")]
    return []


def cluster_findings(cluster: Cluster) -> list[Finding]:
    """The findings about the hosts together (mismatches, NICs), in a stable order."""
    same = "synchronous training goes at the pace of the slowest host; train on hosts of one kind"
    findings = _mismatch(cluster, lambda t: len(t.gpus), lambda t: count_word(len(t.gpus), "GPU"),
                         "cluster-gpu-count", "GPU counts", same)
    findings += _mismatch(
        cluster, lambda t: None if any(g.name is None for g in t.gpus) else sorted(Counter(g.name for g in t.gpus)),
        gpu_models, "cluster-gpu-model", "GPU models", same)
    findings += _mismatch(cluster, lambda t: t.driver_version, lambda t: str(t.driver_version), "cluster-driver",
                          "NVIDIA driver versions", "install one driver version on every host (NCCL and CUDA behave alike then)")
    findings += _mismatch(cluster, lambda t: t.cuda_driver_version, lambda t: str(t.cuda_driver_version),
                          "cluster-cuda", "CUDA driver versions", "install one driver version on every host")
    findings += _mismatch(cluster, _shape_signature, link_shape, "cluster-link-shape", "GPU wiring",
                          "the same GPU group can be slower on some hosts; `gputopo recommend` with every --from "
                          "warns for the hosts whose group differs")
    for name, topology in zip(cluster.host_names, cluster.hosts):
        findings += _nic_findings(name, topology)
    return findings


def cluster_with_findings(topologies: list[Topology]) -> Cluster:
    """The hosts, each with its own findings (made where missing), and the findings about them together."""
    cluster = Cluster(hosts=[with_findings(t) for t in topologies])
    cluster.diagnostics = with_kinds(cluster_findings(cluster))
    return cluster
