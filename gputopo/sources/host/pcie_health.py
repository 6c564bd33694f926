"""Each GPU's PCIe path to its root port, and what every device on it says about P2P health.

Read from a root folder or a ``Tree`` (default ``/``; tests build a fake tree; ``doctor --from`` a
``gather`` archive held in memory, or a folder), as pure functions of it:

- ``sys/bus/pci/devices/<bdf>`` links into ``sys/devices/pci<domain>:<bus>/<root port>/.../<bdf>``:
  the bridges between a device and its host bridge. Every path is resolved *inside the root only*
  (``sources/host/tree.py``: each link on the way, the files read included, looked up in the tree; an
  absolute target starts at the root; a ``..`` above it is never followed), and only regular files
  are read, so a tree packed from another host (or a hostile one) can never make us read this
  host's files or block on a FIFO.
- ``<device>/config``: the PCI configuration space. Its extended part (offset 0x100 on) holds the
  ACS capability (extended capability ID 0x000D; its control register at +6: bit 0 SrcValid,
  1 TransBlk, 2 ReqRedir, 3 CmpltRedir, 4 UpstreamFwd, 5 EgressCtrl, 6 DirectTrans). Linux gives
  the extended part to root only: a 256-byte ``config`` means "not root", and the check is not made.
- ``current_link_speed`` / ``max_link_speed`` (``8.0 GT/s PCIe``, older kernels ``8 GT/s``) and
  ``current_link_width`` / ``max_link_width`` on the GPU and on every bridge.

Anything missing or unreadable gives ``None`` (not known), never an error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.notation import ascii_int
from gputopo.sources.host.tree import Root, Tree, as_tree

PCI_DEVICES = "sys/bus/pci/devices"
ACS_EXT_CAP_ID = 0x000D
ACS_CONTROL_OFFSET = 6
CONFIG_BASIC_BYTES = 256  # what a non-root reader gets of config space
EXT_CAP_START = 0x100
MAX_CONFIG_BYTES = 4096
NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASSES = ("0x0300", "0x0302")  # VGA controller, 3D controller
BRIDGE_CLASS = "0x0604"
MAX_PCI_DEPTH = 16  # devices between a host bridge and a GPU: real machines have a handful
ACS_BITS = ("SrcValid", "TransBlk", "ReqRedir", "CmpltRedir", "UpstreamFwd", "EgressCtrl", "DirectTrans")
# The bits that send peer requests/completions up to the root complex, or block them (PCIe base spec,
# ACS control): P2P Request Redirect, P2P Completion Redirect, P2P Egress Control. Not SrcValid (it checks
# bus numbers), TransBlk (it blocks requests already translated by ATS only), UpstreamFwd (it forwards
# what reaches the port from below upward, the path redirected traffic takes) or DirectTrans (a relief).
ACS_REDIRECT_MASK = 0b0101100  # ReqRedir, CmpltRedir, EgressCtrl

_BDF = re.compile(r"^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$")
_SPEED = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*GT/s")


@dataclass
class LinkState:
    """A PCIe link as sysfs shows it; ``None`` where a file is missing or says ``Unknown``."""

    current_speed_gts: float | None = None
    max_speed_gts: float | None = None
    current_width: int | None = None
    max_width: int | None = None

    @property
    def width_below_max(self) -> bool:
        return None not in (self.current_width, self.max_width) and self.current_width < self.max_width  # type: ignore[operator]

    @property
    def speed_below_max(self) -> bool:
        return (None not in (self.current_speed_gts, self.max_speed_gts)
                and self.current_speed_gts < self.max_speed_gts)  # type: ignore[operator]


@dataclass
class AcsState:
    """The ACS capability of one device: ``control`` is the 16-bit control word; ``status`` says
    ``"read"``, ``"absent"`` (no ACS capability: nothing to redirect), ``"not-root"`` (only the
    first 256 bytes of config space were readable) or ``"unreadable"``."""

    status: str
    control: int | None = None

    @property
    def redirects(self) -> bool:
        return self.control is not None and bool(self.control & ACS_REDIRECT_MASK)

    def words(self) -> str:
        """lspci's way: ``SrcValid+ TransBlk- ReqRedir+ ...``."""
        if self.control is None:
            return self.status
        return " ".join(f"{name}{'+' if self.control >> bit & 1 else '-'}" for bit, name in enumerate(ACS_BITS))


@dataclass
class PciNode:
    """One device on a GPU's path: its address, where it was read, and its health."""

    bdf: str
    sysfs_path: str  # the path read, as on the host (``/sys/bus/pci/devices/0000:02:08.0``)
    is_bridge: bool
    link: LinkState = field(default_factory=LinkState)
    acs: AcsState = field(default_factory=lambda: AcsState("unreadable"))


@dataclass
class GpuPciePath:
    """A GPU and the bridges above it, root port first (the GPU itself last)."""

    bdf: str
    host_bridge: str | None
    nodes: list[PciNode]

    @property
    def bridges(self) -> list[PciNode]:
        return self.nodes[:-1]

    @property
    def gpu(self) -> PciNode:
        return self.nodes[-1]


