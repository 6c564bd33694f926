"""What doctor's paste readers found (``gputopo.sources.evidence.pasted_health`` and the readers per kind:
``pasted_lspci``, ``pasted_kernel``, ``pasted_smi``): plain data, every value as read, never a
judgement (that is ``gputopo.analysis.causes.doctor`` and the cause modules beside it)."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.sources.evidence.pasted_facts import PastedFacts
from gputopo.sources.host.pcie_health import LinkState

MAX_SHOWN_CHARS = 300  # a line kept as evidence is cut here (a paste can hold anything)
MAX_CMDLINE_CHARS = 4096  # the kernel's own limit on x86 is 2048 (COMMAND_LINE_SIZE); parsed whole
BDF = r"(?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"


def shown(line: str) -> str:
    """A line as kept for evidence: stripped and bounded."""
    line = line.strip()
    return line if len(line) <= MAX_SHOWN_CHARS else line[:MAX_SHOWN_CHARS - 3] + "..."


def full_bdf(text: str) -> str:
    """``40:01.1`` -> ``0000:40:01.1`` (lower case)."""
    text = text.lower()
    return text if text.count(":") == 2 else f"0000:{text}"


@dataclass
class PastedAcs:
    bdf: str | None  # None: the paste does not say which device
    control: int
    line: int
    text: str


@dataclass
class PastedLink:
    bdf: str | None
    link: LinkState
    line: int
    text: str
    # lspci's own marks after LnkSta's speed and width, against the device's LnkCap: "ok", "downgraded",
    # or None (not printed: older pciutils). They judge a link whose LnkCap line the paste lacks.
    speed_mark: str | None = None
    width_mark: str | None = None
    # The kernel's boot-time line: the link (at this bridge) that limits the device, None for lspci's.
    limited_at: str | None = None

    @property
    def narrow(self) -> bool:
        """Trained narrower than it can: by LnkCap where the paste has it, else by lspci's mark."""
        return self.link.width_below_max if self.link.max_width is not None else self.width_mark == "downgraded"

    @property
    def slow(self) -> bool:
        """Below its top speed: by LnkCap where the paste has it, else by lspci's mark."""
        return self.link.speed_below_max if self.link.max_speed_gts is not None else self.speed_mark == "downgraded"


@dataclass
class PastedXid:
    pci: str | None  # as the driver prints it: ``0000:02:00`` (no function); None where the paste hides it (``PCI:...``)
    code: int
    text: str
    cause: int | None = None  # ``caused by previous Xid 149``: the Xid the driver names as the cause
    # The NVLink unit and link the line names (``145, RLW_RXPIPE Nonfatal XC0 i0 Link 11``; Xid 137's ``RLW_RXPIPE
    # interrupt hit on link 11``), and whether the driver calls the error ``Fatal`` or ``Nonfatal``; None where it says none.
    unit: str | None = None
    link: int | None = None
    fatal: bool | None = None


@dataclass
class PastedAer:
    """One ``PCIe Bus Error`` the kernel's AER driver logged for ``bdf`` (the device that reported it)."""

    bdf: str
    driver: str  # the driver bound to it (``pcieport``: a bridge port; ``nvidia``: an NVIDIA GPU)
    severity: str  # "corrected", "uncorrected (fatal)" or "uncorrected (non-fatal)"
    layer: str  # "Physical Layer", "Data Link Layer", "Transaction Layer"
    line: int
    text: str

    @property
    def corrected(self) -> bool:
        return self.severity == "corrected"


@dataclass
class PastedFabric:
    """An ``nvidia-smi -q`` Fabric section: its fields as printed (``State``, ``Status``, and under
    ``Health``: ``Summary``, ``Bandwidth`` ...); ``gpu``: the ``GPU 00000000:xx:yy.z`` block it is
    in, where the paste shows that line."""

    gpu: str | None
    line: int
    fields: dict[str, str] = field(default_factory=dict)


@dataclass
class PastedEvidence:
    """What one pasted file says; ``kinds`` names what was recognised in it."""

    kinds: list[str] = field(default_factory=list)
    kernel_release: str | None = None  # dmesg's ``Linux version 4.15.0-112-generic``: what a fix may use
    acs: list[PastedAcs] = field(default_factory=list)
    links: list[PastedLink] = field(default_factory=list)
    links_down: list[PastedLink] = field(default_factory=list)  # ``Width x0``: no link trained (an empty slot)
    # ``CESta:`` lines with link-layer error bits set (``BadTLP+``...): (device or None, the bits, line, text)
    link_errors_logged: list[tuple[str | None, list[str], int, str]] = field(default_factory=list)
    iommu_faults: dict[str, int] = field(default_factory=dict)  # bdf -> count
    iommu_fault_example: str | None = None
    xids: list[PastedXid] = field(default_factory=list)
    fallen_off_bus: list[str] = field(default_factory=list)
    aer: list[PastedAer] = field(default_factory=list)
    not_recovered: dict[str, str] = field(default_factory=dict)  # bdf -> the line: the device could not recover
    cmdline: str | None = None
    default_domain: tuple[str, str] | None = None  # ("translated" | "passthrough", the dmesg line)
    iommu_active: str | None = None  # a dmesg line showing an IOMMU at work (DMAR enabled, devices in groups)
    # `nvidia-smi nvlink -s` lines (line number, text; a GPU line numbered 0), for ``sources.smi.nvlink`` to read
    nvlink_status: list[tuple[int, str]] = field(default_factory=list)
    nvlink_names: dict[int, str] = field(default_factory=dict)  # gpu -> its name on the `GPU N: name` line
    nvlink_errors: dict[int, dict[int, dict[str, int]]] = field(default_factory=dict)  # gpu -> link -> counter -> n
    fabric: list[PastedFabric] = field(default_factory=list)
    # lspci -vvv's bridges: bdf -> (secondary, subordinate) bus numbers (``Bus: primary=19, secondary=1a,
    # subordinate=1a``): the buses below it; their PCIe port type (``Downstream Port``, ``Root Port`` ...);
    # and the NVIDIA display / 3D controllers the headers name (GPUs, by bus id).
    bus_ranges: dict[str, tuple[int, int]] = field(default_factory=dict)
    port_types: dict[str, str] = field(default_factory=dict)
    nvidia_gpus: list[str] = field(default_factory=list)
    facts: PastedFacts = field(default_factory=PastedFacts)  # what the readers of issue 31 found

    def add_kind(self, kind: str) -> None:
        if kind not in self.kinds:
            self.kinds.append(kind)
