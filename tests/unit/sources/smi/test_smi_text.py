"""`nvidia-smi topo -m` / `topo -p2p` text -> Topology, on the shared captures and our own cases."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, TOPO_FIXTURES, assert_one_error_line
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputopo.errors import InputError
from gputopo.model import MAX_NVLINKS_PER_PAIR
from gputopo.notation import parse_cpu_list
from gputopo.sources.smi.smi_text import parse_topo_matrix

OWN_TOPO = OWN_FIXTURES / "topo"
_WORD_RE = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC)$")


def expected_from_file(path: Path) -> dict:
    """An independent, deliberately simple reading of a capture: the GPU rows, their link words
    (by position, SOC as SYS) and their CPU/NUMA affinity, taken straight from the file's tokens."""
    lines = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text()).splitlines()
    header_index = next(i for i, line in enumerate(lines) if line.split()[:1] == ["GPU0"])
    header = lines[header_index]
    gpu_count = len(re.findall(r"\bGPU\d+\b", header))
    device_count = gpu_count + len(re.findall(r"\b(?:mlx\d+_\d+|NIC\d+)\b", header))
    has_numa = "NUMA Affinity" in header
    has_cpu = "CPU Affinity" in header
    rows = {}
    for line in lines[header_index + 1 :]:
        tokens = line.split()
        if not tokens or not re.fullmatch(r"GPU\d+", tokens[0]):
            if tokens and tokens[0].startswith(("mlx", "NIC")):
                continue
            break
        words = [("SYS" if t == "SOC" else t) for t in tokens[1 : 1 + gpu_count]]
        extra = tokens[1 + device_count :]
        rows[int(tokens[0][3:])] = {
            "words": words,
            "cpu": extra[0] if has_cpu else None,
            "numa": extra[1] if has_numa else None,
        }
    return {"gpu_count": gpu_count, "rows": rows}


def _check_against_file(topology, path: Path) -> None:
    expected = expected_from_file(path)
    assert len(topology.gpus) == expected["gpu_count"]
    assert topology.source == "nvidia-smi"
    for gpu in topology.gpus:
        row = expected["rows"][gpu.index]
        if row["cpu"] is not None:
            assert parse_cpu_list(gpu.cpu_affinity) == parse_cpu_list(row["cpu"])
        if row["numa"] is not None:
            assert gpu.numa_node == (None if row["numa"] == "N/A" else int(row["numa"]))
        for other, word in enumerate(row["words"]):
            assert _WORD_RE.match(word), word
            if other == gpu.index:
                assert word == "X"
                continue
            link = topology.link(gpu.index, other)
            assert link.type == word
            assert link.nvlink_count == (int(word[2:]) if word.startswith("NV") else 0)


@pytest.mark.parametrize("path", TOPO_FIXTURES, ids=lambda p: p.name)
def test_every_shared_capture_parses_to_what_the_file_says(path):
    assert TOPO_FIXTURES, "shared fixtures missing"
    topology = parse_topo_matrix(path.read_text(), source=str(path))
    _check_against_file(topology, path)
    assert topology.source_detail == str(path)
    topology.validate()
    assert len(topology.links) == len(topology.gpus) * (len(topology.gpus) - 1) // 2
    assert not [n for n in topology.reading_notes if n.code == "asymmetric-matrix"]


@pytest.mark.parametrize(
    "name",
    ["spaces_nicn_legend_gpu_numa_id.txt", "raw_tabs_double_tab_gpu_numa_id.txt", "old_soc_legend_4gpu.txt",
     "with_p2p_matrices.txt", "ansi_underlined_header_nv12_nics.txt"],
)
def test_own_captures_parse_to_what_the_file_says(name):
    path = OWN_TOPO / name
    _check_against_file(parse_topo_matrix(path.read_text(), source=name), path)


def test_dgx1_nic_column_and_affinities():
    path = next(p for p in TOPO_FIXTURES if p.name.startswith("dgx1"))
    topology = parse_topo_matrix(path.read_text(), source=path.name)
    assert [n.name for n in topology.nics] == ["mlx5_0"]
    paths = {link.gpu: link.type for link in topology.nic_links}
    assert paths == {0: "NODE", 1: "NODE", 2: "PIX", 3: "PIX", 4: "SYS", 5: "SYS", 6: "SYS", 7: "SYS"}
    assert topology.link(0, 3).type == "NV2" and topology.link(0, 3).nvlink_count == 2
    assert topology.link(0, 5).pcie_path == "SYS"


