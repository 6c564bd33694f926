"""nvbandwidth text and -j JSON on real captures: tests, directions (-> / <-), bidirectional totals,
host matrices left out, waived tests, cut pastes."""

import json

import pytest

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import InputError
from gputopo.sources.tools import nvbandwidth, nvbandwidth_json
from unit.sources.readers_corpus import DRESSINGS, cases, directed_gbps, dressed_cases, pair, reading, text_of


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
        (note,) = [n for n in topo.reading_notes if n.code == "no-pair-measured"]
        assert bool(note.facts.get("cut_before_d2d")) is want.get("cut_before_d2d", False)
        if want.get("cut_before_d2d"):  # never a reason the text lacks
            assert "waived" not in note_findings([note])[0].message


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
    from gputopo.sources.tools.nvbandwidth_json import read

    with pytest.raises(InputError, match="nested too deeply to be nvbandwidth's$"):
        read('{"nvbandwidth": ' + "[" * 100_000 + "]" * 100_000 + "}", "deep.json")
    with pytest.raises(InputError, match=r"cut or damaged \(Expecting ',' delimiter at line 1\)$"):
        read('{"nvbandwidth": {"x": [1,2', "cut.json")


def test_a_run_without_a_matrix_is_still_nvbandwidth_and_says_why_no_pair_was_measured():
    """nvbandwidth#13: two 2080 Ti, the D2D test waived (its peer mapping failed): no matrix at all."""
    topo = _read("nvbandwidth13_2x_rtx2080ti_write_ce_waived_prompt.txt")
    (note,) = [f for f in note_findings(topo.reading_notes) if f.code == "no-pair-measured"]
    assert note.severity == "warning" and note.gpus == [0, 1]
    assert "waived device_to_device_memcpy_write_ce" in note.message and "these 2 GPUs could not peer" in note.message


def test_wrong_bytes_stop_the_run_and_are_said_before_anything_else():
    """nvbandwidth#34: 8x A100, read_ce stopped by its pattern check: a copy delivered wrong data."""
    topo = _read("nvbandwidth34_8x_a100_sxm_read_ce_pattern_assert.txt")
    assert [g.pci_bus_id for g in topo.gpus][:2] == ["0000:34:00.0", "0000:35:00.0"]
    (wrong,) = [f for f in note_findings(topo.reading_notes) if f.code == "nvbandwidth-wrong-data"]
    assert wrong.severity == "warning" and "stopped in device_to_device_memcpy_read_ce" in wrong.message
    assert "delivered wrong data" in wrong.message and wrong.gpus == list(range(8))
    (none,) = [f for f in note_findings(topo.reading_notes) if f.code == "no-pair-measured"]
    assert none.severity == "info" and "stopped at its byte check" in none.message and none.fix is None


def test_the_version_line_alone_is_not_taken_from_a_json_document():
    assert not nvbandwidth.sniff('{"nvbandwidth": {"version": "v0.7"}}\nnvbandwidth Version: v0.7\n')
    assert nvbandwidth.sniff("nvbandwidth Version: v0.8\nBuilt from Git version: v0.8\n")


def test_wrong_bytes_in_a_host_copy_are_not_called_a_gpu_to_gpu_copy():
    """nvbandwidth#34 with its Running line made host_to_device_memcpy_ce (derived): the bytes a
    host-to-GPU copy delivered were wrong; nothing says a GPU-to-GPU copy was."""
    text = text_of("nvbandwidth", "nvbandwidth34_8x_a100_sxm_read_ce_pattern_assert.txt").replace("Running device_to_device_memcpy_read_ce.", "Running host_to_device_memcpy_ce.")
    (wrong,) = [f for f in note_findings(nvbandwidth.read(text, "h").reading_notes) if f.code == "nvbandwidth-wrong-data"]
    assert "stopped in host_to_device_memcpy_ce" in wrong.message and "GPU-to-GPU" not in wrong.message
    assert "P2P" not in wrong.fix


def test_a_json_number_of_thousands_of_digits_is_one_input_error_not_a_value_error():
    """``json`` refuses an integer of more than 4300 digits with a ValueError (not a JSONDecodeError)."""
    with pytest.raises(InputError, match="thousands of digits"):
        nvbandwidth_json.read('{"nvbandwidth": {"testcases": [' + "7" * 5000 + "]}}", "digits.json")


def test_a_device_line_is_read_to_the_shared_line_width_only():
    """The name of a ``Device N:`` line runs to its end; past ``LINE_CAP_CHARS`` nothing is read."""
    from gputopo.sources.pasted import LINE_CAP_CHARS

    def device_line(name: str) -> str:
        return f"nvbandwidth Version: v0.7\nDevice 0: {name} (00000000:1b:00)   \n"

    assert nvbandwidth.read(device_line("NVIDIA H100"), "s").gpu(0).pci_bus_id == "0000:1b:00.0"
    assert nvbandwidth.read(device_line("NVIDIA H100"), "s").gpu(0).name == "NVIDIA H100"
    assert nvbandwidth.read(device_line("A  (not a bus id)"), "s").gpu(0).name == "A  (not a bus id)"
    cut = nvbandwidth.read(device_line("x" * LINE_CAP_CHARS), "s").gpu(0)
    assert cut.pci_bus_id is None and cut.name == "x" * 200


@pytest.mark.parametrize(("name", "dressing"), dressed_cases("nvbandwidth"))
def test_every_real_capture_reads_the_same_under_a_pastes_dressing(name, dressing):
    """The capture as users paste it (CRLF, tabs, a prompt, a fence, a quote, bold, a host prefix, long
    lines cut): the reader makes of it what it makes of the capture itself."""
    text = text_of("nvbandwidth", name)
    assert reading(_read_text(DRESSINGS[dressing](text), name)) == reading(_read_text(text, name))


def _read_text(text, name):
    module = nvbandwidth_json if name.endswith(".json") else nvbandwidth
    return module.read(text, name)


def test_an_output_cut_before_any_device_to_device_test_gives_no_reason_it_does_not_show():
    """NVIDIA/nvbandwidth#15: host tests only, then the paste ends: nothing was waived, so the note says
    the output ends before the GPU-to-GPU tests, never that they were waived or that there is one GPU."""
    topo = _read("nvbandwidth15_8x_rtx4090_v02_host_tests_only_cut_before_d2d.txt")
    (finding,) = [f for f in note_findings(topo.reading_notes) if f.code == "no-pair-measured"]
    assert "ends before any device-to-device test" in finding.message and "waived" not in finding.message
    waived = "Device 0: A\nDevice 1: B\n\nRunning host_to_device_memcpy_ce.\nWaiving device_to_device_memcpy_read_ce.\n"
    (finding,) = [f for f in note_findings(nvbandwidth.read(waived, "w").reading_notes) if f.code == "no-pair-measured"]
    assert "waived device_to_device_memcpy_read_ce" in finding.message
