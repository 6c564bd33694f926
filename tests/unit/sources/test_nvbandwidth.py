"""nvbandwidth text and -j JSON on real captures: tests, directions (-> / <-), bidirectional totals,
host matrices left out, waived tests, cut pastes."""

import json

import pytest

from gputopo.errors import InputError
from gputopo.sources import nvbandwidth, nvbandwidth_json
from unit.sources.readers_corpus import cases, directed_gbps, pair, text_of


def _read(name):
    text = text_of("nvbandwidth", name)
    module = nvbandwidth_json if name.endswith(".json") else nvbandwidth
    assert module.sniff(text)
    other = nvbandwidth if module is nvbandwidth_json else nvbandwidth_json
    assert not other.sniff(text)
    return module.read(text, name)


@pytest.mark.parametrize(("name", "want"), cases("nvbandwidth"))
def test_real_captures_read_as_the_expert_reads_them(name, want):
    topo = _read(name)
    if want["gpus"] is not None:
        assert len(topo.gpus) == want["gpus"]
    for index, gpu_name in want.get("names", {}).items():
        assert topo.gpu(int(index)).name == gpu_name
    for key, gbps in want.get("gbps", {}).items():
        assert directed_gbps(topo, *pair(key, "->")) == pytest.approx(gbps)
        assert topo.link(*pair(key, "->")).measured.test == want["test"]
    for key, gbps in want.get("bidirectional_total_gbps", {}).items():
        assert topo.link(*pair(key, "-")).measured.bidirectional_gbps == pytest.approx(gbps)
    if want.get("pairs_measured") == 0:
        assert not any(link.measured for link in topo.links)
        assert any(n.code == "no-pair-measured" for n in topo.reading_notes)


def test_the_two_groups_of_the_a6000_box_stand_out():
    topo = _read("nvbandwidth_issue50_6x_a6000_read_ce_pcie.txt")
    within = [directed_gbps(topo, a, b) for a, b in ((0, 1), (1, 2), (3, 4), (4, 5))]
    across = [directed_gbps(topo, a, b) for a, b in ((0, 3), (1, 4), (2, 5), (5, 0))]
    assert min(within) > 26 > 23 > max(across)


def _json_doc(rows, description="memcpy CE GPU(row) <- GPU(column) bandwidth (GB/s)", name="device_to_device_memcpy_write_ce"):
    return {"nvbandwidth": {"CUDA Runtime Version": 13000, "Driver Version": "580.105.08",
                            "GPU Device list": ["0: NVIDIA GB200 (00000008:06:00): (n1)", "1: NVIDIA GB200 (00000009:06:00): (n1)"],
                            "testcases": [{"bandwidth_description": description, "bandwidth_matrix": rows,
                                           "name": name, "status": "Passed", "sum": 1.0},
                                          {"name": "device_to_device_memcpy_read_ce", "status": "Waived"}]}}


def test_json_reads_bus_ids_and_the_arrow_and_skips_lines_around_the_object():
    text = "WARNING: something {\n" + json.dumps(_json_doc([["N/A", "700.5"], ["690.0", "N/A"]]), indent=2) + "\ntrailing }\n"
    topo = nvbandwidth_json.read(text, "j")
    assert [g.pci_bus_id for g in topo.gpus] == ["0008:06:00.0", "0009:06:00.0"]
    assert directed_gbps(topo, 1, 0) == 700.5 and directed_gbps(topo, 0, 1) == 690.0


@pytest.mark.parametrize("bad", ['{"nvbandwidth": {"testcases": [', '{"nvbandwidth": [1, 2]}'])
def test_cut_or_wrong_json_is_one_input_error(bad):
    with pytest.raises(InputError):
        nvbandwidth_json.read(bad, "bad")


def test_host_device_matrices_are_not_gpu_pairs():
    text = text_of("nvbandwidth", "dell_7gpu_v010_full_run_ce_tests.txt")
    host_only = text.split("Running device_to_device_memcpy_read_ce.")[0]
    topo = nvbandwidth.read(host_only, "h")
    assert len(topo.gpus) == 7 and not any(link.measured for link in topo.links)


def test_deep_or_cut_json_is_one_whole_line():
    """Review finding: 100k-deep JSON gave a Python error text cut mid-word."""
    import pytest

    from gputopo.errors import InputError
    from gputopo.sources.nvbandwidth_json import read

    with pytest.raises(InputError, match="nested too deeply to be nvbandwidth's$"):
        read('{"nvbandwidth": ' + "[" * 100_000 + "]" * 100_000 + "}", "deep.json")
    with pytest.raises(InputError, match=r"cut or damaged \(Expecting ',' delimiter at line 1\)$"):
        read('{"nvbandwidth": {"x": [1,2', "cut.json")