def test_power9_tabs_nic_rows_without_affinity_and_numa_8():
    path = next(p for p in TOPO_FIXTURES if p.name.startswith("power9"))
    topology = parse_topo_matrix(path.read_text(), source=path.name)
    assert [g.numa_node for g in topology.gpus] == [0, 0, 8, 8]
    assert [n.name for n in topology.nics] == ["mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3"]
    assert all(n.cpu_affinity is None and n.numa_node is None for n in topology.nics)
    nic_paths = {(link.gpu, link.nic): link.type for link in topology.nic_links}
    assert nic_paths[(0, "mlx5_0")] == "NODE" and nic_paths[(2, "mlx5_0")] == "SYS"
    assert nic_paths[(3, "mlx5_3")] == "NODE"


def test_spaces_nicn_legend_and_gpu_numa_id_column():
    topology = parse_topo_matrix((OWN_TOPO / "spaces_nicn_legend_gpu_numa_id.txt").read_text(), "pasted")
    assert len(topology.gpus) == 4
    assert all(link.type == "NV12" and link.nvlink_count == 12 for link in topology.links)
    assert {n.name: n.device for n in topology.nics} == {"NIC0": "mlx5_0", "NIC1": "mlx5_1"}
    assert [g.numa_node for g in topology.gpus] == [0, 0, 1, 1]  # NUMA Affinity, not GPU NUMA ID (N/A)
    assert topology.gpus[2].cpu_affinity == "32-63,96-127"
    assert {(l.gpu, l.nic): l.type for l in topology.nic_links}[(2, "NIC1")] == "PXB"


def test_raw_tabs_with_empty_cell_before_gpu_numa_id():
    topology = parse_topo_matrix((OWN_TOPO / "raw_tabs_double_tab_gpu_numa_id.txt").read_text(), "raw")
    assert [(g.cpu_affinity, g.numa_node) for g in topology.gpus] == [("0-15", 0), ("0-15", 0)]
    assert topology.nics[0].device == "mlx5_bond_0"
    assert topology.link(0, 1).type == "NV4"


def test_ansi_underlined_header_as_nvidia_smi_writes_it():
    """nvidia-smi underlines the header with ESC[4m ... ESC[0m, also into a file or a pipe."""
    path = OWN_TOPO / "ansi_underlined_header_nv12_nics.txt"
    assert "\x1b[4m" in path.read_text()
    topology = parse_topo_matrix(path.read_text(), path.name)
    assert topology.link(0, 1).type == "NV12"
    assert [(g.cpu_affinity, g.numa_node) for g in topology.gpus] == [("0-63", 0), ("64-127", 1)]
    assert {(l.gpu, l.nic): l.type for l in topology.nic_links} == {
        (0, "NIC0"): "PXB", (0, "NIC1"): "PXB", (1, "NIC0"): "SYS", (1, "NIC1"): "SYS"}
    p2p = "nvidia-smi topo -p2p r\n \t\x1b[4mGPU0\tGPU1\t\x1b[0m\n GPU0\tX\tOK\t\n GPU1\tOK\tX\t\n"
    assert parse_topo_matrix(path.read_text() + p2p, "both").link(0, 1).p2p_read == "ok"


def test_empty_cpu_affinity_cells_in_raw_tabs_stay_empty():
    """della-k17g3 (8x H100): nvidia-smi leaves CPU Affinity empty for GPUs 0-3 (``\t\t0\t\tN/A``).
    Split on whitespace, the NUMA node 0 became CPU Affinity "0" and NUMA Affinity N/A."""
    path = OWN_TOPO / "h100_nv18_empty_cpu_affinity_cells.txt"
    topology = parse_topo_matrix(path.read_text(), path.name)
    assert [(g.cpu_affinity, g.numa_node) for g in topology.gpus] == [(None, 0)] * 4 + [("1", 1)] * 4
    assert all(link.type == "NV18" for link in topology.links)
    assert [n.device for n in topology.nics] == [f"mlx5_{k}" for k in range(6)]
    assert {(l.gpu, l.nic): l.type for l in topology.nic_links}[(3, "NIC2")] == "PIX"
    # The same row copied with spaces instead of tabs keeps the old reading (the gap is lost).
    spaced = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0  X   NV18  0-7  0\nGPU1  NV18  X  0-7  0\n"
    assert [(g.cpu_affinity, g.numa_node) for g in parse_topo_matrix(spaced, "web").gpus] == [("0-7", 0)] * 2


