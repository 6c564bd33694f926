"""A `nvidia-smi topo -m` paste cut after some GPU rows: what the rows there say is read, the pairs
no row gives are UNKNOWN, and the cut is said; a cut that cannot be a truncation stays an error."""

import pytest
from conftest import OWN_FIXTURES

from gputopo.errors import InputError
from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.sources.smi.smi_text import parse_topo_matrix

OWN_TOPO = OWN_FIXTURES / "topo"
CORPUS_TOPO = OWN_FIXTURES / "corpus" / "topo"


def _repairs(topology) -> str:
    return " ".join(f.message for f in note_findings(topology.reading_notes) if f.code == "repaired-paste")


def test_rows_cut_after_gpu1_of_four_keep_every_pair_a_row_gives():
    topology = parse_topo_matrix((OWN_TOPO / "truncated_rows.txt").read_text(), "cut")
    assert len(topology.gpus) == 4
    words = {(link.a, link.b): link.type for link in topology.links}
    assert words == {(0, 1): "NV2", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS", (2, 3): "UNKNOWN"}
    assert topology.gpu(2).cpu_affinity is None and topology.gpu(2).numa_node is None
    assert topology.gpu(0).cpu_affinity == "0-19"
    said = _repairs(topology)
    assert "no row for GPU2, GPU3 (cut short?)" in said and "the pair 2-3 and their CPU and NUMA affinity are unknown" in said


def test_a_last_row_cut_inside_is_left_out_and_said():
    topology = parse_topo_matrix((OWN_TOPO / "truncated_mid_row.txt").read_text(), "cut")
    assert {(link.a, link.b): link.type for link in topology.links} == {(0, 1): "PIX", (0, 2): "SYS", (1, 2): "SYS"}
    said = _repairs(topology)
    assert "the last row, GPU2, was cut short after 2 of 3 cells: left out" in said
    assert "no row for GPU2 (cut short?): its links" in said


def test_a_short_row_with_rows_after_it_is_still_an_error():
    text = "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\nGPU1\tPIX\t X \tSYS\nGPU2\tSYS\tSYS\t X \n"
    with pytest.raises(InputError, match="line 2: row GPU0 is cut short: expected 3 cells"):
        parse_topo_matrix(text, "x")


def test_a_header_with_no_whole_row_is_still_an_error():
    with pytest.raises(InputError, match="line 2: row GPU0 is cut short: expected 3 cells"):
        parse_topo_matrix("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV4\n", "x")


def test_a_rowless_gpu_takes_its_nic_path_from_the_nic_row():
    text = ("\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tNODE\tSYS\tPIX\t0-7\t0\n"
            "GPU1\tNODE\t X \tSYS\tNODE\t0-7\t0\n"
            "NIC0\tPIX\tNODE\tSYS\t X \n")
    topology = parse_topo_matrix(text, "x")
    assert {(n.gpu, n.type) for n in topology.nic_links} == {(0, "PIX"), (1, "NODE"), (2, "SYS")}
    assert topology.link(1, 2).type == "SYS"


def test_nvswitch_is_inferred_from_the_pairs_shown_and_the_unknown_pair_not_claimed():
    topology = parse_topo_matrix((CORPUS_TOPO / "sglang13973_8x_h100_nv18_snc_4numa_9nic_rows_cut_after_gpu5.txt").read_text(), "x")
    assert topology.link(6, 7).type == "UNKNOWN" and topology.link(6, 7).nvswitch is None
    assert all(link.nvswitch is True for link in topology.links if link.is_nvlink) and len(topology.links) == 28
    assert topology.gpu(6).numa_node is None and topology.gpu(5).numa_node == 2


def test_no_nvlink_in_the_rows_shown_means_no_nvswitch_for_the_unknown_pairs_too():
    topology = parse_topo_matrix(
        (CORPUS_TOPO / "nemorl1683_aws_g6_48xlarge_8gpu_node_sys_tabs_prompt_rows_cut_after_gpu4.txt").read_text(), "x")
    unknown = sorted((link.a, link.b) for link in topology.links if link.type == "UNKNOWN")
    assert unknown == [(5, 6), (5, 7), (6, 7)]
    assert all(link.nvswitch is False for link in topology.links)


def test_a_header_of_more_gpus_than_any_host_with_one_row_is_refused():
    """A hostile paste: a header of 1025 GPUs (11 KB) and one row would make half a million unknown
    pairs (1024 took 18 s and 900 MB); a cut never lets the header alone set the work."""
    n = 1025
    header = "\t" + "\t".join(f"GPU{i}" for i in range(n)) + "\tCPU Affinity\tNUMA Affinity\n"
    row = "GPU0\tX\t" + "\t".join("SYS" for _ in range(n - 1)) + "\t0-1\t0\n"
    with pytest.raises(InputError, match="lists 1025 GPUs, more than 1024"):
        parse_topo_matrix(header + row, "hostile")


def test_rows_after_a_pager_prompt_are_said_to_stand_apart_not_to_be_missing():
    """An H100 capture with a pager's '-- More --' line between GPU3 and GPU4 (derived: one line
    added): GPU4-7's rows are in the paste, so "no row for GPU4 ... (cut short?)" would be false."""
    lines = (CORPUS_TOPO / "h100_8gpu_nv18_compact_spacing.txt").read_text().splitlines(keepends=True)
    topology = parse_topo_matrix("".join(lines[:5]) + "-- More --\n" + "".join(lines[5:]), "paged")
    said = _repairs(topology)
    assert "a row stands apart further down, line 7" in said and "cut short?" not in said
