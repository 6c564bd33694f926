"""bench-p2p's engine run for real on logical CPU devices (the code GPUs run, other device names),
plus its robustness: hung steps, out-of-memory and Ctrl-C, with stand-in measurements."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from gputopo.errors import InputError
from gputopo.notation import MIB
from gputopo.sources.reference import load_reference
from gputopo.tf.bench import (
    BenchConfig,
    CopyBench,
    choose_devices,
    cpu_bench_devices,
    map_gpus,
    run_benchmark,
)

pytestmark = pytest.mark.tf

# Plausible host-memory copy bandwidth: a zero-copy op reports hundreds of GB/s at large sizes.
PLAUSIBLE_GBPS = (0.05, 200.0)


@pytest.fixture(scope="module")
def tf(tf_cpu_devices):
    from gputopo.tf.devices import import_tensorflow

    return import_tensorflow()


@pytest.fixture(scope="module")
def four(tf_cpu_devices):
    return cpu_bench_devices(tf_cpu_devices[:4], None)


@pytest.fixture(scope="module")
def measured(tf, four):
    config = BenchConfig(sizes_bytes=[256 * 1024, MIB], repeat=3, warmup=1, via_host=True, min_sample_s=0.002)
    return run_benchmark(tf, four, "CPU", config)


def _plausible(stat):
    assert stat is not None
    assert stat.min <= stat.median <= stat.max
    assert PLAUSIBLE_GBPS[0] < stat.median < PLAUSIBLE_GBPS[1], stat


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
    """DeepCopy runs at memory speed (like a NumPy copy of the same bytes); the zero-copy
    tf.identity between logical CPU devices would report a multiple of it."""
    size = 64 * MIB
    config = BenchConfig(sizes_bytes=[size], repeat=3, warmup=1, min_sample_s=0.02)
    cancel = threading.Event()
    deep = CopyBench(tf, four, "CPU", config)
    deep_s = float(np.median(deep.measure_uni(four[0].tf_name, four[1].tf_name, size, cancel)))
    ident = CopyBench(tf, four, "CPU", config, copy_op="Identity")
    ident_s = float(np.median(ident.measure_uni(four[0].tf_name, four[1].tf_name, size, cancel)))
    src = np.random.randint(0, 255, size, dtype=np.uint8)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    numpy_s = []
    for _ in range(3):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        numpy_s.append(time.perf_counter() - t0)
    ratio = float(np.median(numpy_s)) / deep_s  # bench GB/s over NumPy GB/s
    assert 0.2 < ratio < 5, ratio
    assert deep_s > 3 * ident_s, (deep_s, ident_s)


class _StandIn(CopyBench):
    """Real orchestration, stand-in copies: each takes 1 ms unless a test makes it misbehave."""

    def __init__(self, tf, devices, config, misbehave):
        super().__init__(tf, devices, "CPU", config)
        self.misbehave = misbehave
        self.release = threading.Event()

    def _copy_seconds(self, kind, a, b, size_bytes, cancel):
        self.misbehave(self, kind, a, b, size_bytes, cancel)
        return [0.001] * self.config.repeat

    def measure_uni(self, src, dst, size_bytes, cancel):
        return self._copy_seconds("uni", src, dst, size_bytes, cancel)

    def measure_bidir(self, a, b, size_bytes, cancel):
        return self._copy_seconds("bidir", a, b, size_bytes, cancel)

    def measure_via_host(self, src, dst, size_bytes, cancel):
        return self._copy_seconds("via", src, dst, size_bytes, cancel)


def _run_stand_in(tf, four, misbehave, timeout_s=30.0):
    config = BenchConfig(sizes_bytes=[MIB], repeat=2, warmup=0, step_timeout_s=timeout_s)
    bench = _StandIn(tf, four, config, misbehave)
    try:
        return run_benchmark(tf, four, "CPU", config, bench=bench)
    finally:
        bench.release.set()


def test_figures_follow_from_the_copy_times(tf, four):
    result = _run_stand_in(tf, four, lambda *args: None)
    point = result.pairs[(0, 3)].headline()
    assert point.uni_gbps.median == pytest.approx(MIB / 0.001 / 1e9)
    assert point.bidir_gbps.median == pytest.approx(2 * MIB / 0.001 / 1e9)
    assert result.pairs[(0, 3)].latency_us.median == pytest.approx(1000.0)


def test_a_hung_pair_times_out_and_the_run_goes_on(tf, four):
    hang = four[0].tf_name, four[1].tf_name

    def misbehave(bench, kind, a, b, size_bytes, cancel):
        if kind == "uni" and (a, b) == hang:
            bench.release.wait(10)

    started = time.perf_counter()
    result = _run_stand_in(tf, four, misbehave, timeout_s=0.3)
    assert time.perf_counter() - started < 5
    assert any("timed out after 0.3 s" in e for e in result.pairs[(0, 1)].errors)
    assert result.pairs[(0, 1)].headline() is None
    # Pairs without the hung devices are measured; later ones with them are skipped, with a reason.
    assert result.pairs[(2, 3)].headline() is not None and result.pairs[(2, 3)].errors == []
    assert any("hung in an earlier step" in e for e in result.pairs[(1, 2)].errors)


def test_out_of_memory_fails_only_that_pair(tf, four):
    def misbehave(bench, kind, a, b, size_bytes, cancel):
        if kind == "uni" and size_bytes == MIB and (a, b) == (four[2].tf_name, four[3].tf_name):
            raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor")

    result = _run_stand_in(tf, four, misbehave)
    assert result.pairs[(2, 3)].errors == ["CPU 2 -> 3 1 MiB: out of memory"]
    assert result.pairs[(2, 3)].latency_us is not None  # the small copy still worked
    assert result.pairs[(3, 2)].headline() is not None
    assert all(p.errors == [] for key, p in result.pairs.items() if key != (2, 3))


def test_ctrl_c_keeps_the_partial_result(tf, four):
    calls = []

    def misbehave(bench, kind, a, b, size_bytes, cancel):
        calls.append(kind)
        if len(calls) == 3:
            raise KeyboardInterrupt

    result = _run_stand_in(tf, four, misbehave)
    assert result.interrupted
    assert [key for key, p in result.pairs.items() if p.headline()] == [(0, 1), (0, 2)]
    assert "interrupted" in result.notes[0]


def test_device_choice(tf_cpu_devices):
    topo = load_reference("dgx1")
    devices = cpu_bench_devices(tf_cpu_devices[:4], topo)
    assert [d.index for d in devices] == [0, 1, 2, 3]
    assert [d.index for d in choose_devices(devices, [3, 1])] == [3, 1]
    with pytest.raises(InputError, match="no GPU 7"):
        choose_devices(devices, [0, 7])
    with pytest.raises(InputError, match="at least two"):
        choose_devices(devices, [2])
    with pytest.raises(InputError, match="more than the 4 GPUs"):
        cpu_bench_devices(tf_cpu_devices[:5], load_reference("two-socket-4gpu"))


def test_gpus_join_on_pci_bus_id_not_order():
    topo = load_reference("dgx1")
    # TF listed the GPUs in another order (FASTEST_FIRST): the bus ids put them right.
    tf_gpus = [("/device:GPU:0", topo.gpu(5).pci_bus_id), ("/device:GPU:1", topo.gpu(2).pci_bus_id)]
    devices, notes = map_gpus(tf_gpus, topo)
    assert [(d.index, d.tf_name) for d in devices] == [(5, "/device:GPU:0"), (2, "/device:GPU:1")]
    assert notes == []
    devices, notes = map_gpus([("/device:GPU:0", None), ("/device:GPU:1", None)], topo, environ={})
    assert [d.index for d in devices] == [0, 1] and "same order" in notes[0]


def test_without_bus_ids_cuda_visible_devices_renumbering_is_undone():
    # CUDA_VISIBLE_DEVICES=5,2 makes TF's GPU:0 nvidia-smi's GPU 5 (in PCI order): --gpus 5,2 must find them.
    tf_gpus = [("/device:GPU:0", None), ("/device:GPU:1", None)]
    env = {"CUDA_VISIBLE_DEVICES": "5,2", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"}
    for topology in (load_reference("dgx1"), None):
        devices, _ = map_gpus(tf_gpus, topology, environ=env)
        assert [(d.index, d.tf_name) for d in devices] == [(5, "/device:GPU:0"), (2, "/device:GPU:1")]
        assert [d.index for d in choose_devices(devices, [5, 2])] == [5, 2]
    # UUIDs or CUDA's own FASTEST_FIRST order say nothing about PCI order: plain order then.
    for unclear in ({"CUDA_VISIBLE_DEVICES": "GPU-8d1f,GPU-77aa", "CUDA_DEVICE_ORDER": "PCI_BUS_ID"},
                    {"CUDA_VISIBLE_DEVICES": "5,2"}):
        assert [d.index for d in map_gpus(tf_gpus, None, environ=unclear)[0]] == [0, 1]


def test_same_device_names():
    from gputopo.tf.bench import same_device

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