def test_old_soc_word_reads_as_sys():
    topology = parse_topo_matrix((OWN_TOPO / "old_soc_legend_4gpu.txt").read_text(), "old")
    assert topology.link(0, 2).type == "SYS" and topology.link(0, 1).type == "PIX"
    assert all(g.numa_node is None for g in topology.gpus)  # no NUMA Affinity column in old output


def test_p2p_matrices_merge_into_links_by_capability():
    topology = parse_topo_matrix((OWN_TOPO / "with_p2p_matrices.txt").read_text(), "p2p")
    assert topology.link(0, 1).p2p_read == "ok"
    assert topology.link(0, 2).p2p_read == "TNS"
    assert topology.link(2, 3).p2p_read == "DR"
    assert all(link.p2p_atomics == "NS" for link in topology.links)
    assert all(link.p2p_write is None for link in topology.links)  # no `-p2p w` matrix given
    assert topology.link(0, 1).can_peer is True and topology.link(2, 3).can_peer is False
    assert not [n for n in topology.reading_notes if n.code == "p2p-capability-assumed"]


def test_p2p_matrix_without_command_line_is_read_as_read_and_said_so():
    text = (OWN_TOPO / "with_p2p_matrices.txt").read_text()
    text = text.replace("$ nvidia-smi topo -p2p r\n", "").split("$ nvidia-smi topo -p2p a")[0]
    topology = parse_topo_matrix(text, "p2p")
    assert topology.link(2, 3).p2p_read == "DR"
    assert [(n.code, n.facts) for n in topology.reading_notes] == [("p2p-capability-assumed", {"line": 14})]


def test_asymmetric_matrix_keeps_the_worse_word_and_says_so():
    topology = parse_topo_matrix((OWN_TOPO / "asymmetric.txt").read_text(), "asym")
    assert topology.link(0, 1).type == "NV1"  # NV1 vs NV2: fewer links is worse
    assert topology.link(0, 2).type == "SYS"  # PHB vs SYS
    assert topology.link(1, 2).type == "PHB"
    asym = [n for n in topology.reading_notes if n.code == "asymmetric-matrix"]
    assert sorted(n.gpus for n in asym) == [[0, 1], [0, 2]]
    assert asym[0].facts == {"from": "GPU0", "to": "GPU1", "forward": "NV1", "backward": "NV2", "kept": "NV1"}
    # (a warning: tests/unit/analysis/notes/test_reading_notes.py)


def test_single_gpu_matrix_has_no_links():
    text = "\tGPU0\tCPU Affinity\tNUMA Affinity\nGPU0\t X \t0-23\t\tN/A\n"
    topology = parse_topo_matrix(text, "one")
    assert len(topology.gpus) == 1 and topology.links == []
    assert topology.gpus[0].cpu_affinity == "0-23" and topology.gpus[0].numa_node is None


@pytest.mark.parametrize(
    "name, expected",
    [
        ("garbage.txt", r"expected `nvidia-smi topo -m` output .*found 6 non-blank lines starting with 'Hi all"),
        ("unknown_word.txt", r"unknown link word 'FAST' between GPU0 and GPU1"),
    ],
)
def test_broken_text_is_one_clear_input_error(name, expected):
    with pytest.raises(InputError) as info:
        parse_topo_matrix((OWN_TOPO / name).read_text(), name)
    message = str(info.value)
    assert "\n" not in message
    assert re.search(expected, message), message
    assert message.startswith(name)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "found only blank lines"),
        ("\n  \n\t\n", "found only blank lines"),
        ("GPU0\x00\x01\x02binary", "is binary"),
        ("".join(chr(1 + i % 31) for i in range(400)), "looks binary"),
        ("\tGPU0\tGPU1\n", "rows were found only for none"),
        # Rows without a header are read (test_rows_without_header_...), but not from GPU1 on.
        ("GPU1\tNV1\t X \nGPU2\t X \tNV1\n", "expected `nvidia-smi topo -m` output (a header line"),
        ("\tGPU0\tGPU1\nGPU0\tX\tOK\nGPU1\tOK\tX\n", "found only a `nvidia-smi topo -p2p` matrix"),
    ],
)
def test_empty_binary_and_header_only_inputs(text, expected):
    with pytest.raises(InputError, match=re.escape(expected)):
        parse_topo_matrix(text, "input")


