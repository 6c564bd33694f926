"""CPU per `gputopo watch` sample: reading every counter through the Python fake of pynvml and
turning two samples into rates, findings, a JSON line and a Prometheus file, at 8 GPUs x 18 links
(DGX H100) and at 72 GPUs x 18 links (a GB200 NVL72 domain seen as one host). Prints figures; asserts
nothing (the shared machine's speed moves between runs)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parents[1] / "tests")]

from fake_nvml import FakeNvml  # noqa: E402

from gputopo.analysis.watch.watch import frame  # noqa: E402
from gputopo.analysis.watch.watch_summary import Summary  # noqa: E402
from gputopo.sources.host.nvml_counters import CounterReader  # noqa: E402
from gputopo.sources.reference import load_reference  # noqa: E402
from gputopo.views.watch import frame_json, json_line  # noqa: E402
from gputopo.views.watch_prometheus import prometheus_text  # noqa: E402

SAMPLES = 20


def measure(machine: str) -> None:
    topology = load_reference(machine)
    for gpu in topology.gpus:
        gpu.host = None  # the whole domain as one host
    counters = {"gpus": {str(i): {"nvlink_tx_bytes_per_s": {str(k): 20e9 for k in range(18)}} for i in range(len(topology.gpus))}}
    reader = CounterReader(FakeNvml(topology, counters=counters))
    gpus = reader.open()
    links = sum(len(g.links) for g in gpus)
    summary = Summary()
    before = reader.sample()
    read_s = judge_s = 0.0
    for _ in range(SAMPLES):
        t0 = time.process_time()
        after = reader.sample()
        t1 = time.process_time()
        current = frame(gpus, before, after)
        summary.add(current)
        json_line(frame_json(current, "2026-01-01T00:00:00Z"))
        prometheus_text(current, summary, {g.index: {"gpu": g.index, "name": g.name, "bus_id": g.bus_id} for g in gpus})
        t2 = time.process_time()
        read_s += t1 - t0
        judge_s += t2 - t1
        before = after
    reader.close()
    print(f"{machine:12s} {len(gpus):3d} GPUs {links:5d} links: read {1e3 * read_s / SAMPLES:7.2f} ms CPU, "
          f"rates+JSON+Prometheus {1e3 * judge_s / SAMPLES:7.2f} ms CPU per sample (Python fake of pynvml)")


if __name__ == "__main__":
    for name in ("dgx-h100", "gb200-nvl72"):
        measure(name)
