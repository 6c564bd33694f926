"""``gputopo gather``: the files doctor and scan read, packed into one archive to attach to a ticket
(the idea of hwloc's ``hwloc-gather-topology``). Paths inside are the host's (``sys/...``,
``proc/...``), so ``gputopo doctor --from box.tar.gz`` reads it as if it were that host's ``/``.

What is packed (and nothing else: no environment beyond the variables named, no serial numbers):
- every PCI device folder under ``sys/devices/pci*`` (the link, ACS and identity files only) and the
  ``sys/bus/pci/devices`` links; ``sys/kernel/iommu_groups`` (types and member links);
- CPU sockets, NUMA nodes and distances; RDMA NICs (``sys/class/infiniband`` links);
- ``sys/class/dmi/id/{sys_vendor,product_name}``; ``proc/cmdline``, ``proc/modules``, the
  ``/dev/shm`` line of ``proc/mounts``, the first ``flags`` line of ``proc/cpuinfo``,
  ``proc/driver/nvidia/gpus`` (names), the ``/dev/nvidiaN`` names (as empty files), container marks;
- ``gputopo/env`` (``NCCL_*``, ``CUDA_VISIBLE_DEVICES``, ``CUDA_DEVICE_ORDER`` only);
- ``gputopo/nvidia-smi/*.txt``: ``topo -m``, ``topo -p2p r``, ``nvlink -s``, ``-q`` where nvidia-smi
  exists, each with a timeout (the child and its children killed with it).

Links are recorded as links, never followed; a link whose target would leave the packed tree is
left out. Files are read through the same confined view as ``doctor --from`` reads them
(``sources/host/tree.py``: regular files only, never a FIFO or device, paths resolved inside the root).
Bounded: at most ``MAX_FILES`` files, ``MAX_FILE_BYTES`` each, ``MAX_TOTAL_BYTES`` in all. An
nvidia-smi command that timed out or failed is named in ``gputopo/smi-failures``, so
``doctor --from`` says which outputs are missing and why.
"""

from __future__ import annotations

import io
import os
import posixpath
import re
import shutil
import signal
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass, field
from typing import Mapping

from gputopo.errors import Terminated
from gputopo.sources.archives.archive import GATHER_MARK, SMI_FAILURES
from gputopo.sources.host.host_health import SHM_SIZE_FILE, relevant_env
from gputopo.sources.host.tree import FolderTree

MAX_FILES = 20_000
MAX_FILE_BYTES = 1 << 20
MAX_TOTAL_BYTES = 32 << 20
SMI_TIMEOUT_S = 20.0
PCI_FILES = ("class", "vendor", "device", "subsystem_vendor", "subsystem_device", "current_link_speed",
             "current_link_width", "max_link_speed", "max_link_width", "config", "numa_node", "local_cpulist")
SMI_COMMANDS = {"topo-m": ["topo", "-m"], "topo-p2p-r": ["topo", "-p2p", "r"], "nvlink-s": ["nvlink", "-s"],
                "q": ["-q"]}
_PCI_NAME = re.compile(r"^(pci[0-9a-f]{4}:[0-9a-f]{2}|[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7])$")


