"""What the paste readers added for issue 31 found (``pasted_env``, ``pasted_setpci``,
``pasted_cuda``, ``pasted_nccl_warn``, ``pasted_smi_lines``, ``pasted_host_lines``): plain data,
every value as read, never a judgement (``gputopo.analysis.doctor_paste_*`` judge it). It rides on
``PastedEvidence.facts``; ACS words read from ``setpci`` go to ``PastedEvidence.acs`` with the rest."""

from __future__ import annotations

from dataclasses import dataclass, field

MAX_FACTS = 4096  # the most entries of one kind kept from a paste (a paste can hold anything)


@dataclass
class Said:
    """A line of the paste: its number and its text (stripped and bounded)."""

    line: int
    text: str


@dataclass
class EnvSetting(Said):
    name: str = ""
    value: str = ""  # as written, quotes removed, surrounding blanks removed


@dataclass
class DockerRun(Said):
    shm_option: str | None = None  # what gives the container its /dev/shm (``--shm-size=1g``, ``--ipc=host``)
    shm_bytes: int | None = None  # the size ``--shm-size`` asks for, where it gives one


@dataclass
class CudaError(Said):
    code: int = 0  # 802 (system not ready), 217 (peer access unsupported), 704 (peer access already enabled)


@dataclass
class PeerAnswer(Said):
    """A pair's answer to ``cudaDeviceCanAccessPeer`` as a program printed it (simpleP2P, kmcuda)."""

    a: int = 0
    b: int = 0
    can: bool = False
    names: tuple[str, str] | None = None  # the models simpleP2P prints beside the ordinals


@dataclass
class ShmFailure(Said):
    size: int | None = None  # the segment NCCL could not create, in bytes, where the line says
    sigbus: bool = False  # a SIGBUS inside NCCL's shared-memory code (the line: its frame): /dev/shm could not back it


@dataclass
class SmiRow(Said):
    """One GPU's row of ``nvidia-smi --query-gpu=... --format=csv`` (or of nvtop's header)."""

    index: int | None = None
    bus_id: str | None = None
    name: str | None = None
    pstate: str | None = None
    gen: int | None = None
    gen_max: int | None = None
    width: int | None = None
    width_max: int | None = None
    source: str = "nvidia-smi --query-gpu"


@dataclass
class FabricVersions(Said):
    """Fabric Manager refusing to start: the driver interface it was built for and the loaded driver's."""

    manager: str = ""
    driver: str = ""


@dataclass
class ShmSize(Said):
    size: int | None = None  # bytes; None: the mount gives no size= (tmpfs's default: half of RAM)


@dataclass
class PastedFacts:
    env: list[EnvSetting] = field(default_factory=list)
    docker_runs: list[DockerRun] = field(default_factory=list)
    cuda_errors: list[CudaError] = field(default_factory=list)
    peer_answers: list[PeerAnswer] = field(default_factory=list)
    shm_failures: list[ShmFailure] = field(default_factory=list)
    gdr_disabled: list[Said] = field(default_factory=list)
    sysfs_unresolved: list[Said] = field(default_factory=list)  # NCCL: "Could not find real path of /sys/..."
    net_ib_used: Said | None = None  # NCCL: "NET/IB : Using [0]mlx5_0:1/IB ..." (its GDR state not said there)
    peermem_loaded: Said | None = None  # an lsmod line showing nvidia_peermem / nv_peer_mem
    peermem_absent: Said | None = None  # `lsmod | grep` for them that printed no such row (its command line)
    nvml_no_links: dict[int | None, Said] = field(default_factory=dict)  # GPU -> "all links are inActive"
    links_inactive: dict[int | None, dict[int, Said]] = field(default_factory=dict)  # outside an nvlink -s block
    smi_rows: list[SmiRow] = field(default_factory=list)
    fabric_nothing_to_do: Said | None = None  # Fabric Manager: NV_WARN_NOTHING_TO_DO (no NVSwitch)
    fabric_versions: FabricVersions | None = None  # Fabric Manager: its driver interface is not the driver's
    grub_cmdline: tuple[str, Said] | None = None  # (the value of GRUB_CMDLINE_LINUX*, the line)
    shm_sizes: list[ShmSize] = field(default_factory=list)

    def keep(self, items: list, item) -> None:
        if len(items) < MAX_FACTS:
            items.append(item)