# --- CLI ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", TOPO_FIXTURES + [OWN_TOPO / "spaces_nicn_legend_gpu_numa_id.txt"], ids=lambda p: p.name)
def test_cli_scan_from_capture_json(cli, path):
    result = cli("scan", "--from", str(path), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == "gputopo.topology/1" and data["source"] == "nvidia-smi"
    expected = expected_from_file(path)
    assert len(data["gpus"]) == expected["gpu_count"]
    types = {(link["a"], link["b"]): link["type"] for link in data["links"]}
    for index, row in expected["rows"].items():
        for other, word in enumerate(row["words"]):
            if other > index:
                assert types[(index, other)] == word
        gpu = data["gpus"][index]
        if row["cpu"] is not None:
            assert parse_cpu_list(gpu["cpu_affinity"]) == parse_cpu_list(row["cpu"])


def test_cli_scan_from_stdin(cli):
    text = (OWN_TOPO / "old_soc_legend_4gpu.txt").read_text()
    result = cli("scan", "--from", "-", "--json", input=text)
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.output)["gpus"]) == 4


@pytest.mark.parametrize("name", ["garbage.txt"])
def test_cli_scan_from_garbage_is_one_error_line_exit_2(cli, name):
    assert_one_error_line(cli("scan", "--from", str(OWN_TOPO / name), "--json"))


def test_cli_scan_from_binary_file_is_one_error_line(cli, tmp_path):
    path = tmp_path / "topo.bin"
    path.write_bytes(bytes(range(256)) * 4)
    result = cli("scan", "--from", str(path))
    assert result.exit_code == 2
    assert result.output.strip().startswith("gputopo: error:") and "binary" in result.output


_ALL_CAPTURES = [p.read_text() for p in TOPO_FIXTURES + sorted(OWN_TOPO.glob("*.txt"))]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=st.sampled_from(_ALL_CAPTURES),
    cut_at=st.floats(min_value=0, max_value=1),
    position=st.floats(min_value=0, max_value=1),
    noise=st.text(alphabet=st.sampled_from(list("GPU0123X -,\t\nNVSYOCA/")), max_size=12),
)
def test_damaged_captures_give_a_topology_or_one_input_error(text, cut_at, position, noise):
    """Cut anywhere and with noise spliced in, a capture never crashes the parser."""
    text = text[: int(len(text) * cut_at)]
    at = int(len(text) * position)
    text = text[:at] + noise + text[at:]
    try:
        topology = parse_topo_matrix(text, "fuzz")
    except InputError as exc:
        assert "\n" not in str(exc)
        return
    topology.validate()
    assert len(topology.links) == len(topology.gpus) * (len(topology.gpus) - 1) // 2


def test_non_breaking_spaces_from_web_pages():
    nbsp = "\u00a0"
    text = (
        f"{nbsp * 8}GPU0{nbsp * 4}GPU1{nbsp * 4}CPU{nbsp}Affinity\n"
        f"GPU0{nbsp * 5}X{nbsp * 6}NV2{nbsp * 5}0-7\nGPU1{nbsp * 4}NV2{nbsp * 5}X{nbsp * 6}0-7\n"
    )
    topology = parse_topo_matrix(text, "web")
    assert topology.link(0, 1).type == "NV2" and [g.cpu_affinity for g in topology.gpus] == ["0-7", "0-7"]


# --- NUMA sets, GPU NUMA IDs, NVSwitch, mangled pastes (the corpus: tests/fixtures/corpus/topo) -------

CORPUS_TOPO = OWN_FIXTURES / "corpus" / "topo"


def _corpus(name: str):
    return parse_topo_matrix((CORPUS_TOPO / name).read_text(), name)


def test_grace_numa_affinity_set_and_gpu_numa_id_are_kept():
    """GB200: NUMA Affinity is a set (``0,3-9,11-17``) and each GPU's memory is a NUMA node."""
    topology = _corpus("gb200_4gpu_nv18_grace_numa_sets_8nic.txt")
    assert [g.numa_affinity for g in topology.gpus] == ["0,3-9,11-17"] * 2 + ["1,19-25,27-33"] * 2
    assert [g.gpu_numa_id for g in topology.gpus] == [2, 10, 18, 26]
    assert [g.numa_node for g in topology.gpus] == [None] * 4  # no single node to report
    assert topology.gpus[0].numa_nodes == {0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17}
    assert all(g.socket is None for g in topology.gpus)  # text never says sockets
    data = topology.to_dict()["gpus"][2]
    assert (data["numa_affinity"], data["gpu_numa_id"], data["socket"]) == ("1,19-25,27-33", 18, None)


