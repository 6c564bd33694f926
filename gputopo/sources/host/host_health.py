"""What the host says about P2P health outside the PCIe tree, read from a root folder (default ``/``)
or a ``Tree`` (a gathered archive or folder: every path resolved inside it, regular files only).

Pure functions of the root and of an environment passed in as a dict (never ``os.environ`` inside):

- ``sys/kernel/iommu_groups/<n>/type``: ``DMA`` / ``DMA-FQ`` (the IOMMU translates every DMA),
  ``identity`` (passthrough), ``blocked``; the folder missing means no IOMMU (or it is off).
  ``<n>/devices/<bdf>`` names the devices in each group.
- ``proc/cmdline``: the kernel's boot options (``iommu=pt``, ``intel_iommu=off``, ``pci=noacs``...).
- ``proc/modules``: loaded modules (``nvidia_peermem`` for GPUDirect RDMA);
  ``sys/kernel/mm/memory_peers/nv_mem``: the older ``nv_peer_mem`` module's mark.
- ``proc/mounts``: the ``/dev/shm`` tmpfs and its ``size=`` (Docker's default is 64 MB); on the live
  host (root ``/``) ``statvfs("/dev/shm")`` where the mount line has no size.
- ``proc/cpuinfo`` (the ``hypervisor`` CPU flag) and ``sys/class/dmi/id/{sys_vendor,product_name}``:
  a virtual machine, whose PCI topology is the hypervisor's.
- ``.dockerenv``, ``run/.containerenv``, ``proc/1/cgroup``: a container.
- ``proc/driver/nvidia/gpus/<bdf>`` (every GPU the driver has) against ``dev/nvidia<N>`` (the device
  nodes this container or cgroup shows).
- The environment: ``NCCL_*`` and ``CUDA_VISIBLE_DEVICES`` / ``CUDA_DEVICE_ORDER`` only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping

from gputopo.notation import ascii_int
from gputopo.sources.host.tree import Root, Tree, as_tree

IOMMU_GROUPS = "sys/kernel/iommu_groups"
SHM_SIZE_FILE = "gputopo/dev-shm-bytes"  # what `gather` recorded from statvfs on the host
MAX_READ = 1 << 20
ENV_PREFIXES = ("NCCL_",)
ENV_NAMES = ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")
VM_VENDORS = ("QEMU", "VMware", "Microsoft Corporation", "Xen", "innotek", "Amazon EC2", "Google", "OpenStack",
              "KVM", "Parallels", "Bochs", "Alibaba Cloud", "Oracle Corporation")
CONTAINER_CGROUP_WORDS = ("docker", "kubepods", "containerd", "lxc", "podman", "libpod")
_DEV_NVIDIA = re.compile(r"^nvidia([0-9]+)$")
_SIZE = re.compile(r"(?:^|,)size=([0-9]+)([kmgKMG%]?)")


@dataclass
class HostHealth:
    """Everything ``doctor`` reads about the host outside the PCIe tree; ``None`` = not known."""

    iommu_groups: dict[str, str] | None = None  # group -> type; {} where the folder exists but is empty
    iommu_group_of: dict[str, str] = field(default_factory=dict)  # bdf -> group
    cmdline: str | None = None
    kernel_release: str | None = None  # ``proc/sys/kernel/osrelease`` (the running kernel)
    modules: set[str] | None = None
    nv_mem_peer: bool = False
    shm_bytes: int | None = None
    shm_evidence: str | None = None
    hypervisor_flag: bool | None = None
    dmi_vendor: str | None = None
    dmi_product: str | None = None
    container: str | None = None  # what says so (".dockerenv", "/proc/1/cgroup: kubepods")
    driver_gpus: list[str] | None = None  # bus ids under /proc/driver/nvidia/gpus
    device_nodes: list[int] | None = None  # N of each /dev/nvidiaN
    env: dict[str, str] | None = field(default_factory=dict)  # None: the environment is not known (a folder without gputopo/env)

    @property
    def is_vm(self) -> bool | None:
        vendor_says = any(word.lower() in f"{self.dmi_vendor or ''} {self.dmi_product or ''}".lower() for word in VM_VENDORS)
        if self.hypervisor_flag or vendor_says:
            return True
        return None if self.hypervisor_flag is None and self.dmi_vendor is None else False


def _read(tree: Tree, rel: str, limit: int = MAX_READ) -> str | None:
    data = tree.read_bytes(rel, limit)
    return None if data is None else data.decode("utf-8", "replace")


def iommu_groups(root: Root = "/") -> tuple[dict[str, str] | None, dict[str, str]]:
    """``({group: type}, {bdf: group})``; ``(None, {})`` where the folder is missing (no IOMMU)."""
    tree = as_tree(root)
    names = tree.listdir(IOMMU_GROUPS)
    if names is None:
        return None, {}
    types: dict[str, str] = {}
    members: dict[str, str] = {}
    for group in sorted(names, key=lambda g: (len(g), g)):
        kind = (_read(tree, f"{IOMMU_GROUPS}/{group}/type", 64) or "").strip()
        if kind:
            types[group] = kind
        for bdf in tree.listdir(f"{IOMMU_GROUPS}/{group}/devices") or []:
            members[bdf] = group
    return types, members


def loaded_modules(root: Root = "/") -> set[str] | None:
    """Names of the loaded kernel modules (``/proc/modules``)."""
    text = _read(as_tree(root), "proc/modules")
    return None if text is None else {line.split()[0] for line in text.splitlines() if line.split()}


def shm_size(root: Root = "/") -> tuple[int | None, str | None]:
    """The size of ``/dev/shm`` in bytes and where it was read; None where not known."""
    tree = as_tree(root)
    mounts = _read(tree, "proc/mounts") or ""
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[1] == "/dev/shm":
            match = _SIZE.search(fields[3])
            if match and match.group(2) != "%":
                unit = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}[match.group(2).lower()]
                return int(match.group(1)) * unit, f"/proc/mounts: {fields[0]} on /dev/shm {fields[3]}"
    recorded = (_read(tree, SHM_SIZE_FILE, 64) or "").strip()
    if ascii_int(recorded, 20) is not None:
        return ascii_int(recorded, 20), "statvfs(/dev/shm), recorded by gputopo gather"
    if tree.is_live_host:
        try:
            stat = os.statvfs("/dev/shm")
        except OSError:
            return None, None
        return stat.f_frsize * stat.f_blocks, "statvfs(/dev/shm)"
    return None, None


def container_evidence(root: Root = "/") -> str | None:
    """What says this is a container, or None."""
    tree = as_tree(root)
    for marker in (".dockerenv", "run/.containerenv"):
        if tree.exists(marker):
            return f"/{marker} exists"
    cgroup = _read(tree, "proc/1/cgroup", 65536) or ""
    for word in CONTAINER_CGROUP_WORDS:
        if word in cgroup:
            return f"/proc/1/cgroup mentions {word}"
    return None


def driver_gpus(root: Root = "/") -> list[str] | None:
    """Bus ids of every GPU the NVIDIA driver has (``/proc/driver/nvidia/gpus``)."""
    return as_tree(root).listdir("proc/driver/nvidia/gpus")


def device_nodes(root: Root = "/") -> list[int] | None:
    """The ``/dev/nvidiaN`` nodes visible here."""
    names = as_tree(root).listdir("dev")
    if names is None:
        return None
    return sorted(int(m.group(1)) for m in map(_DEV_NVIDIA.match, names) if m)


def relevant_env(env: Mapping[str, str]) -> dict[str, str]:
    """Only the variables doctor judges (``NCCL_*``, ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER``)."""
    return {k: str(v) for k, v in sorted(env.items()) if k in ENV_NAMES or k.startswith(ENV_PREFIXES)}


def read_host_health(root: Root = "/", env: Mapping[str, str] | None = None) -> HostHealth:
    """Everything above, for one root and one environment."""
    tree = as_tree(root)
    groups, members = iommu_groups(tree)
    cmdline = _read(tree, "proc/cmdline", 65536)
    cpuinfo = _read(tree, "proc/cpuinfo")
    shm_bytes, shm_where = shm_size(tree)
    return HostHealth(
        iommu_groups=groups, iommu_group_of=members,
        cmdline=cmdline.strip() if cmdline is not None else None,
        kernel_release=(_read(tree, "proc/sys/kernel/osrelease", 128) or "").strip()[:80] or None,
        modules=loaded_modules(tree),
        nv_mem_peer=tree.exists("sys/kernel/mm/memory_peers/nv_mem"),
        shm_bytes=shm_bytes, shm_evidence=shm_where,
        hypervisor_flag=None if cpuinfo is None else bool(re.search(r"^flags\s*:.*\bhypervisor\b", cpuinfo, re.M)),
        dmi_vendor=(_read(tree, "sys/class/dmi/id/sys_vendor", 256) or "").strip() or None,
        dmi_product=(_read(tree, "sys/class/dmi/id/product_name", 256) or "").strip() or None,
        container=container_evidence(tree),
        driver_gpus=driver_gpus(tree), device_nodes=device_nodes(tree),
        env=None if env is None else relevant_env(env),
    )
