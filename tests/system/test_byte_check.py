"""bench-p2p checks the bytes of every measured pair: a corrupting copy on logical CPU devices is
caught (an error finding naming the pair, no figure), an honest one passes; --quick and
--concurrent on real copies (small sizes)."""

from __future__ import annotations

import pytest

from gputopo.bench.engine import CopyBench
from gputopo.bench.options import BenchConfig
from gputopo.bench.plan import quick_plan
from gputopo.bench.run import cpu_bench_devices, run_benchmark
from gputopo.sources.reference import load_reference

pytestmark = pytest.mark.tf

CONFIG = dict(sizes_bytes=[4096], repeat=1, warmup=0, min_sample_s=0.001)


def _corrupting(tf, devices, flip_on: str):
    """A bench whose copies onto ``flip_on`` flip the lowest bit of every byte."""
    bench = CopyBench(tf, devices, "CPU", BenchConfig(**CONFIG))
    honest = bench._copy

    def copy(x):
        y = honest(x)
        device = tf.raw_ops.Identity(input=y).device  # the destination the op was placed on
        return tf.bitwise.bitwise_xor(y, tf.constant(1, tf.uint8)) if flip_on in device else y

    bench._copy = copy
    return bench


def test_a_corrupting_copy_is_an_error_finding_and_no_figure(tf, tf_cpu_devices):
    devices = cpu_bench_devices(tf_cpu_devices[:2], None)
    bench = _corrupting(tf, devices, devices[1].tf_name.split("/")[-1].replace("device:", ""))
    result = run_benchmark(tf, devices, "CPU", BenchConfig(**CONFIG), bench=bench)
    bad = result.pairs[(0, 1)]
    assert bad.bytes_mismatch and bad.headline() is None
    assert any("not those of" in e for e in bad.errors)
    assert result.pairs[(1, 0)].bytes_checked and not result.pairs[(1, 0)].bytes_mismatch
    (finding,) = result.findings()
    assert finding.code == "p2p-bytes-mismatch" and "0 -> 1" in finding.message
    assert result.to_dict()["findings"][0]["code"] == "p2p-bytes-mismatch"


def test_honest_copies_are_checked_and_pass(tf, tf_cpu_devices):
    devices = cpu_bench_devices(tf_cpu_devices[:2], None)
    result = run_benchmark(tf, devices, "CPU", BenchConfig(**CONFIG))
    assert all(p.bytes_checked and not p.bytes_mismatch for p in result.pairs.values())
    assert result.findings() == [] and result.failures() == []


def test_quick_and_concurrent_on_logical_cpu_devices(tf, tf_cpu_devices):
    topology = load_reference("dgx1")
    devices = cpu_bench_devices(tf_cpu_devices[:4], topology)
    plan = quick_plan([d.index for d in devices], topology)
    result = run_benchmark(tf, devices, "CPU", BenchConfig(**CONFIG), plan=plan, concurrent=True)
    data = result.to_dict()
    inferred = [p for p in data["pairs"] if not p["measured"]]
    assert len(inferred) == 12 - len(plan.measured) and all(p["inferred_from"] for p in inferred)
    assert all(p["gbps"] is not None for p in data["pairs"])
    assert len(data["concurrent_rounds"]) == 3
    assert all(len(r["per_pair"]) == 2 and r["aggregate_gbps"] > 0 for r in data["concurrent_rounds"])
    assert any("host memory" in note and "not links" in note for note in data["notes"])
