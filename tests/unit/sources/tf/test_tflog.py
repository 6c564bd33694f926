"""TensorFlow logs of every era -> TfView; TfView -> Topology; `scan --tf-log` (`scan --tf`: test_sources_tf_init)."""

from __future__ import annotations

import io
import json
import re
import sys
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, TF_LOG_FIXTURES, assert_one_error_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.sources.tf.tflog import (
    ERA_TF0,
    ERA_TF12,
    ERA_TF15,
    ERA_TF25,
    ERA_TF_ABSL,
    parse_tf_log,
    read_tf_log,
    topology_from_tf_view,
)

OWN_LOGS = OWN_FIXTURES / "tf_logs"


def expected_from_log(path: Path) -> dict:
    """An independent reading of a shared excerpt: denied pairs, DMA rows, device bus ids."""
    text = path.read_text()
    denied = {
        (int(a), int(b))
        for a, b in re.findall(r"(?:from device ordinal|between device ordinals) (\d+) (?:to device ordinal|and) (\d+)", text)
    }
    header = re.search(r"DMA: ([\d ]+)", text)
    columns = [int(c) for c in header.group(1).split()] if header else []
    rows = {int(r): v.split() for r, v in re.findall(r"\] (\d+):\s+([YN ]+?)\s*$", text, re.M)}
    bus = {int(d): b for d, b in re.findall(r"device: (\d+), name: [^,]+, pci bus id: ([0-9a-f:.]+)", text)}
    ordinals = set(columns) | set(rows) | set(bus) | {o for pair in denied for o in pair}
    return {"denied": denied, "columns": columns, "rows": rows, "bus": bus, "ordinals": ordinals}


@pytest.mark.parametrize("path", TF_LOG_FIXTURES, ids=lambda p: p.name)
def test_every_shared_log_gives_the_peer_matrix_ordinals_and_bus_ids_it_holds(path):
    assert TF_LOG_FIXTURES, "shared fixtures missing"
    expected = expected_from_log(path)
    view = parse_tf_log(path.read_text(), str(path))
    assert [d.ordinal for d in view.devices] == sorted(expected["ordinals"])
    assert len(view.peer) == max(expected["ordinals"]) + 1
    assert {d.ordinal: d.pci_bus_id for d in view.devices if d.pci_bus_id} == expected["bus"]
    for i in expected["ordinals"]:
        for j in expected["ordinals"]:
            if i == j:
                want = True
            elif (i, j) in expected["denied"]:
                want = False
            elif i in expected["rows"] and j in expected["columns"]:
                want = expected["rows"][i][expected["columns"].index(j)] == "Y"
            else:
                want = None
            assert view.peer[i][j] is want, (i, j)


def test_shared_logs_eras_and_the_cut_excerpt_is_reported():
    by_name = {p.name: parse_tf_log(p.read_text(), p.name) for p in TF_LOG_FIXTURES}
    assert by_name["tf0_gpu_init_cannot_enable_peer_4gpu.log"].era == ERA_TF0
    tf1 = by_name["tf1_peer_access_not_supported_4gpu.log"]
    assert tf1.era == ERA_TF12
    assert tf1.peer[2][3] is None and tf1.peer[0][2] is False  # 0->2 from the matrix row only
    assert [n.code for n in tf1.reading_notes] == ["tf-log-cut"]
    assert tf1.reading_notes[0].facts["cuts"] == [{"cut": "matrix-rows", "line": 8, "gpus": [2, 3]}]  # no rows for GPU 2, 3
    tf2 = by_name["tf2_created_device_4gpu_3090.log"]
    assert tf2.era == ERA_TF25
    assert [d.memory_mb for d in tf2.devices] == [16045, 22298, 22298, 22298]  # lines were out of order
    assert {d.compute_capability for d in tf2.devices} == {"8.6"}
    assert tf2.devices[0].name == "NVIDIA GeForce RTX 3090"


def test_tf15_edge_matrix_found_device_and_visible_devices():
    view = read_tf_log(str(OWN_LOGS / "tf15_edge_matrix_visible_order_differs.log"))
    assert view.era == ERA_TF15
    assert view.visible_ordinals == [0, 1, 2]
    # An edge matrix prints N on its diagonal; a device always reaches itself.
    assert view.peer == [[True, False, True], [False, True, False], [True, False, True]]
    assert [d.pci_bus_id for d in view.devices] == ["0000:82:00.0", "0000:02:00.0", "0000:83:00.0"]
    assert [d.memory_mb for d in view.devices] == [10415] * 3
    assert view.devices[1].compute_capability == "6.1"


