"""What ``bench-p2p`` measured, as plain data: statistics, per-pair results, all-reduce results,
their JSON form, and how they are written onto a ``Topology`` (``Link.measured``).

No TensorFlow here: views, the CLI and ``recommend`` read these without paying for the import.

Units: GB/s are 10^9 bytes per second (as NVIDIA's tools and nccl-tests print them); sizes are
bytes; latencies are microseconds.
"""

from __future__ import annotations

import dataclasses
import statistics
from dataclasses import dataclass, field
from typing import Any, Iterable

from gputopo.analysis.causes.finding_kinds import with_kinds
from gputopo.model import Finding, Gpu, Measurement, Topology, make_link

BENCH_SCHEMA = "gputopo.bench-p2p/1"


@dataclass(frozen=True)
class Stat:
    """Median, minimum and maximum of repeated samples (the median is the figure we report)."""

    median: float
    min: float
    max: float
    samples: int

    @classmethod
    def of(cls, values: Iterable[float]) -> Stat:
        data = [float(v) for v in values]
        if not data:
            raise ValueError("no samples")
        return cls(statistics.median(data), min(data), max(data), len(data))

    def to_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "min": self.min, "max": self.max, "samples": self.samples}


def gbps_stat(size_bytes: int, seconds_per_copy: Iterable[float]) -> Stat:
    """Copy times -> GB/s (10^9 bytes/s). Min GB/s comes from the slowest copy and vice versa."""
    return Stat.of(size_bytes / s / 1e9 for s in seconds_per_copy)


def us_stat(seconds: Iterable[float]) -> Stat:
    return Stat.of(s * 1e6 for s in seconds)


def busbw_factor(device_count: int) -> float:
    """nccl-tests' all-reduce bus bandwidth factor: busbw = algbw * 2(n-1)/n.

    An all-reduce of S bytes on n ranks moves 2(n-1)/n * S bytes through each rank's link (ring
    reduce-scatter plus all-gather), so busbw is comparable with a link's peak whatever n is.
    """
    if device_count < 1:
        raise ValueError("an all-reduce needs at least one device")
    return 2.0 * (device_count - 1) / device_count


@dataclass
class BenchDevice:
    """One device in the benchmark: the index users see (NVML GPU index, or logical CPU number) and
    the TensorFlow device that carries it."""

    index: int
    tf_name: str
    pci_bus_id: str | None = None


@dataclass
class SizePoint:
    """One pair at one message size. ``bidir_gbps`` counts the bytes of both directions together."""

    size_bytes: int
    uni_gbps: Stat | None = None
    bidir_gbps: Stat | None = None
    via_host_gbps: Stat | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "size_bytes": self.size_bytes,
            "uni_gbps": _stat_dict(self.uni_gbps),
            "bidir_gbps": _stat_dict(self.bidir_gbps),
            "via_host_gbps": _stat_dict(self.via_host_gbps),
        }


@dataclass
class PairResult:
    """Everything measured from device ``src`` to device ``dst`` (an ordered pair)."""

    src: int
    dst: int
    points: list[SizePoint] = field(default_factory=list)
    latency_us: Stat | None = None
    errors: list[str] = field(default_factory=list)
    # --quick: the measured pair whose figures these are (same class), None where measured here.
    inferred_from: tuple[int, int] | None = None
    bytes_checked: bool = False  # a timed copy's destination was compared with its source, and matched
    bytes_mismatch: bool = False  # ... and did not match: the figure was dropped
    concurrent_gbps: Stat | None = None  # --concurrent: while the other pairs of its round copied too

    def point(self, size_bytes: int) -> SizePoint:
        for p in self.points:
            if p.size_bytes == size_bytes:
                return p
        p = SizePoint(size_bytes)
        self.points.append(p)
        self.points.sort(key=lambda q: q.size_bytes)
        return p

    def headline(self) -> SizePoint | None:
        """The largest size with a unidirectional figure: the one matrices show and snapshots keep."""
        measured = [p for p in self.points if p.uni_gbps is not None]
        return measured[-1] if measured else None

    def to_dict(self) -> dict[str, Any]:
        head = self.headline()
        return {
            "src": self.src,
            "dst": self.dst,
            "gbps": head.uni_gbps.median if head and head.uni_gbps else None,
            "bidir_gbps": head.bidir_gbps.median if head and head.bidir_gbps else None,
            "via_host_gbps": head.via_host_gbps.median if head and head.via_host_gbps else None,
            "size_bytes": head.size_bytes if head else None,
            "latency_us": self.latency_us.median if self.latency_us else None,
            "latency_us_stats": _stat_dict(self.latency_us),
            "sizes": [p.to_dict() for p in self.points],
            "errors": list(self.errors),
            "measured": self.inferred_from is None,
            "inferred_from": list(self.inferred_from) if self.inferred_from else None,
            "bytes_checked": self.bytes_checked,
            "bytes_mismatch": self.bytes_mismatch,
            "concurrent_gbps": self.concurrent_gbps.median if self.concurrent_gbps else None,
        }