@pytest.mark.parametrize("name", ["raw_tabs_double_tab_gpu_numa_id.txt", "spaces_nicn_legend_gpu_numa_id.txt"])
def test_gpu_numa_id_na_and_single_node_affinity(name):
    topology = parse_topo_matrix((OWN_TOPO / name).read_text(), name)
    assert all(g.gpu_numa_id is None for g in topology.gpus)  # N/A
    assert [g.numa_affinity for g in topology.gpus] == [str(g.numa_node) for g in topology.gpus]


def test_power9_numa_affinity_list_is_kept_as_a_set():
    topology = _corpus("power9_traverse_1gpu_numa_affinity_list.txt")
    assert topology.gpus[0].numa_affinity == "0,8,252-255" and topology.gpus[0].numa_node is None


@pytest.mark.parametrize(
    "name, nvswitch",
    [
        ("dgx_a100_8gpu_nv12_compact_spacing.txt", True),  # 8 GPUs NV12 to every peer: 84 links each
        ("h100_8gpu_nv18_ht_affinity.txt", True),
        # 4 GPUs NV18 to 3 peers: 54 links each, three times what any GPU has: a switch (issue 18)
        ("gb200_4gpu_nv18_grace_numa_sets_8nic.txt", True),
        ("della_i16g1_4gpu_nv4_all_pairs_two_numa.txt", False),  # NV4 x 3 peers = 12 links: a direct mesh
        ("rtx3090_2gpu_nv4_bridge_ryzen5900x.txt", False),  # a bridge
        ("rtx_a6000_3gpu_nv4_bridge_pair_plus_node.txt", False),  # NV4 to one peer, PCIe to the other
        ("dgx1_p100_8gpu_nv1_mangled_header_soc.txt", False),  # the cube mesh: some pairs PCIe only
    ],
)
def test_nvswitch_inferred_only_from_the_pattern(name, nvswitch):
    topology = _corpus(name)
    assert {link.nvswitch for link in topology.links if link.is_nvlink} == {nvswitch}
    assert all(link.nvswitch is False for link in topology.links if not link.is_nvlink)


def test_two_gpus_with_nv12_are_not_evidence_of_nvswitch():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-15\nGPU1\tNV12\t X \t0-15\n"
    assert parse_topo_matrix(text, "two").link(0, 1).nvswitch is None
    assert json.loads(json.dumps(parse_topo_matrix(text, "two").to_dict()))["links"][0]["nvswitch"] is None


def _repairs(topology) -> dict:
    """The repairs of the one ``repaired-paste`` note, by kind (their words and severity:
    tests/unit/analysis/notes/test_reading_notes.py)."""
    (note,) = [n for n in topology.reading_notes if n.code == "repaired-paste"]
    assert note.facts["source"] == topology.source_detail
    return {repair["repair"]: repair for repair in note.facts["repairs"]}


def test_header_whose_cells_ran_together_is_read_from_the_rows():
    topology = _corpus("dgx1_p100_8gpu_nv1_mangled_header_soc.txt")
    assert len(topology.gpus) == 8 and [n.name for n in topology.nics] == ["mlx5_0", "mlx5_2", "mlx5_1", "mlx5_3"]
    assert topology.link(0, 4).type == "NV1" and topology.link(0, 5).type == "SYS"
    assert {(l.gpu, l.nic): l.type for l in topology.nic_links}[(2, "mlx5_1")] == "PIX"
    repair = _repairs(topology)["header-ran-together"]
    assert repair["line"] == 1 and repair["cell"].startswith("GPU0GPU1GPU2")