@dataclass
class Packer:
    """Adds files and links under a root to a tar, within the bounds; counts what it left out."""

    root: str
    tar: tarfile.TarFile
    files: int = 0
    total_bytes: int = 0
    skipped: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tree = FolderTree(self.root)

    def add_bytes(self, name: str, data: bytes) -> None:
        if self.files >= MAX_FILES or self.total_bytes + len(data) > MAX_TOTAL_BYTES:
            self.skipped.append(f"{name} (bounds)")
            return
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), 0o644, int(time.time())
        self.tar.addfile(info, io.BytesIO(data))
        self.files += 1
        self.total_bytes += len(data)

    def add_dir(self, rel: str) -> None:
        """A folder as a folder, so an empty one (no IOMMU groups) still says it exists."""
        if not self.tree.is_folder(rel) or self.files >= MAX_FILES:
            return
        info = tarfile.TarInfo(rel)
        info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o755, int(time.time())
        self.tar.addfile(info)
        self.files += 1

    def add_file(self, rel: str, filter_text=None, read_from: str | None = None) -> None:
        """``rel`` (read from ``read_from`` where given: ``proc/mounts`` is a link to
        ``self/mounts``), filtered by ``filter_text``; a link is recorded as a link."""
        if read_from is None and self.tree.is_link(rel):
            self.add_link(rel)
            return
        source = read_from or rel
        if self.tree.why_unresolved(source) == "outside":
            self.skipped.append(f"{rel} (reached through a link out of the tree)")
            return
        data = self.tree.read_bytes(source, MAX_FILE_BYTES)
        if data is None:  # missing, unreadable, or no regular file (a FIFO or device is never opened)
            return
        if filter_text is not None:
            data = filter_text(data.decode("utf-8", "replace")).encode()
        self.add_bytes(rel, data)

    def add_link(self, rel: str) -> None:
        target = self.tree.read_link(rel)
        if target is None:
            return
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            self.skipped.append(f"{rel} (link out of the tree)")
            return
        info = tarfile.TarInfo(rel)
        info.type, info.linkname, info.mode = tarfile.SYMTYPE, target, 0o777
        self.tar.addfile(info)
        self.files += 1

    def listdir(self, rel: str) -> list[str]:
        names = self.tree.listdir(rel)
        if names is None and self.tree.why_unresolved(rel) == "outside":
            self.skipped.append(f"{rel} (reached through a link out of the tree)")
        return names or []


# Boot options doctor judges (IOMMU, ACS, PCIe, NUMA, the NVIDIA and vfio drivers); the rest of the
# command line can hold anything (tokens, paths, credentials for network boot) and stays home.
_BOOT_OPTION_RE = re.compile(r"(?:iommu|intel_iommu|amd_iommu|pci|pcie_\w+|numa|nvidia\w*|nouveau\w*|vfio\w*"
                             r"|modprobe\.blacklist|rd\.driver\.blacklist|mem_encrypt|isolcpus|hugepages|default_hugepagesz)"
                             r"(?:\.[\w.]+)?")


def kept_boot_options(cmdline: str) -> str:
    """``/proc/cmdline`` with only the options doctor reads, and how many others were left out."""
    words = cmdline.split()
    kept = [w for w in words if _BOOT_OPTION_RE.fullmatch(w.split("=", 1)[0])]
    left = len(words) - len(kept)
    return " ".join(kept) + (f" gputopo.left_out={left}" if left else "") + "\n"


def _pack_pci(packer: Packer) -> None:
    for bdf in packer.listdir("sys/bus/pci/devices"):
        packer.add_link(f"sys/bus/pci/devices/{bdf}")
    for top in packer.listdir("sys/devices"):
        if _PCI_NAME.match(top):
            _pack_pci_tree(packer, f"sys/devices/{top}")


def _pack_pci_tree(packer: Packer, rel: str) -> None:
    stack = [rel]
    while stack:
        folder = stack.pop()
        for name in packer.listdir(folder):
            child = f"{folder}/{name}"
            if packer.tree.is_link(child):
                if name == "iommu_group":
                    packer.add_link(child)
                continue
            if name in PCI_FILES:
                packer.add_file(child)
            elif _PCI_NAME.match(name) and packer.tree.is_folder(child):
                stack.append(child)


