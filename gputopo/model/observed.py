"""What tools other than the topology matrix observed on a host: NVLink states per link
(``nvidia-smi nvlink -s``), the transports NCCL chose (``NCCL_DEBUG=INFO``) and collective bus
bandwidth per size (nccl-tests). Every field is optional: ``None`` is "the source did not say"."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NvLinkState:
    """One NVLink of one GPU as ``nvidia-smi nvlink -s/-R/-c`` prints it."""

    gpu: int
    link: int
    active: bool | None = None  # False for ``<inactive>``
    gbps: float | None = None  # the per-link speed nvidia-smi prints (GB/s, per direction)
    remote: str | None = None  # the far end where ``-R`` says it (a PCI bus id, or "NVSwitch")
    pci_bus_id: str | None = None  # the GPU's, where printed
    capabilities: dict[str, bool] = field(default_factory=dict)  # ``-c``: "P2P is supported": true, ...


@dataclass
class NcclRank:
    """One NCCL rank: its CUDA device and PCI bus id where the log says."""

    rank: int
    cuda_device: int | None = None
    pci_bus_id: str | None = None
    host: str | None = None


@dataclass
class NcclTransport:
    """What NCCL used to send from rank ``src_rank`` to ``dst_rank`` (``a``/``b``: those ranks' GPU
    indices in this topology, where known), on which channels and for what (ring, tree, ...)."""

    src_rank: int
    dst_rank: int
    transport: str  # "P2P", "SHM", "NET", "NVLS", "COLLNET" (the first word of NCCL's ``via ...``)
    detail: str  # NCCL's words: "P2P/IPC/read", "SHM/direct/direct", "NET/IB/0/GDRDMA"
    a: int | None = None
    b: int | None = None
    channels: list[int] = field(default_factory=list)


@dataclass
class NcclView:
    """What an ``NCCL_DEBUG=INFO`` log says about one job."""

    version: str | None = None
    nranks: int | None = None
    ranks: list[NcclRank] = field(default_factory=list)
    transports: list[NcclTransport] = field(default_factory=list)
    # "P2P is disabled between connected GPUs a and b": the CUDA devices NCCL names.
    p2p_disabled_pairs: list[list[int]] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)  # "NCCL_P2P_DISABLE set by environment to 1"
    gdr: bool | None = None  # GPU Direct RDMA in use on some NET connection
    nvls: bool | None = None  # NVLink SHARP
    collnet: bool | None = None
    rings: list[str] = field(default_factory=list)  # "Channel 00/02 : 0 1 2 3"
    trees: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # warnings NCCL printed


@dataclass
class CollectiveRow:
    """One size of an nccl-tests table: out-of-place and in-place figures."""

    size_bytes: int
    count: int | None = None
    dtype: str | None = None
    redop: str | None = None
    root: int | None = None
    out_time_us: float | None = None
    out_algbw_gbps: float | None = None
    out_busbw_gbps: float | None = None
    out_wrong: int | None = None  # ``#wrong``; None where printed as N/A
    in_time_us: float | None = None
    in_algbw_gbps: float | None = None
    in_busbw_gbps: float | None = None
    in_wrong: int | None = None


@dataclass
class CollectiveRun:
    """One nccl-tests run (``all_reduce_perf`` ...): bus bandwidth per size on the GPUs it names."""

    operation: str  # "all_reduce_perf", or the name the table was given
    gpus: list[int] = field(default_factory=list)  # this topology's GPU indices, where known
    nranks: int | None = None
    rows: list[CollectiveRow] = field(default_factory=list)
    avg_busbw_gbps: float | None = None
    out_of_bounds: int | None = None  # "# Out of bounds values : 0 OK"
    origin: str | None = None