@dataclass
class AllReduceResult:
    """One MirroredStrategy cross-device op all-reducing ``size_bytes`` of float32 on the group."""

    cross_device_ops: str
    devices: list[int]
    size_bytes: int
    time_us: Stat | None = None
    algbw_gbps: Stat | None = None
    busbw_gbps: Stat | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cross_device_ops": self.cross_device_ops,
            "devices": list(self.devices),
            "size_bytes": self.size_bytes,
            "time_us": _stat_dict(self.time_us),
            "algbw_gbps": _stat_dict(self.algbw_gbps),
            "busbw_gbps": _stat_dict(self.busbw_gbps),
            "error": self.error,
        }


@dataclass
class BenchResult:
    """A whole run: which devices, how measured, and every figure (possibly partial if interrupted)."""

    device_kind: str  # "GPU" or "CPU"
    devices: list[BenchDevice]
    copy_op: str  # the TF op that moved the bytes: "Identity" (GPU D2D) or "DeepCopy" (host memory)
    host_device: str
    sizes_bytes: list[int]
    latency_size_bytes: int
    repeat: int
    warmup: int
    via_host: bool = False
    allreduce: bool = False
    pairs: dict[tuple[int, int], PairResult] = field(default_factory=dict)
    allreduce_results: list[AllReduceResult] = field(default_factory=list)
    interrupted: bool = False
    stopped_by: str | None = None  # the signal that interrupted the run: "SIGINT" (Ctrl-C) or "SIGTERM"
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)
    # Summed warm-up and timed intervals of every measurement (copies, all-reduces) and their calls:
    # wall_s minus this is what the run spent around the copies (tracing, allocating, syncing).
    copy_seconds_total: float = 0.0
    copy_calls_total: int = 0
    quick: bool = False  # --quick: one pair per class measured, the others inferred
    pair_classes: list[dict[str, Any]] = field(default_factory=list)  # --quick: each class and its pairs
    concurrent_rounds: list[dict[str, Any]] = field(default_factory=list)  # --concurrent: each matching

    @property
    def indices(self) -> list[int]:
        return [d.index for d in self.devices]

    @property
    def measures_host_memory(self) -> bool:
        return self.device_kind == "CPU"

    def pair(self, src: int, dst: int) -> PairResult:
        key = (src, dst)
        if key not in self.pairs:
            self.pairs[key] = PairResult(src, dst)
        return self.pairs[key]

    def ordered_pairs(self) -> list[tuple[int, int]]:
        idx = self.indices
        return [(a, b) for a in idx for b in idx if a != b]

    def failures(self) -> list[str]:
        """Every failed step's message, once each (a both-ways step fails both its pairs with one)."""
        seen: dict[str, None] = {}
        for key in sorted(self.pairs):
            for error in self.pairs[key].errors:
                seen.setdefault(error, None)
        for result in self.allreduce_results:
            if result.error:
                seen.setdefault(result.error, None)
        return list(seen)

    def what_was_measured(self) -> str:
        if self.measures_host_memory:
            return (
                f"host memory: {len(self.devices)} logical CPU devices copying with DeepCopy "
                "(not GPUs: these figures say nothing about GPU links)"
            )
        return f"{len(self.devices)} GPUs: device-to-device copies (tf.identity placed on the destination GPU)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema": BENCH_SCHEMA,
            "device_kind": self.device_kind,
            "measured": self.what_was_measured(),
            "devices": [
                {"index": d.index, "tf_device": d.tf_name, "pci_bus_id": d.pci_bus_id} for d in self.devices
            ],
            "copy_op": self.copy_op,
            "host_device": self.host_device,
            "sizes_bytes": list(self.sizes_bytes),
            "latency_size_bytes": self.latency_size_bytes,
            "repeats": self.repeat,
            "warmup": self.warmup,
            "units": {"bandwidth": "GB/s (1e9 bytes/s)", "latency": "us", "size": "bytes"},
            "pairs": [self.pairs[key].to_dict() for key in self.ordered_pairs() if key in self.pairs],
            "allreduce": [r.to_dict() for r in self.allreduce_results],
            "interrupted": self.interrupted,
            "wall_s": self.wall_s,
            "copy_seconds_total": self.copy_seconds_total,
            "copy_calls_total": self.copy_calls_total,
            "notes": list(self.notes),
            "quick": self.quick,
            "pair_classes": list(self.pair_classes),
            "concurrent_rounds": list(self.concurrent_rounds),
            "findings": [dataclasses.asdict(f) for f in with_kinds(self.findings())],
        }

    def findings(self) -> list[Finding]:
        """An error finding per pair whose copied bytes were not its source's."""
        bad = sorted(key for key, pair in self.pairs.items() if pair.bytes_mismatch)
        if not bad:
            return []
        where = ", ".join(f"{a} -> {b}" for a, b in bad[:8]) + (f" and {len(bad) - 8} more" if len(bad) > 8 else "")
        what = "logical CPU device" if self.measures_host_memory else "GPU"
        return [Finding(
            severity="error",
            code="p2p-bytes-mismatch",
            message=(f"copied bytes differ from their source on {what} pair{'s' if len(bad) != 1 else ''} {where}: "
                     "the copy returned wrong data (a bandwidth figure alone would not show it)"),
            gpus=sorted({g for pair in bad for g in pair}),
            fix=("likely causes: the IOMMU in translation mode (boot with iommu=pt) or PCIe ACS redirecting P2P "
                 "traffic (disable ACS on the switch/root ports); `gputopo doctor` checks both; until fixed, "
                 "NCCL_P2P_DISABLE=1 avoids P2P"),
        )]