def test_absl_prefixes_vlog_matrix_interleaved_output_and_trailing_spaces():
    view = read_tf_log(str(OWN_LOGS / "tf216_absl_vlog_interleaved.log"))
    assert view.era == ERA_TF_ABSL
    assert view.peer == [[True] * 3] * 3
    assert [d.pci_bus_id for d in view.devices] == ["0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0"]
    assert view.devices[0].compute_capability == "9.0" and view.devices[0].name == "NVIDIA H100 80GB HBM3"
    assert view.reading_notes == []


def test_tf0_creating_device_and_multiline_found_device():
    view = read_tf_log(str(OWN_LOGS / "tf0_creating_device_found_properties.log"))
    assert view.era == ERA_TF0
    assert [(d.name, d.pci_bus_id, d.compute_capability) for d in view.devices] == [
        ("GeForce GTX TITAN X", "0000:02:00.0", "5.2"),
        ("GeForce GTX TITAN X", "0000:03:00.0", "5.2"),
    ]
    assert view.peer == [[True, True], [True, True]]


def test_cut_lines_and_missing_matrix_rows_use_what_is_there_and_report_the_rest():
    view = read_tf_log(str(OWN_LOGS / "broken_cut_lines_missing_rows.log"))
    assert [d.ordinal for d in view.devices] == [0, 1, 2, 3]
    assert view.devices[0].pci_bus_id == "0000:1a:00.0"
    assert view.devices[1].pci_bus_id is None  # "0000:1b:0" is cut: not guessed
    assert view.devices[1].name == "GeForce RTX 2080 Ti"
    assert view.devices[2].name is None  # "GeForce RT" is cut before its comma: not taken
    assert view.peer[0] == [True, True, False, False]
    assert view.peer[1] == [True, True, None, None]  # the row has 2 of 4 entries
    assert view.peer[3] == [None, None, None, True]
    (note,) = view.reading_notes  # every cut place in one note (in words: tests/unit/analysis/notes/test_reading_notes.py)
    assert note.code == "tf-log-cut"
    places = [(cut["cut"], cut.get("line"), cut.get("gpu", cut.get("gpus"))) for cut in note.facts["cuts"]]
    assert places[:5] == [("bus-id", 8, 1), ("before-bus-id", 9, 2), ("created-line", 10, None),
                          ("matrix-row", None, 1), ("matrix-rows", 3, [2, 3])]


def test_contradiction_between_peer_line_and_matrix_takes_no_peer():
    text = (
        "I gpu_init.cc:59] cannot enable peer access from device ordinal 0 to device ordinal 1\n"
        "I gpu_init.cc:126] DMA: 0 1\nI gpu_init.cc:136] 0:   Y Y\nI gpu_init.cc:136] 1:   Y Y\n"
    )
    view = parse_tf_log(text, "log")
    assert view.peer[0][1] is False and view.peer[1][0] is True
    assert [(n.code, n.facts, n.gpus) for n in view.reading_notes] == [
        ("tf-log-contradiction", {"source": "log", "line": 1, "from": 0, "to": 1}, [0, 1])]


def test_matrix_without_header_line_reads_columns_as_ordinals():
    text = "Device interconnect StreamExecutor with strength 1 edge matrix:\n0:   N Y\n1:   Y N\n"
    view = parse_tf_log(text, "log")
    assert view.peer == [[True, True], [True, True]]
    assert view.reading_notes[0].facts["cuts"] == [{"cut": "matrix-header", "line": 1, "columns": [0, 1]}]  # no header line


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "has no GPU lines"),
        ("Epoch 1/10\nloss: 0.3\n", "has no GPU lines"),
        ("2022-07-12 14:35:39.302759: I tensorflow/core/common_runtime/gpu/gpu_dev", "has no GPU lines"),
        ("I gpu_init.cc:59] \x00\x01 cannot enable", "is binary"),
        # NCCL lines that name no GPU and no rank (no thread prefix: no CUDA device); tflog_nccl reads those that do
        ("NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>\nNCCL INFO Using network Socket\n", "name no GPU and no rank"),
    ],
)
def test_logs_without_gpu_lines_are_one_line_input_errors(text, expected):
    with pytest.raises(InputError) as info:
        parse_tf_log(text, "train.log")
    assert expected in str(info.value) and "\n" not in str(info.value)


