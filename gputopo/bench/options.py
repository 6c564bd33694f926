"""``bench-p2p``'s defaults and what to measure (``BenchConfig``), in a module without TensorFlow so
the CLI can show the defaults in --help and check the options before TensorFlow's slow import.

The option parsers (sizes, sweeps, GPU lists) are ``gputopo.notation``'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from gputopo.errors import InputError
from gputopo.fileio import write_target
from gputopo.notation import MIB, parse_gpu_list, parse_size, parse_size_sweep

DEFAULT_SIZE_BYTES = 64 * MIB  # large enough that TF's per-call dispatch is small beside the copy
DEFAULT_REPEAT = 5
DEFAULT_WARMUP = 2
DEFAULT_MIN_SAMPLE_S = 0.02  # each timed sample repeats the copy until it lasts this long
DEFAULT_STEP_TIMEOUT_S = 120.0
LATENCY_SIZE_BYTES = 4  # one float, like CUDA's p2pBandwidthLatencyTest
MAX_CPU_DEVICES = 64  # logical CPU devices: more only multiplies pairs of the same host memory
MAX_ORDERED_PAIRS = 4096  # 64 devices; a 72-GPU NVL72 rack (5112 pairs) is measured in parts with --devices


@dataclass
class BenchConfig:
    """What to measure and how carefully."""

    sizes_bytes: list[int] = field(default_factory=lambda: [DEFAULT_SIZE_BYTES])
    repeat: int = DEFAULT_REPEAT
    warmup: int = DEFAULT_WARMUP
    via_host: bool = False
    allreduce: bool = False
    latency_size_bytes: int = LATENCY_SIZE_BYTES
    min_sample_s: float = DEFAULT_MIN_SAMPLE_S
    step_timeout_s: float = DEFAULT_STEP_TIMEOUT_S

    def validate(self) -> None:
        if not self.sizes_bytes:
            raise InputError("no message size given")
        if self.repeat < 1:
            raise InputError(f"--repeat must be at least 1, got {self.repeat}")
        if self.warmup < 0:
            raise InputError(f"--warmup must not be negative, got {self.warmup}")
        if not 0 < self.step_timeout_s < math.inf:  # inf would overflow the wait; nan is no number
            raise InputError(f"--timeout must be a positive number of seconds, got {self.step_timeout_s}")


def config_from_options(
    *,
    gpus: str | None,
    cpu_devices: int | None,
    size: str | None,
    sizes: str | None,
    repeat: int,
    warmup: int,
    via_host: bool,
    allreduce: bool,
    step_timeout_s: float,
    min_sample_ms: float,
) -> tuple[BenchConfig, list[int] | None]:
    """Every option the user typed checked (before TensorFlow's multi-second import): the config,
    and the GPUs ``--devices`` names (None: all)."""
    if size is not None and sizes is not None:
        raise InputError("give either --size or --sizes, not both")
    if cpu_devices is not None and cpu_devices < 1:
        raise InputError(f"--cpu-devices must be at least 1, got {cpu_devices}")
    if cpu_devices is not None and cpu_devices > MAX_CPU_DEVICES:
        raise InputError(f"--cpu-devices must be at most {MAX_CPU_DEVICES}, got {cpu_devices}")
    if not 0 < min_sample_ms < float("inf"):
        raise InputError(f"--min-sample-ms must be a positive number of milliseconds, got {min_sample_ms}")
    sizes_bytes = parse_size_sweep(sizes) if sizes is not None else [parse_size(size) if size else DEFAULT_SIZE_BYTES]
    wanted = parse_gpu_list(gpus, "--devices") if gpus is not None else None
    if wanted is not None:
        check_pair_count(len(wanted))
    config = BenchConfig(
        sizes_bytes=sizes_bytes,
        repeat=repeat,
        warmup=warmup,
        via_host=via_host,
        allreduce=allreduce,
        min_sample_s=min_sample_ms / 1000.0,
        step_timeout_s=step_timeout_s,
    )
    config.validate()
    return config, wanted


def check_pair_count(device_count: int) -> None:
    """Every ordered pair is measured: refuse asks past ``MAX_ORDERED_PAIRS`` (hours of copies)."""
    pairs = device_count * (device_count - 1)
    if pairs > MAX_ORDERED_PAIRS:
        raise InputError(
            f"{device_count} devices make {pairs} ordered pairs to measure, more than {MAX_ORDERED_PAIRS}; "
            f"measure a part at a time with --devices (e.g. --devices 0-63)"
        )


def check_save_target(save: str) -> None:
    """``--save FILE`` refused now (a folder, a device such as /dev/null, a FIFO, a missing folder),
    not after a measurement that may take many minutes."""
    write_target(save)
