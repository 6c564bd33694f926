"""TensorFlow's own view of the GPUs, as its device-initialisation log tells it."""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.model.reading_notes import ReadingNote


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
    # What the log reader noticed (cut lines, missing matrix rows, several start-ups): facts that
    # ``analysis.causes.tf_crosscheck.tf_findings`` words. Older snapshots' ``notes`` (findings) load here.
    reading_notes: list[ReadingNote] = field(default_factory=list)
    # True: the true entries of ``peer`` off the diagonal are inferred, not printed (TF 0.x-1.4 log
    # only the pairs that cannot peer, and this log names every GPU on both sides of those lines).
    peer_inferred: bool = False
    enable_failed: list[list[int]] = field(default_factory=list)  # [i, j]: TF could not enable peer access i->j
    # Ordinals named in CUDA_ERROR_TOO_MANY_PEERS lines (a GPU maps at most 8 peers); None: no such line.
    too_many_peers: list[int] | None = None
    # How many GPUs TensorFlow had, as the log implies it (GPU:7 or "Found device 7" => 8), apart from
    # the ordinals it names (``devices``); ``gpu_count_at_least``: a lower bound (the log is cut).
    gpu_count: int | None = None
    gpu_count_at_least: bool = False
    startups: int = 1  # how many TensorFlow start-ups the log holds
    startup: int = 1  # which of them (from 1) this view reads
