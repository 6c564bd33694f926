"""The recorder `train --watch` runs beside training: intervals through the fake NVML, or one reason."""

from __future__ import annotations

from fake_nvml import FakeNvml

from gputopo.errors import NvmlUnavailable
from gputopo.sources.host import nvml_counters
from gputopo.sources.reference import load_reference
from gputopo.train.launch.watching import TrainWatch


def test_records_intervals_and_a_last_one_at_stop(monkeypatch):
    counters = {"gpus": {"0": {"nvlink_tx_bytes_per_s": {"0": 10e9}}}}
    monkeypatch.setattr(nvml_counters, "reader",
                        lambda: nvml_counters.CounterReader(FakeNvml(load_reference("dgx1"), counters=counters)))
    frames = []
    recorder = TrainWatch(frames.append, interval_s=3600)
    assert recorder.start() is None
    recorder.stop()
    assert len(frames) == recorder.summary.frames == 1 and recorder.reason is None
    assert len(recorder.gpus) == 8 and recorder._reader is None


def test_no_nvml_is_one_reason_and_nothing_recorded(monkeypatch):
    def no_nvml():
        raise NvmlUnavailable("cannot read this host's GPUs through NVML: no driver")

    monkeypatch.setattr(nvml_counters, "reader", no_nvml)
    recorder = TrainWatch(lambda frame: None)
    assert recorder.start() == "link traffic not recorded: cannot read this host's GPUs through NVML: no driver"
    recorder.stop()
    assert recorder.summary.frames == 0 and recorder.gpus == []


def test_a_write_that_fails_stops_recording_not_training(monkeypatch):
    monkeypatch.setattr(nvml_counters, "reader",
                        lambda: nvml_counters.CounterReader(FakeNvml(load_reference("dgx1"))))

    def full(frame):
        raise OSError(28, "No space left on device")

    recorder = TrainWatch(full, interval_s=3600)
    recorder.start()
    recorder.stop()
    assert "recording stopped" in recorder.reason and recorder._reader is None
