"""gputopo.bench.run: the run's robustness (hung steps, out-of-memory and Ctrl-C) with stand-in
measurements over the real orchestration, and which devices are measured (no copies timed here)."""

from __future__ import annotations

import threading
import time

import pytest

from gputopo.bench.engine import CopyBench
from gputopo.bench.options import BenchConfig
from gputopo.bench.run import choose_devices, cpu_bench_devices, map_gpus, run_benchmark
from gputopo.errors import InputError
from gputopo.notation import MIB
from gputopo.sources.reference import load_reference

pytestmark = pytest.mark.tf


class _StandIn(CopyBench):
    """Real orchestration, stand-in copies: each takes 1 ms unless a test makes it misbehave."""

    def __init__(self, tf, devices, config, misbehave):
        super().__init__(tf, devices, "CPU", config)
        self.misbehave = misbehave
        self.release = threading.Event()

    def _copy_seconds(self, kind, a, b, size_bytes, cancel):
        self.misbehave(self, kind, a, b, size_bytes, cancel)
        self.copy_seconds_total += 0.001 * self.config.repeat
        self.copy_calls_total += self.config.repeat
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


def test_a_run_reports_only_its_own_copies(tf, four):
    """``copy_seconds_total`` / ``copy_calls_total`` of a result are that run's, even with a bench
    (and its running totals) used before: 12 pairs one way, 6 both ways, 12 latency, 2 calls each."""
    config = BenchConfig(sizes_bytes=[MIB], repeat=2, warmup=0)
    bench = _StandIn(tf, four, config, lambda *args: None)
    for _ in range(2):
        result = run_benchmark(tf, four, "CPU", config, bench=bench)
        assert result.copy_calls_total == 30 * 2
        assert result.copy_seconds_total == pytest.approx(30 * 2 * 0.001)
        data = result.to_dict()
        assert data["copy_calls_total"] == 60 and data["copy_seconds_total"] == result.copy_seconds_total


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
