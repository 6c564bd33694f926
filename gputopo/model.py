"""The one data model every source produces and every command consumes.

A ``Topology`` is plain data: GPUs, NICs, the link between every pair of GPUs (and between GPUs
and NICs), where it all came from, and the findings made about it. It round-trips exactly through
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

import dataclasses
import functools
import json
import math
import re
import types
import typing
from dataclasses import dataclass, field
from typing import Any, Iterator

from gputopo.notation import expand_number_list

SCHEMA = "gputopo.topology/1"

# PCIe path words, best (shortest path) first. "SOC" is the pre-2017 nvidia-smi word for SYS.
PCIE_PATHS = ("PIX", "PXB", "PHB", "NODE", "SYS")
PCIE_PATH_MEANING = {
    "PIX": "at most one PCIe bridge between them (same PCIe switch)",
    "PXB": "several PCIe bridges between them, without the CPU's host bridge",
    "PHB": "through a PCIe host bridge (the CPU)",
    "NODE": "across PCIe host bridges within one NUMA node",
    "SYS": "across the interconnect between CPU sockets / NUMA nodes (QPI/UPI)",
}
NVLINK_MEANING = "a bonded set of {n} NVLinks"

# nvmlGpuP2PStatus_t values and the words nvidia-smi topo -p2p prints for them.
P2P_OK = "ok"
P2P_STATUS_WORDS = {0: "ok", 1: "CNS", 2: "GNS", 3: "TNS", 4: "DR", 5: "NS", 6: "U"}
P2P_STATUS_MEANING = {
    "ok": "supported",
    "CNS": "chipset not supported (the PCIe root complex/chipset does not allow peer traffic)",
    "GNS": "GPU not supported (this GPU model or its mode does not allow peer access)",
    "TNS": "topology not supported (e.g. the GPUs sit under different CPU sockets / IOH)",
    "DR": "disabled by registry key / driver setting",
    "NS": "not supported",
    "U": "unknown (the driver could not tell)",
}

SEVERITIES = ("info", "warning", "error")

_NV_RE = re.compile(r"^NV(\d{1,3})$")
# The most NVLinks one pair of GPUs has (B200: 18); more is a typo or a damaged file.
MAX_NVLINKS_PER_PAIR = 64
_BUS_ID_RE = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{4,8}):)?(?P<bus>[0-9a-fA-F]{2}):(?P<dev>[0-9a-fA-F]{2})\.(?P<fn>[0-7])$"
)


def normalize_pci_bus_id(bus_id: str | None) -> str | None:
    """Return a PCI bus id as ``dddd:bb:dd.f`` in lower case (NVML prints 8 domain digits, TF 4).

    ``None`` or an unparseable id gives ``None``.
    """
    if bus_id is None:
        return None
    text = bus_id.strip().rstrip("\x00")
    match = _BUS_ID_RE.match(text)
    if not match:
        return None
    domain = int(match.group("domain") or "0", 16)
    return (
        f"{domain:04x}:{int(match.group('bus'), 16):02x}:"
        f"{int(match.group('dev'), 16):02x}.{match.group('fn')}"
    )


def nvlink_count_of(link_type: str) -> int:
    """``"NV4"`` -> 4; any PCIe word -> 0."""
    match = _NV_RE.match(link_type)
    return int(match.group(1)) if match else 0


def is_known_link_type(link_type: str) -> bool:
    """A PCIe path word, or ``NV<n>`` with 1 <= n <= ``MAX_NVLINKS_PER_PAIR``."""
    return link_type in PCIE_PATHS or 1 <= nvlink_count_of(link_type) <= MAX_NVLINKS_PER_PAIR


@dataclass
class Gpu:
    """One GPU as the driver numbers it (NVML / nvidia-smi index, which is PCI bus order)."""

    index: int
    name: str | None = None
    uuid: str | None = None
    pci_bus_id: str | None = None  # normalised dddd:bb:dd.f
    memory_total_bytes: int | None = None
    numa_node: int | None = None  # the one NUMA node the GPU hangs off, where there is one
    cpu_affinity: str | None = None  # cpulist, e.g. "0-11,24-35"
    # The whole NUMA affinity set as nvidia-smi prints it ("0,3-9,11-17" on Grace), as a node list.
    numa_affinity: str | None = None
    gpu_numa_id: int | None = None  # the GPU's own memory as a NUMA node (Grace: 2, 10, 18, 26)
    socket: int | None = None  # CPU socket (physical package) where the source knows it
    pcie_gen_current: int | None = None
    pcie_gen_max: int | None = None
    pcie_width_current: int | None = None
    pcie_width_max: int | None = None
    nvlink_version: str | None = None  # "2.0", "3.0", "4.0" (the NVLink generation as a version)
    nvlink_active_links: int | None = None
    mig_mode: bool | None = None
    compute_capability: str | None = None  # "8.0"
    host: str | None = None  # set for multi-host topologies

    @property
    def numa_nodes(self) -> set[int] | None:
        """The NUMA nodes the GPU is affine to (its affinity set, else its one node); None if unknown."""
        if self.numa_affinity:
            try:
                return set(expand_number_list(self.numa_affinity))
            except ValueError:
                return None
        return None if self.numa_node is None else {self.numa_node}

    def pcie_below_max(self, field: str) -> tuple[int, int] | None:
        """``(current, max)`` where the PCIe ``field`` ("width" or "gen") runs below its maximum, else None."""
        current, maximum = getattr(self, f"pcie_{field}_current"), getattr(self, f"pcie_{field}_max")
        if current is not None and maximum is not None and current < maximum:
            return current, maximum
        return None


@dataclass
class Nic:
    """A network adapter shown in the topology (``mlx5_0``, ``NIC0``)."""

    name: str
    device: str | None = None  # the real device name where a legend maps NICn -> mlx5_n
    pci_bus_id: str | None = None
    numa_node: int | None = None
    cpu_affinity: str | None = None


@dataclass
class Measurement:
    """Copy bandwidth measured by ``bench-p2p`` for one pair of GPUs."""

    a_to_b_gbps: float | None = None
    b_to_a_gbps: float | None = None
    bidirectional_gbps: float | None = None
    latency_us: float | None = None
    via_host_gbps: float | None = None
    device_kind: str = "GPU"  # "GPU" or "CPU" (logical CPU devices measure host memory)
    size_bytes: int | None = None
    repeats: int | None = None


@dataclass
class Link:
    """How two GPUs ``a < b`` are connected, and what peer-to-peer (P2P) access they allow."""

    a: int
    b: int
    type: str  # nvidia-smi word: NV<n>, PIX, PXB, PHB, NODE, SYS
    nvlink_count: int = 0
    # The NVLinks go through NVSwitch (all-to-all fabric); None where the source cannot tell
    # (nvidia-smi text of a few GPUs with NV18 to each other).
    nvswitch: bool | None = False
    pcie_path: str | None = None  # the PCIe path word even where NVLink exists (NVML knows both)
    p2p_read: str | None = None  # "ok" or a P2P status word (CNS, GNS, TNS, DR, NS, U); None: unknown
    p2p_write: str | None = None
    p2p_atomics: str | None = None
    p2p_nvlink: str | None = None
    measured: Measurement | None = None

    @property
    def is_nvlink(self) -> bool:
        return self.nvlink_count > 0

    @property
    def can_peer(self) -> bool | None:
        """Whether P2P reads and writes are supported; ``None`` where the source did not say."""
        known = [word for word in (self.p2p_read, self.p2p_write) if word is not None]
        if not known:
            return None
        return all(word == P2P_OK for word in known)


@dataclass
class NicLink:
    """How a GPU reaches a NIC (PCIe path word)."""

    gpu: int
    nic: str
    type: str


@dataclass
class Finding:
    """A plain-language diagnostic about the topology."""

    severity: str  # "info", "warning", "error"
    code: str  # stable slug, e.g. "cross-socket"
    message: str
    gpus: list[int] = field(default_factory=list)
    fix: str | None = None


@dataclass
class TfDevice:
    """A GPU as TensorFlow numbers it (its ordinal follows CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER)."""

    ordinal: int
    name: str | None = None
    pci_bus_id: str | None = None
    memory_mb: int | None = None
    compute_capability: str | None = None
    nvml_index: int | None = None  # the NVML GPU it was joined to by PCI bus id, when known
    tf_id: int | None = None  # TensorFlow's own number (/device:GPU:k) where the log prints it
    ignored: str | None = None  # why TensorFlow does not use this GPU (e.g. its compute capability)


@dataclass
class TfView:
    """TensorFlow's own view of the GPUs, read from its device-initialisation log."""

    devices: list[TfDevice] = field(default_factory=list)
    # peer[i][j]: can TF ordinal i access ordinal j directly? None where the log does not say.
    peer: list[list[bool | None]] = field(default_factory=list)
    era: str | None = None  # which log format was read, e.g. "tf0-gpu-init", "tf2-created-device"
    source: str | None = None  # the log file ("-" for standard input)
    visible_ordinals: list[int] | None = None  # "Adding visible gpu devices: ..."
    # What the log reader could not read (cut lines, missing matrix rows), reported as findings.
    notes: list[Finding] = field(default_factory=list)
    # True: the true entries of ``peer`` off the diagonal are inferred, not printed (TF 0.x-1.4 log
    # only the pairs that cannot peer, and this log names every GPU on both sides of those lines).
    peer_inferred: bool = False
    enable_failed: list[list[int]] = field(default_factory=list)  # [i, j]: TF could not enable peer access i->j
    # Ordinals named in CUDA_ERROR_TOO_MANY_PEERS lines (a GPU maps at most 8 peers); None: no such line.
    too_many_peers: list[int] | None = None
    startups: int = 1  # how many TensorFlow start-ups the log holds
    startup: int = 1  # which of them (from 1) this view reads


