"""A hand-made BenchResult for the bench tests (pure, no TensorFlow)."""

from __future__ import annotations

from gputopo.bench.results import BenchDevice, BenchResult, Stat
from gputopo.notation import MIB


def make_result(
    kind: str,
    gbps: dict[tuple[int, int], float],
    indices: list[int] | None = None,
    via: dict[tuple[int, int], float] | None = None,
) -> BenchResult:
    """A BenchResult at 1 MiB with the given unidirectional medians (and via-host figures); each
    pair's latency is 10 + its source index in us, its bidirectional figure twice its one-way one."""
    indices = indices if indices is not None else sorted({i for pair in gbps for i in pair})
    result = BenchResult(
        device_kind=kind,
        devices=[BenchDevice(i, f"/device:{kind}:{i}") for i in indices],
        copy_op="DeepCopy" if kind == "CPU" else "Identity",
        host_device="/device:CPU:0",
        sizes_bytes=[MIB],
        latency_size_bytes=4,
        repeat=3,
        warmup=1,
        via_host=via is not None,
    )
    for (a, b), value in gbps.items():
        pair = result.pair(a, b)
        pair.point(MIB).uni_gbps = Stat(value, value * 0.9, value * 1.1, 3)
        pair.point(MIB).bidir_gbps = Stat(2 * value, 2 * value, 2 * value, 3)
        if via and (a, b) in via:
            pair.point(MIB).via_host_gbps = Stat(via[(a, b)], via[(a, b)], via[(a, b)], 3)
        pair.latency_us = Stat(10.0 + a, 9.0, 12.0, 3)
    return result