def _pack_host(packer: Packer) -> None:
    packer.add_dir("sys/kernel/iommu_groups")  # present and empty: no IOMMU; absent: not known
    for group in packer.listdir("sys/kernel/iommu_groups"):
        packer.add_file(f"sys/kernel/iommu_groups/{group}/type")
        for bdf in packer.listdir(f"sys/kernel/iommu_groups/{group}/devices"):
            packer.add_link(f"sys/kernel/iommu_groups/{group}/devices/{bdf}")
    for cpu in packer.listdir("sys/devices/system/cpu"):
        if re.fullmatch(r"cpu[0-9]+", cpu):
            packer.add_file(f"sys/devices/system/cpu/{cpu}/topology/physical_package_id")
    packer.add_file("sys/devices/system/node/online")
    for node in packer.listdir("sys/devices/system/node"):
        if re.fullmatch(r"node[0-9]+", node):
            packer.add_file(f"sys/devices/system/node/{node}/distance")
    for nic in packer.listdir("sys/class/infiniband"):
        packer.add_link(f"sys/class/infiniband/{nic}")
    for name in ("sys_vendor", "product_name"):
        packer.add_file(f"sys/class/dmi/id/{name}")
    packer.add_file("proc/cmdline", kept_boot_options)
    packer.add_file("proc/modules")
    packer.add_file("proc/mounts", lambda text: "".join(
        line + "\n" for line in text.splitlines() if len(line.split()) > 1 and line.split()[1] == "/dev/shm"),
        read_from="proc/self/mounts" if packer.tree.is_file("proc/self/mounts") else None)
    packer.add_file("proc/cpuinfo", lambda text: next(
        (line + "\n" for line in text.splitlines() if line.startswith("flags")), ""))
    if packer.tree.exists("sys/kernel/mm/memory_peers/nv_mem"):
        packer.add_bytes("sys/kernel/mm/memory_peers/nv_mem/.present", b"")
    for gpu in packer.listdir("proc/driver/nvidia/gpus"):
        packer.add_bytes(f"proc/driver/nvidia/gpus/{gpu}/.present", b"")
    for name in packer.listdir("dev"):
        if re.fullmatch(r"nvidia[0-9]+", name):
            packer.add_bytes(f"dev/{name}", b"")
    if packer.tree.is_live_host:  # the size statvfs gives, where the mount line has none
        try:
            stat = os.statvfs("/dev/shm")
            packer.add_bytes(SHM_SIZE_FILE, f"{stat.f_frsize * stat.f_blocks}\n".encode())
        except OSError:
            pass
    for marker in (".dockerenv", "run/.containerenv"):
        if packer.tree.exists(marker):
            packer.add_bytes(marker, b"")


def _terminated(signum: int, frame: object) -> None:
    raise Terminated("terminated (SIGTERM): nvidia-smi and its children were stopped, nothing was written")


def run_bounded(argv: list[str], timeout_s: float = SMI_TIMEOUT_S) -> bytes | None:
    """A command's standard output (bounded), or None (``run_recorded`` says why)."""
    return run_recorded(argv, timeout_s)[0]


def run_recorded(argv: list[str], timeout_s: float = SMI_TIMEOUT_S) -> tuple[bytes | None, str | None]:
    """A command's standard output (bounded) and None, or None and why there is none. On timeout,
    Ctrl-C or SIGTERM its whole process group is killed (it runs in its own session, so its
    children go too), and SIGTERM then ends gputopo with exit 143 (``Terminated``) instead of
    leaving them running."""
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    except OSError as exc:
        return None, f"could not be started ({exc.strerror or exc})"
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGTERM, _terminated) if main_thread else None
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        with_group_killed(proc)
        return None, f"timed out after {timeout_s:g} s and was stopped"
    except BaseException:
        with_group_killed(proc)
        raise
    finally:
        if main_thread:
            signal.signal(signal.SIGTERM, previous)
    if proc.returncode != 0:
        return None, f"exited with status {proc.returncode}"
    return out[:MAX_FILE_BYTES], None


def with_group_killed(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.wait()


def gather(output, root: str = "/", env: Mapping[str, str] | None = None, smi: str | None = "nvidia-smi") -> Packer:
    """Pack ``root``'s files (and nvidia-smi's outputs where ``smi`` is found) into the binary
    stream ``output`` as a gzip tar. Returns the packer (what was packed and left out)."""
    with tarfile.open(fileobj=output, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        packer = Packer(root, tar)
        from gputopo import __version__

        packer.add_bytes(GATHER_MARK, f"gputopo {__version__} gather\n".encode())
        _pack_pci(packer)
        _pack_host(packer)
        # One `name=value` line each: a value holding a line break would add lines of its own
        # (a setting doctor would then read from the archive), so such a variable is left out.
        variables = {k: v for k, v in relevant_env(env or {}).items() if not any(c in k + v for c in "\r\n")}
        packer.add_bytes("gputopo/env", "".join(f"{k}={v}\n" for k, v in variables.items()).encode())
        found = shutil.which(smi) if smi else None
        failures = []
        for name, args in SMI_COMMANDS.items() if found else ():
            data, why = run_recorded([found, *args], SMI_TIMEOUT_S)
            if data is not None:
                packer.add_bytes(f"gputopo/nvidia-smi/{name}.txt", data)
            else:
                failures.append(f"{name}: `nvidia-smi {' '.join(args)}` {why} when gathered\n")
        if failures:
            packer.add_bytes(SMI_FAILURES, "".join(failures).encode())
    return packer