@dataclass
class Topology:
    """GPUs, NICs and the links between them on one host (or several, with ``Gpu.host``)."""

    gpus: list[Gpu] = field(default_factory=list)
    links: list[Link] = field(default_factory=list)
    nics: list[Nic] = field(default_factory=list)
    nic_links: list[NicLink] = field(default_factory=list)
    diagnostics: list[Finding] = field(default_factory=list)
    source: str = "unknown"  # "nvml", "nvidia-smi", "tf-log", "snapshot", "reference"
    source_detail: str | None = None  # file path, machine name, ...
    label: str | None = None  # human title, e.g. "DGX-1 (8x V100 SXM2) — reference machine"
    is_reference: bool = False  # built from public facts, not measured on this host
    host: str | None = None
    driver_version: str | None = None
    cuda_driver_version: str | None = None
    nvml_version: str | None = None
    socket_interconnect: str | None = None  # e.g. "UPI", "QPI", "Infinity Fabric", "X-Bus"
    # NUMA distances as the kernel reports them: {"0": {"0": 10, "1": 32}, ...}; None when unknown.
    numa_distances: dict[str, dict[str, int]] | None = None
    tf: TfView | None = None
    schema: str = SCHEMA

    # --- lookups -------------------------------------------------------------------------------

    @property
    def gpu_indices(self) -> list[int]:
        return [g.index for g in self.gpus]

    def gpu(self, index: int) -> Gpu:
        for g in self.gpus:
            if g.index == index:
                return g
        raise KeyError(f"no GPU {index}")

    def link(self, a: int, b: int) -> Link:
        """The link between GPUs ``a`` and ``b`` in either order."""
        if a == b:
            raise KeyError(f"GPU {a} has no link to itself")
        lo, hi = (a, b) if a < b else (b, a)
        for link in self.links:
            if link.a == lo and link.b == hi:
                return link
        raise KeyError(f"no link between GPU {a} and GPU {b}")

    def link_map(self) -> dict[tuple[int, int], Link]:
        """``{(a, b): link}`` with both orders as keys, for fast repeated lookups."""
        result: dict[tuple[int, int], Link] = {}
        for link in self.links:
            result[(link.a, link.b)] = link
            result[(link.b, link.a)] = link
        return result

    def numa_distance(self, a: int, b: int) -> int | None:
        """The kernel's distance from NUMA node ``a`` to ``b`` (10 = local), None where not known."""
        row = (self.numa_distances or {}).get(str(a)) or {}
        return row.get(str(b))

    def pairs(self) -> Iterator[tuple[int, int]]:
        idx = self.gpu_indices
        for i, a in enumerate(idx):
            for b in idx[i + 1 :]:
                yield a, b

    def add_finding(self, finding: Finding) -> None:
        """Add a finding unless one with the same code and GPUs is already there."""
        for existing in self.diagnostics:
            if existing.code == finding.code and existing.gpus == finding.gpus:
                return
        self.diagnostics.append(finding)

    # --- JSON ----------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        # Put the schema and provenance first for people reading the JSON.
        ordered = {"schema": data.pop("schema"), "source": data.pop("source")}
        ordered.update(data)
        return ordered

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Topology:
        """Build a Topology from ``to_dict`` output; raises ``ValueError`` on a wrong shape."""
        if not isinstance(data, dict):
            raise ValueError("a topology snapshot must be a JSON object")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise ValueError(f"schema: unsupported snapshot schema {_shown(schema)} (expected {SCHEMA!r})")
        try:
            topo = _build(cls, data)
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"malformed topology snapshot: {exc}") from None
        topo.validate()
        return topo

    def validate(self) -> None:
        """Check internal consistency; raises ``ValueError`` naming the first field that is wrong
        (``gpus[3].index: duplicate GPU index 2``)."""
        known: set[int] = set()
        for k, gpu in enumerate(self.gpus):
            if gpu.index < 0:
                raise ValueError(f"gpus[{k}].index: GPU indices are not negative, got {gpu.index}")
            if gpu.index in known:
                raise ValueError(f"gpus[{k}].index: duplicate GPU index {gpu.index}")
            known.add(gpu.index)
        seen: set[tuple[int, int]] = set()
        for k, link in enumerate(self.links):
            for end in ("a", "b"):
                if getattr(link, end) not in known:
                    raise ValueError(f"links[{k}].{end}: GPU {getattr(link, end)} is not in gpus")
            if link.a >= link.b:
                raise ValueError(f"links[{k}]: link {link.a}-{link.b} must have a < b")
            if (link.a, link.b) in seen:
                raise ValueError(f"links[{k}]: link {link.a}-{link.b} is listed twice")
            seen.add((link.a, link.b))
            if not is_known_link_type(link.type) and link.type != "UNKNOWN":
                raise ValueError(f"links[{k}].type: unknown link type {link.type[:40]!r}")
        for k, finding in enumerate(self.diagnostics):
            if finding.severity not in SEVERITIES:
                raise ValueError(f"diagnostics[{k}].severity: unknown severity {finding.severity[:40]!r} "
                                 f"(finding {finding.code[:40]!r})")