def test_run_together_header_made_by_hand_and_one_that_does_not_match():
    rows = "GPU0\t X \tNV2\tPHB\t0-7\nGPU1\tNV2\t X \tPHB\t0-7\nmlx5_0\tPHB\tPHB\t X \n"
    topology = parse_topo_matrix("\tGPU0GPU1mlx5_0\tCPU Affinity\n" + rows, "glued")
    assert topology.link(0, 1).type == "NV2" and [g.cpu_affinity for g in topology.gpus] == ["0-7", "0-7"]
    assert "header-ran-together" in _repairs(topology)
    # Not the rows' labels: the rows are read on their own, and the message says the header was not used.
    other = parse_topo_matrix("\tGPU0GPU1mlx5_9\tCPU Affinity\n" + rows, "glued")
    assert [n.name for n in other.nics] == ["mlx5_0"] and [g.cpu_affinity for g in other.gpus] == ["0-7", "0-7"]
    assert _repairs(other)["rows-without-header"]["header_line"] == 1


def test_rows_without_a_header_are_read_and_unnamed_nics_left_out():
    topology = _corpus("h100_8gpu_nv18_rows_only_no_header.txt")
    assert len(topology.gpus) == 8 and topology.nics == [] and topology.nic_links == []
    assert [(g.cpu_affinity, g.numa_node) for g in topology.gpus][3:5] == [("0-31,64-95", 0), ("32-63,96-127", 1)]
    repair = _repairs(topology)["rows-without-header"]
    assert repair["header_line"] is None and repair["unnamed_nics"] == 12
    two = parse_topo_matrix("GPU0\t X \tNV1\nGPU1\tNV1\t X \n", "rows")
    assert two.link(0, 1).type == "NV1" and _repairs(two)["rows-without-header"]["header_line"] is None


def test_last_nic_cell_run_into_the_cpu_affinity_is_split():
    topology = _corpus("cloud_vm_8xa100_nv12_all_phb_cpu_affinity_merged_mangled.txt")
    assert {(l.gpu, l.nic): l.type for l in topology.nic_links}[(0, "NIC7")] == "PHB"
    assert [g.cpu_affinity for g in topology.gpus] == ["0-115"] * 8
    assert [g.numa_affinity for g in topology.gpus] == ["0-3"] * 8
    assert _repairs(topology)["cell-ran-into-affinity"] == {
        "repair": "cell-ran-into-affinity", "column": "NIC7", "rows": 8, "example": "PH0-115", "words": ["PHB"]}


def test_underline_escape_without_its_esc_byte():
    topology = _corpus("h100_8gpu_nv18_9nic_bond_ansi_escape_stripped.txt")
    assert len(topology.gpus) == 8 and [g.gpu_numa_id for g in topology.gpus] == [None] * 8
    assert topology.nics[-1].device == "mlx5_bond_0"
    assert _repairs(topology)["bare-escapes"] == {"repair": "bare-escapes"}


@settings(max_examples=60, deadline=None)
@given(count=st.one_of(st.integers(0, 70), st.integers(0, 10**30)))
def test_an_nvlink_count_is_read_only_where_a_saved_snapshot_loads_it_back(count):
    """One rule for NV<n> (model.words): a cell the snapshot loader would refuse (NV0, NV65,
    NV99999999999) is refused by the reader with one line, not read and then saved unreadable."""
    from gputopo.sources.snapshot import parse_snapshot, snapshot_json

    text = (f"\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\nGPU0\t X \tNV{count}\t0-15\t0\n"
            f"GPU1\tNV{count}\t X \t0-15\t0\n")
    if 1 <= count <= MAX_NVLINKS_PER_PAIR:
        topology = parse_topo_matrix(text, "t")
        again = parse_snapshot(snapshot_json(topology), "saved")
        assert [(l.type, l.nvlink_count) for l in again.links] == [(f"NV{count}", count)]
    else:
        with pytest.raises(InputError, match=r"is not a count of NVLinks a pair of GPUs can have \(NV1 to NV64\)"):
            parse_topo_matrix(text, "t")


def test_a_command_asking_for_several_capabilities_is_named_not_called_missing():
    """club-3090#1229 and aikitoria#43 run `nvidia-smi topo -p2p rw`: the note said "no command line
    above it", which the paste shows is false; it now says what was asked and that it is read as read."""
    text = (OWN_TOPO / "with_p2p_matrices.txt").read_text()
    text = text.replace("$ nvidia-smi topo -p2p r\n", "$ nvidia-smi topo -p2p rw\n").split("$ nvidia-smi topo -p2p a")[0]
    topology = parse_topo_matrix(text, "p2p")
    assert topology.link(2, 3).p2p_read == "DR"
    (note,) = [n for n in topology.reading_notes if n.code == "p2p-capability-assumed"]
    assert note.facts == {"line": 15, "asked": "rw"}  # the command line kept: one line more than above
