"""gputopo.bench.engine run for real on logical CPU devices (the code GPUs run, other device names).

The run's robustness (hung steps, out-of-memory, Ctrl-C) and the device choice: test_bench_run."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from gputopo.bench.engine import CopyBench, same_device
from gputopo.bench.options import BenchConfig
from gputopo.bench.run import cpu_bench_devices, run_benchmark
from gputopo.notation import MIB

pytestmark = pytest.mark.tf

# Plausible host-memory copy bandwidth: a zero-copy op reports hundreds of GB/s at large sizes.
PLAUSIBLE_GBPS = (0.05, 200.0)


@pytest.fixture(scope="module")
def measured(tf, four):
    config = BenchConfig(sizes_bytes=[256 * 1024, MIB], repeat=3, warmup=1, via_host=True, min_sample_s=0.002)
    return run_benchmark(tf, four, "CPU", config)


def _plausible(stat):
    """Figures in GB/s, not bytes/s or GiB/ms: a unit error moves every sample, so the fastest sample
    must clear the floor and the median stay under the ceiling. (Not the median against the floor:
    on CI's 2 shared cores, contention once made 2 of 3 samples of a 256 KiB copy ten times slower.)"""
    assert stat is not None
    assert stat.min <= stat.median <= stat.max
    assert PLAUSIBLE_GBPS[0] < stat.max and stat.median < PLAUSIBLE_GBPS[1], stat


def test_every_ordered_pair_is_measured_plausibly(measured):
    assert measured.device_kind == "CPU" and measured.copy_op == "DeepCopy"
    assert not measured.interrupted
    assert sorted(measured.pairs) == [(a, b) for a in range(4) for b in range(4) if a != b]
    for (a, b), pair in measured.pairs.items():
        assert pair.errors == []
        assert [p.size_bytes for p in pair.points] == [256 * 1024, MIB]
        for point in pair.points:
            assert point.uni_gbps.samples == 3
            _plausible(point.uni_gbps)
            _plausible(point.via_host_gbps)
            _plausible(point.bidir_gbps)
            # One measurement serves both directions of a bidirectional pair.
            assert measured.pairs[(b, a)].point(point.size_bytes).bidir_gbps == point.bidir_gbps
        assert 0 < pair.latency_us.median < 1e6
        assert pair.headline().size_bytes == MIB


def test_json_form(measured):
    data = measured.to_dict()
    assert data["device_kind"] == "CPU" and "host memory" in data["measured"]
    assert data["sizes_bytes"] == [256 * 1024, MIB] and data["repeats"] == 3
    assert len(data["pairs"]) == 12
    first = data["pairs"][0]
    assert (first["src"], first["dst"]) == (0, 1)
    assert first["gbps"] == measured.pairs[(0, 1)].headline().uni_gbps.median
    assert first["latency_us"] > 0


def test_source_tensor_lives_on_its_device_with_exact_size(tf, four):
    bench = CopyBench(tf, four, "CPU", BenchConfig())
    x = bench.source_tensor(four[2].tf_name, 37)
    assert x.device.endswith("CPU:2") and x.shape == (37,) and x.dtype == tf.uint8
    y = bench.uni_function(four[1].tf_name)(x)
    assert np.array_equal(x.numpy(), y.numpy())  # a copy, bit for bit


def test_bytes_really_move(tf, four):
    """The benchmark's copy on logical CPU devices (DeepCopy) writes the bytes into a buffer of its
    own; ``tf.identity`` between logical CPU devices would hand over the source's very buffer (zero
    copy: the fantasy GB/s the engine avoids). ``np.asarray`` of a CPU eager tensor is a view of its
    buffer (in TF 2.21 ``.numpy()`` returns a copy), so the buffers' addresses tell, without timing."""
    config = BenchConfig(sizes_bytes=[MIB], repeat=1, warmup=0, min_sample_s=0.001)
    deep = CopyBench(tf, four, "CPU", config)
    assert deep.copy_op == "DeepCopy"
    source = deep.source_tensor(four[0].tf_name, MIB)
    copied = deep.uni_function(four[1].tf_name)(source)
    assert np.asarray(source).ctypes.data == np.asarray(source).ctypes.data  # a view, not a copy
    assert np.asarray(copied).ctypes.data != np.asarray(source).ctypes.data  # a buffer of its own...
    assert np.array_equal(copied.numpy(), source.numpy())  # ...holding the same bytes

    ident = CopyBench(tf, four, "CPU", config, copy_op="Identity")
    shared = ident.uni_function(four[1].tf_name)(source)
    assert np.asarray(shared).ctypes.data == np.asarray(source).ctypes.data  # zero-copy: the source's buffer

    cancel = threading.Event()  # and the timed path runs the same copy
    assert all(s > 0 for s in deep.measure_uni(four[0].tf_name, four[1].tf_name, MIB, cancel))


def test_a_run_counts_its_warm_up_and_timed_copies(tf, four):
    """Every step makes ``warmup`` timed warm-up calls (with none, one calibration call) and
    ``repeat`` samples of N calls; with a tiny ``min_sample_s`` N is 1. The run's summed copy time
    lies inside its wall time. 4 devices: 12 pairs one way, 6 both ways, 12 latency = 30 steps."""
    for warmup, per_step in ((2, 2 + 3), (0, 1 + 3)):
        config = BenchConfig(sizes_bytes=[4096], repeat=3, warmup=warmup, min_sample_s=1e-9)
        result = run_benchmark(tf, four, "CPU", config)
        assert result.failures() == []
        assert result.copy_calls_total == 30 * per_step
        assert 0 < result.copy_seconds_total < result.wall_s
        data = result.to_dict()
        assert (data["copy_calls_total"], data["copy_seconds_total"]) == (30 * per_step, result.copy_seconds_total)


def test_a_step_holds_only_its_own_sources(tf, four):
    """Sources of earlier steps are dropped (memory: two buffers per copy in flight); a new source
    is a copy of the random bytes already made, in a buffer of its own on its own device."""
    bench = CopyBench(tf, four, "CPU", BenchConfig())
    names = [d.tf_name for d in four]
    (first,) = bench.step_sources([names[0]], MIB)
    second, third = bench.step_sources([names[1], names[2]], MIB)
    assert sorted(bench._sources) == [(names[1], MIB), (names[2], MIB)]
    for source, name in ((second, names[1]), (third, names[2])):
        assert same_device(source.device, name) and source.shape == (MIB,)
        assert np.array_equal(source.numpy(), first.numpy())
        assert np.asarray(source).ctypes.data != np.asarray(first).ctypes.data
    assert bench.step_sources([names[2]], MIB)[0] is third  # kept while a step still needs it
    bench.drop_sources()
    assert bench._sources == {}


def test_same_device_names():
    assert same_device("/job:localhost/replica:0/task:0/device:GPU:1", "/device:GPU:1")
    assert same_device("/device:CPU:0", "/cpu:0")
    assert not same_device("/job:localhost/replica:0/task:0/device:CPU:0", "/device:GPU:0")
    assert not same_device("/device:GPU:1", "/device:GPU:10")
    assert not same_device("", "/device:GPU:0")


def test_a_source_tensor_on_the_wrong_device_fails_the_step(tf, tf_cpu_devices):
    """Soft placement puts a tensor for a device TF does not have on another one: that step must
    fail with a reason, not time a different copy."""
    devices = cpu_bench_devices(tf_cpu_devices[:2], None)
    devices[1] = type(devices[1])(1, "/device:CPU:99")
    config = BenchConfig(sizes_bytes=[4096], repeat=1, warmup=0, min_sample_s=0.001)
    result = run_benchmark(tf, devices, "CPU", config)
    assert any("not on /device:CPU:99" in e for e in result.pairs[(1, 0)].errors), result.pairs[(1, 0)].errors