def make_link(a: int, b: int, link_type: str, **kwargs: Any) -> Link:
    """A ``Link`` with ``a < b`` and ``nvlink_count`` derived from an ``NV<n>`` type word."""
    lo, hi = (a, b) if a < b else (b, a)
    kwargs.setdefault("nvlink_count", nvlink_count_of(link_type))
    return Link(a=lo, b=hi, type=link_type, **kwargs)


# --- dict -> dataclass ---------------------------------------------------------------------------


def _build(cls: type, data: Any, path: str = "") -> Any:
    """A ``cls`` from JSON ``data``; a wrong field is a ``ValueError`` naming it (``gpus[3].index``)."""
    if not isinstance(data, dict):
        raise ValueError(f"{path or 'the snapshot'}: must be an object, got {_shown(data)}")
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            kwargs[f.name] = _value(data[f.name], _field_types(cls)[f.name], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{where}: missing")
    return cls(**kwargs)


def _value(value: Any, hint: Any, where: str) -> Any:
    """A JSON ``value`` as the annotation ``hint`` wants it (nested dataclasses built), else a
    ``ValueError`` naming ``where``. NaN, Infinity and 1e400 (read as infinity) are no figures, and
    integers are 64-bit."""
    expected, origin = hint, typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in typing.get_args(hint):
            return None
        (hint,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]  # our unions: X | None
        origin = typing.get_origin(hint)
    if origin is list and isinstance(value, list):
        return [_value(v, typing.get_args(hint)[0], f"{where}[{k}]") for k, v in enumerate(value)]
    if origin is dict and isinstance(value, dict):
        return {k: _value(v, typing.get_args(hint)[1], f"{where}.{k}") for k, v in value.items()}
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)  # type: ignore[arg-type]
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int and is_number and isinstance(value, int) and not -(2**63) <= value < 2**63:
        raise ValueError(f"{where}: {_shown(value)} is out of range")
    if (
        (hint is float and is_number and math.isfinite(value))
        or (hint is int and is_number and isinstance(value, int))
        or (hint in (str, bool) and isinstance(value, hint))
    ):
        return value
    raise ValueError(f"{where}: must be {_type_text(expected)}, got {_shown(value)}")


def _shown(value: Any) -> str:
    """A JSON value cut short for a one-line message."""
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


@functools.lru_cache(maxsize=None)
def _field_types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _type_text(hint: Any) -> str:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(arg) for arg in args)
    if origin is list:
        return "a list" + (f" of {args[0].__name__}" if dataclasses.is_dataclass(args[0]) else "")
    words = {int: "an integer", float: "a finite number", str: "a string", bool: "true or false", type(None): "null"}
    return words.get(hint, "an object")
