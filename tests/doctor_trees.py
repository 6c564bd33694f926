"""Fake sysfs/procfs trees for `gputopo doctor`, built from values in real captures.

The tree shapes (which bridge sits above which GPU) are the builder's; every value placed in them
is read from a real capture in tests/fixtures/doctor/ (SOURCES.md): ACS control words from the
`ACSCtl:` lines and link speeds/widths from the `LnkCap:`/`LnkSta:` lines (parsed with gputopo's
own paste reader and checked against EXPECTED.json there), kernel command lines byte for byte.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from gputopo.analysis.causes.doctor_report import DoctorReport
from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.host.pcie_health import LinkState

DOCTOR_FIXTURES = Path(__file__).resolve().parent / "fixtures" / "doctor"


def capture(name: str) -> str:
    return (DOCTOR_FIXTURES / name).read_text()


def real_acs_controls() -> dict[str, int]:
    """Real ACS control words: 'on' (AMD Starship root port 40:01.1, ReqRedir+ CmpltRedir+ ...),
    'switch-on' (a PLX downstream port line of nccl#629), 'off' (nccl#606's setpci 0000)."""
    starship = parse_pasted(capture("lspci_vvv_amd_starship_root_port_acs_on.txt")).acs[0].control
    plx = parse_pasted(capture("lspci_acsctl_grep_plx_nccl629.txt")).acs
    setpci = parse_pasted(capture("setpci_acs_script_all_off_nccl606.txt")).acs
    return {"on": starship, "switch-on": plx[2].control, "switch-off": plx[0].control, "off": setpci[0].control}


def real_links() -> dict[str, LinkState]:
    """Real links: 'gpu-x8' (RTX 3090 at 2.5GT/s x8 of 16GT/s x16), 'bridge-x8' (a root port at
    2.5GT/s x8 of 16GT/s x16), 'full' (the RTX 3090's LnkCap as both current and max: a link at its
    best), 'idle' (the RTX 3090's speed drop alone, full width)."""
    gpu = parse_pasted(capture("lspci_lnk_rtx3090_gen1_x8_root_ports.txt")).links[0].link
    bridge = parse_pasted(capture("lspci_vvv_root_port_lnksta_downgraded_x8.txt")).links[0].link
    full = LinkState(gpu.max_speed_gts, gpu.max_speed_gts, gpu.max_width, gpu.max_width)
    idle = LinkState(gpu.current_speed_gts, gpu.max_speed_gts, gpu.max_width, gpu.max_width)
    return {"gpu-x8": gpu, "bridge-x8": bridge, "full": full, "idle": idle}


def config_bytes(acs_control: int | None, root_readable: bool = True) -> bytes:
    """A config space: 4096 bytes as root reads it (256 otherwise), with an AER capability at 0x100
    chaining to ACS at 0x2a0 (where the AMD bridges of the captures have it: `[2a0 v1] Access
    Control Services`), its control word at +6; no ACS capability where ``acs_control`` is None."""
    data = bytearray(4096)
    data[0:2] = (0x1022).to_bytes(2, "little")
    acs_at = 0x2A0
    next_cap = acs_at if acs_control is not None else 0
    data[0x100:0x104] = (0x0001 | 1 << 16 | next_cap << 20).to_bytes(4, "little")  # AER v1 -> ACS
    if acs_control is not None:
        data[acs_at:acs_at + 4] = (0x000D | 1 << 16).to_bytes(4, "little")
        data[acs_at + 4:acs_at + 6] = (0x005F).to_bytes(2, "little")  # capability (not read by doctor)
        data[acs_at + 6:acs_at + 8] = acs_control.to_bytes(2, "little")
    return bytes(data if root_readable else data[:256])


def _speed_text(gts: float | None) -> str:
    return "Unknown" if gts is None else f"{gts:.1f} GT/s PCIe"


@dataclass
class FakeHost:
    root: Path

    def device(self, path: list[str], *, gpu: bool = False, link: LinkState | None = None,
               acs: int | None = None, root_readable: bool = True) -> str:
        """A PCI device at ``path`` (``["pci0000:40", "0000:40:01.1", "0000:41:00.0"]``) with its files
        and its ``sys/bus/pci/devices`` link (relative, as the kernel makes it)."""
        folder = self.root / "sys" / "devices" / Path(*path)
        folder.mkdir(parents=True, exist_ok=True)
        bdf = path[-1]
        (folder / "vendor").write_text("0x10de\n" if gpu else "0x1022\n")
        (folder / "class").write_text("0x030200\n" if gpu else "0x060400\n")
        link = link or real_links()["full"]
        (folder / "current_link_speed").write_text(_speed_text(link.current_speed_gts) + "\n")
        (folder / "max_link_speed").write_text(_speed_text(link.max_speed_gts) + "\n")
        (folder / "current_link_width").write_text(f"{link.current_width}\n")
        (folder / "max_link_width").write_text(f"{link.max_width}\n")
        (folder / "config").write_bytes(config_bytes(None if gpu else acs, root_readable))
        devices = self.root / "sys" / "bus" / "pci" / "devices"
        devices.mkdir(parents=True, exist_ok=True)
        if not (devices / bdf).is_symlink():
            os.symlink(os.path.join("..", "..", "..", "devices", *path), devices / bdf)
        return bdf

    def iommu_group(self, group: int, kind: str, bdfs: list[str]) -> None:
        folder = self.root / "sys" / "kernel" / "iommu_groups" / str(group)
        (folder / "devices").mkdir(parents=True, exist_ok=True)
        (folder / "type").write_text(kind + "\n")
        for bdf in bdfs:
            os.symlink(os.path.join("..", "..", "..", "..", "bus", "pci", "devices", bdf), folder / "devices" / bdf)

    def proc(self, name: str, text: str) -> None:
        path = self.root / "proc" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def two_gpus_under_root_ports(root: Path, acs: int, root_readable: bool = True,
                              gpu_link: LinkState | None = None, bridge_link: LinkState | None = None) -> FakeHost:
    """GPUs 0000:41:00.0 and 0000:61:00.0 (where NVIDIA/nccl#2079's GPUs were) each below its own root
    port, 0000:40:01.1 and 0000:60:01.1, both with ACS control ``acs``."""
    host = FakeHost(root)
    for bus in ("40", "60"):
        port = f"0000:{bus}:01.1"
        host.device([f"pci0000:{bus}", port], acs=acs, root_readable=root_readable, link=bridge_link)
        gpu_bus = f"{int(bus, 16) + 1:02x}"
        host.device([f"pci0000:{bus}", port, f"0000:{gpu_bus}:00.0"], gpu=True, link=gpu_link)
    return host


def two_gpus_under_switch(root: Path, port_acs: dict[str, int], root_acs: int) -> FakeHost:
    """A PLX PEX 8747 switch (its addresses as NVIDIA/nccl#19 lists them: upstream 03:00.0, downstream
    04:08.0 and 04:10.0) below root port 0000:00:02.0, one GPU below each downstream port."""
    host = FakeHost(root)
    host.device(["pci0000:00", "0000:00:02.0"], acs=root_acs)
    host.device(["pci0000:00", "0000:00:02.0", "0000:03:00.0"], acs=None)
    for port, gpu in (("0000:04:08.0", "0000:05:00.0"), ("0000:04:10.0", "0000:06:00.0")):
        host.device(["pci0000:00", "0000:00:02.0", "0000:03:00.0", port], acs=port_acs[port])
        host.device(["pci0000:00", "0000:00:02.0", "0000:03:00.0", port, gpu], gpu=True)
    return host


THREE_GPU_BDFS = ("0000:41:00.0", "0000:61:00.0", "0000:81:00.0")


def three_gpu_report() -> DoctorReport:
    """An empty doctor report that knows three GPUs (``THREE_GPU_BDFS``, indices 0-2)."""
    report = DoctorReport(source="test")
    report.gpus = {bdf: index for index, bdf in enumerate(THREE_GPU_BDFS)}
    return report