def test_implausible_ordinal_from_a_damaged_line_is_ignored_not_allocated():
    text = (
        "cannot enable peer access from device ordinal 0 to device ordinal 1\n"
        "cannot enable peer access from device ordinal 0 to device ordinal 98765432\n"
    )
    view = parse_tf_log(text, "log")
    assert len(view.peer) == 2 and view.peer[0][1] is False
    assert view.reading_notes[0].facts["cuts"] == [{"cut": "implausible-ordinal", "ordinal": 98765432}]  # not plausible


def test_read_tf_log_from_standard_input(monkeypatch):
    data = (OWN_LOGS / "tf0_creating_device_found_properties.log").read_bytes()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    view = read_tf_log("-")
    assert view.source == "standard input" and len(view.devices) == 2


_ALL_LOGS = [p.read_text() for p in TF_LOG_FIXTURES + sorted(OWN_LOGS.glob("*.log"))]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    log=st.sampled_from(_ALL_LOGS),
    cut_at=st.floats(min_value=0, max_value=1),
    drop=st.lists(st.integers(min_value=0, max_value=40), max_size=4),
    noise=st.text(max_size=30),
)
def test_cut_or_damaged_logs_never_crash(log, cut_at, drop, noise):
    """Any prefix of a real log, with lines dropped and noise inserted, gives a view or an InputError."""
    lines = log[: int(len(log) * cut_at)].splitlines()
    lines = [line for i, line in enumerate(lines) if i not in drop]
    lines.insert(len(lines) // 2, noise)
    try:
        view = parse_tf_log("\n".join(lines), "fuzz")
    except InputError:
        return
    size = len(view.peer)
    assert all(len(row) == size for row in view.peer)
    assert all(d.ordinal < size for d in view.devices)
    topology_from_tf_view(view).validate()


# --- a log alone as a topology -----------------------------------------------------------------


def test_topology_from_a_log_alone():
    path = next(p for p in TF_LOG_FIXTURES if p.name.startswith("tf1_"))
    view = parse_tf_log(path.read_text(), path.name)
    topology = topology_from_tf_view(view)
    topology.validate()
    assert topology.source == "tf-log" and topology.tf is view
    assert topology.gpu_indices == [0, 1, 2, 3]
    assert {link.type for link in topology.links} == {"UNKNOWN"}
    words = {(l.a, l.b): (l.p2p_read, l.p2p_write) for l in topology.links}
    # TF reports peer access, never write capability (issue 24)
    assert words[(0, 1)] == ("ok", None)
    assert words[(0, 2)] == ("NS", None) and words[(1, 3)] == ("NS", None)
    assert words[(2, 3)] == (None, None)  # the excerpt is cut before saying
    again = Topology.from_dict(json.loads(json.dumps(topology.to_dict())))
    assert again.tf.peer == view.peer and again.tf.reading_notes == view.reading_notes and view.reading_notes


def test_topology_from_log_keeps_device_facts():
    path = next(p for p in TF_LOG_FIXTURES if p.name.startswith("tf2_"))
    topology = topology_from_tf_view(parse_tf_log(path.read_text(), path.name))
    assert topology.gpus[2].pci_bus_id == "0000:9b:00.0"
    # What TF allocated is not the GPU's memory (issue 24): the view keeps it, the GPU's stays unknown.
    assert topology.gpus[0].memory_total_bytes is None
    assert topology.tf.devices[0].memory_mb == 16045
    assert all(l.p2p_read is None for l in topology.links)


# --- CLI ---------------------------------------------------------------------------------------


def test_cli_scan_tf_log_json_carries_the_tf_view(cli):
    path = next(p for p in TF_LOG_FIXTURES if p.name.startswith("tf0_"))
    result = cli("scan", "--tf-log", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["source"] == "tf-log"
    assert [d["ordinal"] for d in data["tf"]["devices"]] == [0, 1, 2, 3]
    assert data["tf"]["peer"][0] == [True, True, False, False]
    assert data["tf"]["peer"][3] == [False, False, True, True]
    groups = [f for f in data["diagnostics"] if f["code"] == "tf-peer-groups"]
    assert len(groups) == 1 and "within {0,1} or {2,3}" in groups[0]["message"]
    assert {"severity", "code", "message"} <= set(groups[0])


def test_cli_scan_tf_log_from_stdin_and_with_a_topology(cli):
    path = next(p for p in TF_LOG_FIXTURES if p.name.startswith("tf2_"))
    result = cli("scan", "--machine", "two-socket-4gpu", "--tf-log", "-", "--json", input=path.read_text())
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["source"] == "reference"
    assert data["tf"]["devices"][2]["pci_bus_id"] == "0000:9b:00.0"


def test_cli_scan_tf_log_table_shows_the_peer_groups(cli):
    path = next(p for p in TF_LOG_FIXTURES if p.name.startswith("tf0_"))
    result = cli("scan", "--tf-log", str(path))
    assert result.exit_code == 0, result.output
    assert "within {0,1} or {2,3}" in " ".join(result.output.split())


@pytest.mark.parametrize("content", ["just some text\n", ""])
def test_cli_scan_tf_log_garbage_is_one_error_line(cli, tmp_path, content):
    path = tmp_path / "train.log"
    path.write_text(content)
    assert_one_error_line(cli("scan", "--tf-log", str(path), "--json"))


def test_tf20_found_device_one_line_properties():
    text = (
        "2020-05-18 10:00:00.000001: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1561] Found device 1 "
        "with properties: \npciBusID: 0000:02:00.0 name: GeForce RTX 2080 Ti computeCapability: 7.5\n"
        "coreClock: 1.545GHz coreCount: 68 deviceMemorySize: 10.76GiB deviceMemoryBandwidth: 573.69GiB/s\n"
        "2020-05-18 10:00:00.000003: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1703] "
        "Adding visible gpu devices: 0, 1\n"
    )
    view = parse_tf_log(text, "log")
    assert view.visible_ordinals == [0, 1] and [d.ordinal for d in view.devices] == [0, 1]
    assert (view.devices[1].name, view.devices[1].pci_bus_id, view.devices[1].compute_capability) == (
        "GeForce RTX 2080 Ti", "0000:02:00.0", "7.5")
    assert view.devices[0].name is None


def test_a_headless_matrix_cut_inside_its_first_row_reads():
    """Found by the fuzz test above: a matrix without its header line, cut before any cell, has no
    column to name in its note (it crashed with an IndexError)."""
    log = (OWN_LOGS / "tf15_edge_matrix_no_header_4gpu_2080ti_cut.log").read_text()
    lines = log[: int(len(log) * 0.29296875)].splitlines()
    lines.insert(len(lines) // 2, "")
    try:
        view = parse_tf_log("\n".join(lines), "fuzz")
    except InputError:
        return
    assert all(len(row) == len(view.peer) for row in view.peer)


def test_a_windows_build_is_noted_by_its_source_paths_and_nothing_else():
    """TF's log prefix names its source file: a Windows build prints a drive letter and backslashes
    (``c:\\users\\...\\gpu_device.cc:832]``); a Linux path, a Windows path in a message, or no
    ``.cc:N]`` is no such note."""
    line = ("2018-03-14 11:33:47.378713: I {path}gpu_device.cc:832] Peer access not supported between device "
            "ordinals 1 and 0\n")
    windows = parse_tf_log("noise\n" + line.format(path="c:\\users\\u\\bin\\tensorflow\\core\\common_runtime\\gpu\\"), "w")
    assert [(n.code, n.facts) for n in windows.reading_notes if n.code == "tf-log-windows"] == [("tf-log-windows", {"line": 2})]
    dressed = parse_tf_log("> " + line.format(path="T:\\src\\github\\tensorflow\\tensorflow\\core\\").replace("\n", "\r\n"), "w")
    assert any(n.code == "tf-log-windows" for n in dressed.reading_notes)
    for path in ("tensorflow/core/common_runtime/gpu/", "/home/u/tf/"):
        assert not any(n.code == "tf-log-windows" for n in parse_tf_log(line.format(path=path), "l").reading_notes)
    data_path = line.format(path="tensorflow/core/") + "loading C:\\data\\images\\train.tfrecord\n"
    assert not any(n.code == "tf-log-windows" for n in parse_tf_log(data_path, "l").reading_notes)