def _stat_dict(stat: Stat | None) -> dict[str, float | int] | None:
    return stat.to_dict() if stat is not None else None


# --- results -> topology snapshot ---------------------------------------------------------------


def placeholder_topology(result: BenchResult) -> Topology:
    """A topology for devices no NVML probe or file described (logical CPU devices on a box
    without GPUs): one entry per device, links of unknown type, labelled as host memory."""
    what = "logical CPU device" if result.measures_host_memory else "GPU"
    gpus = [Gpu(index=d.index, name=f"{what} {d.index} ({d.tf_name})", pci_bus_id=d.pci_bus_id) for d in result.devices]
    idx = sorted(result.indices)
    links = [make_link(a, b, "UNKNOWN") for i, a in enumerate(idx) for b in idx[i + 1 :]]
    label = (
        f"{len(gpus)} logical CPU devices measured by bench-p2p (host memory, not GPUs)"
        if result.measures_host_memory
        else f"{len(gpus)} GPUs measured by bench-p2p"
    )
    return Topology(gpus=gpus, links=links, source="bench-p2p", label=label)


def _spread(stats: Iterable[Stat | None]) -> float | None:
    """The wider relative spread, (max - min) / median, of repeated samples; None without two samples."""
    spreads = [(s.max - s.min) / s.median for s in stats if s is not None and s.samples > 1 and s.median > 0]
    return round(max(spreads), 4) if spreads else None


def apply_measurements(topology: Topology, result: BenchResult) -> list[tuple[int, int]]:
    """Write each measured pair onto ``Link.measured`` of ``topology`` (in place).

    A link keeps the figures of the largest size measured in both directions; its latency is the
    worse of the two directions and its via-host figure the slower one, so that ``recommend`` is
    never flattered. Returns the links (a, b) that got a measurement. On logical CPU devices the
    measurement says ``device_kind="CPU"`` and a finding says that host memory was measured.
    """
    updated: list[tuple[int, int]] = []
    links = topology.link_map()
    idx = sorted(result.indices)
    for i, a in enumerate(idx):
        for b in idx[i + 1 :]:
            link = links.get((a, b))
            if link is None:
                continue
            forward, backward = result.pairs.get((a, b)), result.pairs.get((b, a))
            head_f = forward.headline() if forward else None
            head_b = backward.headline() if backward else None
            if head_f is None and head_b is None:
                continue
            latencies = [p.latency_us.median for p in (forward, backward) if p and p.latency_us]
            via = [h.via_host_gbps.median for h in (head_f, head_b) if h and h.via_host_gbps]
            bidir = [h.bidir_gbps.median for h in (head_f, head_b) if h and h.bidir_gbps]
            sizes = [h.size_bytes for h in (head_f, head_b) if h]
            link.measured = Measurement(
                a_to_b_gbps=head_f.uni_gbps.median if head_f and head_f.uni_gbps else None,
                b_to_a_gbps=head_b.uni_gbps.median if head_b and head_b.uni_gbps else None,
                bidirectional_gbps=min(bidir) if bidir else None,
                latency_us=max(latencies) if latencies else None,
                via_host_gbps=min(via) if via else None,
                device_kind=result.device_kind,
                size_bytes=min(sizes) if sizes else None,
                repeats=result.repeat,
                spread=_spread(h.uni_gbps for h in (head_f, head_b) if h),
            )
            updated.append((a, b))
    if result.measures_host_memory and updated:
        topology.add_finding(
            Finding(
                severity="info",
                code="measured-host-memory",
                message=(
                    "bench-p2p measured host memory on logical CPU devices, not GPU links: "
                    "the measured figures on these links stand in for GPUs that were not measured"
                ),
                gpus=sorted({g for pair in updated for g in pair}),
            )
        )
    with_kinds(topology.diagnostics)
    return updated