def _read(tree: Tree, rel: str) -> str | None:
    data = tree.read_bytes(rel, 4096)
    return None if data is None else data.decode("ascii", "replace").strip()


def resolve_inside(root: Root, relative: str) -> str | None:
    """``relative`` (a path under ``root``) with every symbolic link followed inside the root only
    (``Tree.resolve``): the resolved path relative to the root ("sys/devices/..."), or None for a
    loop, a missing part, a climb above the root or too many links."""
    parts = as_tree(root).resolve(relative)
    return None if parts is None else "/".join(parts)


def nvidia_gpus(root: Root = "/") -> list[str]:
    """The NVIDIA display/3D controllers sysfs lists (vendor 0x10de, class 0x0300xx/0x0302xx)."""
    tree = as_tree(root)
    gpus = []
    for name in tree.listdir(PCI_DEVICES) or []:
        if not _BDF.match(name):
            continue
        vendor = _read(tree, f"{PCI_DEVICES}/{name}/vendor")
        klass = _read(tree, f"{PCI_DEVICES}/{name}/class") or ""
        if vendor == NVIDIA_VENDOR and klass[:6] in DISPLAY_CLASSES:
            gpus.append(name)
    return gpus


def link_state(tree: Tree, device_dir: str) -> LinkState:
    """The link files of one device folder (a path inside ``tree``)."""
    return LinkState(
        current_speed_gts=_speed(_read(tree, f"{device_dir}/current_link_speed")),
        max_speed_gts=_speed(_read(tree, f"{device_dir}/max_link_speed")),
        current_width=_width(_read(tree, f"{device_dir}/current_link_width")),
        max_width=_width(_read(tree, f"{device_dir}/max_link_width")),
    )


def _speed(text: str | None) -> float | None:
    match = _SPEED.match(text or "")
    return float(match.group(1)) if match else None


def _width(text: str | None) -> int | None:
    text = (text or "").lstrip("x")
    width = ascii_int(text, 2)
    return width if width is not None and 0 < width <= 64 else None


def acs_from_config(config: bytes | None) -> AcsState:
    """The ACS capability from the bytes of a ``config`` file (see the module docstring)."""
    if config is None:
        return AcsState("unreadable")
    if len(config) <= CONFIG_BASIC_BYTES:
        return AcsState("not-root")
    offset, seen = EXT_CAP_START, set()
    while EXT_CAP_START <= offset <= len(config) - 8 and offset not in seen and offset % 4 == 0:
        seen.add(offset)
        header = int.from_bytes(config[offset:offset + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == ACS_EXT_CAP_ID:
            control = int.from_bytes(config[offset + ACS_CONTROL_OFFSET:offset + ACS_CONTROL_OFFSET + 2], "little")
            return AcsState("read", control)
        offset = header >> 20
    return AcsState("absent")


def pci_node(root: Root, resolved: str, bdf: str) -> PciNode:
    """One device's link and ACS state, read from its resolved sysfs folder."""
    tree = as_tree(root)
    klass = _read(tree, f"{resolved}/class") or ""
    return PciNode(bdf=bdf, sysfs_path=f"/{PCI_DEVICES}/{bdf}", is_bridge=klass.startswith(BRIDGE_CLASS),
                   link=link_state(tree, resolved), acs=acs_from_config(tree.read_bytes(f"{resolved}/config", MAX_CONFIG_BYTES)))


def gpu_pcie_path(bdf: str, root: Root = "/") -> GpuPciePath | None:
    """The GPU at ``bdf`` and every PCI device above it, root port first; None where sysfs does
    not place it (no such device, a link that leaves the tree)."""
    root = as_tree(root)
    resolved = resolve_inside(root, f"{PCI_DEVICES}/{bdf}")
    if resolved is None:
        return None
    parts = resolved.split("/")
    starts = [k for k, part in enumerate(parts) if part.startswith("pci") and ":" in part]
    if not starts or parts[-1] != bdf:
        return None
    if sum(1 for part in parts[starts[0] + 1:] if _BDF.match(part)) > MAX_PCI_DEPTH:
        return None  # deeper than any real machine: a crafted tree (each level is read from the root)
    host_bridge = parts[starts[0]]
    nodes = []
    for k in range(starts[0] + 1, len(parts)):
        if _BDF.match(parts[k]):
            nodes.append(pci_node(root, "/".join(parts[:k + 1]), parts[k]))
    return GpuPciePath(bdf=bdf, host_bridge=host_bridge, nodes=nodes) if nodes else None


def gpu_pcie_paths(bdfs: list[str], root: Root = "/") -> dict[str, GpuPciePath | None]:
    """``gpu_pcie_path`` for each GPU."""
    tree = as_tree(root)
    return {bdf: gpu_pcie_path(bdf, tree) for bdf in bdfs}
