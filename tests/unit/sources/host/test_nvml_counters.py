"""The counter reader over the Python fake of pynvml, with a clock the test steps."""

from __future__ import annotations

import pytest
from fake_nvml import FakeNvml

from gputopo.sources.host.nvml_counters import NO_LINK, OK, PEER_GPU, PEER_SWITCH, UNSUPPORTED, CounterReader
from gputopo.sources.reference import load_reference


class Clock:
    def __init__(self) -> None:
        self.now_s = 1_000.0

    def __call__(self) -> float:
        return self.now_s


def open_reader(machine: str, counters: dict, **knobs) -> tuple[CounterReader, Clock]:
    clock = Clock()
    reader = CounterReader(FakeNvml(load_reference(machine), counters={"gpus": counters}, clock=clock, **knobs))
    reader.open()
    return reader, clock


def test_dgx1_links_name_their_peer_gpus():
    reader, _ = open_reader("dgx1", {})
    gpu0 = reader.gpus[0]
    assert gpu0.nvlink_version is not None and gpu0.links
    assert all(link.peer_kind == PEER_GPU for link in gpu0.links)
    assert {link.peer_gpu for link in gpu0.links} == {1, 2, 3, 4}  # DGX-1V hybrid cube mesh
    reader.close()


def test_nvswitch_links_end_at_a_switch():
    reader, _ = open_reader("dgx-h100", {})
    assert {link.peer_kind for link in reader.gpus[0].links} == {PEER_SWITCH}
    assert len(reader.gpus[0].links) == 18
    reader.close()


def test_counters_are_cumulative_from_init_with_timestamps():
    reader, clock = open_reader("dgx-h100", {"0": {"nvlink_tx_bytes_per_s": {"3": 25e9}, "pcie_rx_bytes_per_s": 1e9}})
    clock.now_s += 2.0
    sample = reader.sample()[0]
    tx = sample.counters[("nvlink_tx_kib", 3)]
    assert tx.status == OK and tx.value == int(25e9 * 2 / 1024)
    assert tx.timestamp_us == int(clock.now_s * 1e6)
    assert sample.counters[("pcie_rx_bytes", NO_LINK)].value == int(2e9)
    assert sample.counters[("nvlink_tx_kib", 0)].value == 0
    reader.close()


def test_an_unsupported_group_is_not_a_zero():
    reader, _ = open_reader("dgx-h100", {"0": {"unsupported": ["nvlink_throughput"]}})
    sample = reader.sample()[0]
    assert sample.counters[("nvlink_tx_kib", 0)].status == UNSUPPORTED
    assert sample.counters[("pcie_tx_bytes", NO_LINK)].status == OK
    reader.close()


def test_a_driver_without_field_values_reads_nothing_but_the_pcie_sample():
    reader, _ = open_reader("dgx1", {}, missing=["nvmlDeviceGetFieldValues"])
    sample = reader.sample()[0]
    sampled = {key for key in sample.counters if key[0].endswith("_kib_per_s")}
    assert {c.status for key, c in sample.counters.items() if key not in sampled} == {UNSUPPORTED}
    assert {c.status for key, c in sample.counters.items() if key in sampled} == {OK}
    reader.close()
    reader, _ = open_reader("dgx1", {}, missing=["nvmlDeviceGetFieldValues", "nvmlDeviceGetPcieThroughput"])
    assert {c.status for c in reader.sample()[0].counters.values()} == {UNSUPPORTED}
    reader.close()


@pytest.mark.parametrize("machine", ["pcie-8gpu"])
def test_gpus_without_nvlink_have_pcie_counters_only(machine):
    reader, _ = open_reader(machine, {})
    assert reader.gpus[0].links == ()
    assert {name for name, _ in reader.sample()[0].counters} == {"pcie_tx_bytes", "pcie_rx_bytes", "pcie_replay"}
    reader.close()


def test_pcie_fallback_where_the_byte_counters_are_not_supported():
    counters = {"0": {"pcie_tx_bytes_per_s": 4 * 1024 ** 2 * 1000, "unsupported": ["pcie_count"]},
                "1": {"unsupported": ["pcie_count", "pcie_throughput"]}}
    reader, _ = open_reader("dgx-h100", counters)
    first = reader.sample()
    assert first[0].counters[("pcie_tx_bytes", NO_LINK)].status == UNSUPPORTED
    assert first[0].counters[("pcie_tx_kib_per_s", NO_LINK)].value == 4 * 1024 * 1000
    assert first[1].counters[("pcie_tx_kib_per_s", NO_LINK)].status == UNSUPPORTED
    assert ("pcie_tx_kib_per_s", NO_LINK) not in first[2].counters  # the byte counters answered
    asked = reader.nvml.module.calls.count("nvmlDeviceGetPcieThroughput")
    reader.sample()  # GPU 1 is not asked again; GPU 0 is, twice
    assert reader.nvml.module.calls.count("nvmlDeviceGetPcieThroughput") == asked + 2
    reader.close()


def test_down_links_are_kept_apart():
    reader, _ = open_reader("dgx-h100", {}, inactive_links={0: 2})
    assert reader.gpus[0].down_links and len(reader.gpus[0].links) + len(reader.gpus[0].down_links) == 18
    reader.close()
