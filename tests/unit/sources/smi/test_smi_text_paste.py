"""Issue 18's classes, each on a real capture (or a variant of one made the way pastes are damaged):
the paste is read by its structure, and conclusions follow from first principles."""

from __future__ import annotations

import re

import pytest
from conftest import OWN_FIXTURES

from gputopo.analysis.causes.diagnose import diagnose
from gputopo.analysis.place.locality import same_socket, vm_evidence
from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.sources.smi.smi_text import parse_topo_matrix

CORPUS = OWN_FIXTURES / "corpus" / "topo"


def _text(name: str) -> str:
    return (CORPUS / name).read_text()


def _links(topology: Topology) -> list[tuple[int, int, str]]:
    return [(link.a, link.b, link.type) for link in topology.links]


def _repair(topology: Topology) -> str:
    """The ``repaired-paste`` note in words (the reader notes the repairs; analysis words them)."""
    return next(f.message for f in note_findings(topology.reading_notes) if f.code == "repaired-paste")


@pytest.mark.parametrize("prefix", ["# ", "> ", "| ", "[2023-01-01 12:00:00] "])
def test_a_matrix_pasted_as_comments_or_quotes_is_read(prefix):
    """A `topo -mp` inside a script, every line a comment: refused before (no header at line start)."""
    text = _text("h200_8gpu_nv18_epyc9534_8nic_nic_legend.txt")
    pasted = "\n".join(prefix + line for line in ["$ nvidia-smi topo -mp", *text.split("\n")])
    topology = parse_topo_matrix(pasted, "script")
    assert _links(topology) == _links(parse_topo_matrix(text, "raw"))
    assert f"every line of the matrix began with {prefix.strip()!r}" in _repair(topology)


def test_old_drivers_topo_matrix_command_and_log_stamps_that_change():
    text = _text("k80_4gpu_soc_header_and_legend_unindented.txt")
    stamped = "\n".join(f"[2016-03-01 10:00:{k:02d}] {line}" for k, line in enumerate(["$ nvidia-smi topo --matrix", *text.split("\n")]))
    assert _links(parse_topo_matrix(stamped, "log")) == _links(parse_topo_matrix(text, "raw"))


def test_blank_lines_between_the_rows_are_skipped():
    text = _text("h100_8gpu_nv18_ht_affinity.txt")
    topology = parse_topo_matrix(text.replace("\n", "\n\n"), "blank")
    assert len(topology.gpus) == 8 and _links(topology) == _links(parse_topo_matrix(text, "raw"))
    assert "blank lines between the rows were skipped" in _repair(topology)


def _gpu_row(text: str, label: str) -> int:
    return next(k for k, line in enumerate(text.split("\n")) if line.split()[:1] == [label] and "X" in line.split())


def test_two_nic_cells_run_together_are_split_by_the_vocabulary():
    text = _text("dgx_a100_8gpu_nv12_epyc_nps4_12nic_mlx5.txt")
    lines = text.split("\n")
    k = _gpu_row(text, "GPU3")
    cells = lines[k].split("\t")
    merged_at = next(i for i in range(9, len(cells) - 1) if cells[i].strip() in ("SYS", "NODE", "PXB") and cells[i + 1].strip() in ("SYS", "NODE", "PXB"))
    lines[k] = "\t".join(cells[:merged_at] + [cells[merged_at] + cells[merged_at + 1]] + cells[merged_at + 2 :])
    topology = parse_topo_matrix("\n".join(lines), "merged")
    original = parse_topo_matrix(text, "raw")
    assert _links(topology) == _links(original) and topology.nic_links == original.nic_links
    assert [g.numa_node for g in topology.gpus] == [g.numa_node for g in original.gpus]
    assert "cells that ran together" in _repair(topology)


def _space_aligned(text: str, width: int = 16) -> str:
    """The tab-separated capture as a terminal shows it with the cells padded to one width (how a
    cpuset job's output looks once copied from a fixed-width page): empty cells become spaces."""
    out = []
    for line in text.split("\n"):
        fields = line.split("\t")
        if line.startswith("\t"):  # the header: its first field is empty
            out.append("".join(f.ljust(width) for f in fields).rstrip())
        else:
            out.append("".join(f.strip().ljust(width) for f in fields).rstrip())
    return "\n".join(out)


def test_an_empty_cpu_affinity_in_a_space_aligned_paste_does_not_shift_the_numa_node():
    text = _space_aligned(_text("hgx_4gpu_nv4_empty_cpu_affinity_3nic.txt"))
    assert re.search(r"\nGPU2 +NV4 +NV4 +X +NV4 +NODE {12}NODE {12}NODE {28}1 ", text)
    topology = parse_topo_matrix(text, "slurm")
    assert [(g.cpu_affinity, g.numa_node) for g in topology.gpus] == [("0", 0), ("0", 0), (None, 1), (None, 1)]
    assert same_socket(topology, 0, 2) is None and same_socket(topology, 2, 3) is True
    assert not [n for n in topology.reading_notes if n.code == "repaired-paste"]  # an empty cell is no damage


def test_affinity_values_that_stand_under_no_title_are_unknown_not_shifted():
    text = _text("hgx_4gpu_nv4_empty_cpu_affinity_3nic.txt").replace("\t", " ")
    topology = parse_topo_matrix(text, "one-space")
    assert [g.numa_node for g in topology.gpus][2:] == [None, None]  # not "CPU 1, NUMA N/A"
    assert [g.cpu_affinity for g in topology.gpus][2:] == [None, None]


def test_a_damaged_nic_cell_is_read_from_the_nic_row_or_left_out_and_named():
    text = _text("h200_8gpu_nv18_epyc9534_8nic_nic_legend.txt")
    lines = text.split("\n")
    k = _gpu_row(text, "GPU0")
    lines[k] = lines[k].replace("\tNODE\tNODE\tSYS", "\tNODNODE\tSYS", 1)
    original = parse_topo_matrix(text, "raw")
    topology = parse_topo_matrix("\n".join(lines), "damaged")
    assert _links(topology) == _links(original) and topology.nic_links == original.nic_links
    assert "was read from the NIC" in _repair(topology)
    # No NIC rows to read them from: one token for two cells, so no NIC cell after it can be placed.
    rows_only = "\n".join(lines[: _gpu_row(text, "GPU7") + 1])
    cut = parse_topo_matrix(rows_only, "cut")
    assert _links(cut) == _links(original)
    assert "NIC cells that could not be read were left out: GPU0/NIC0 ('NODNODE')" in _repair(cut)
    assert {(link.gpu, link.nic) for link in cut.nic_links} == {(link.gpu, link.nic) for link in original.nic_links} - {(0, f"NIC{n}") for n in range(8)}


def test_a_damaged_gpu_cell_is_still_refused_with_one_line():
    text = _text("h200_8gpu_nv18_epyc9534_8nic_nic_legend.txt")
    lines = text.split("\n")[: _gpu_row(text, "GPU7") + 1]
    lines[1] = lines[1].replace("NV18", "NV1?", 1)  # GPU0's cell for GPU1 ...
    lines[2] = lines[2].replace("NV18", "NV1?", 1)  # ... and GPU1's for GPU0: no mirror to read
    with pytest.raises(InputError, match=r"unknown link word 'NV1\?' between GPU0 and GPU1"):
        parse_topo_matrix("\n".join(lines), "damaged")


# --- conclusions from first principles --------------------------------------------------------------


def test_a_hypervisor_line_anywhere_makes_every_socket_claim_unknown():
    text = "Hypervisor vendor:                   KVM\nVirtualization type:                 full\n\n" + _text("h100_8gpu_nv18_ht_affinity.txt")
    topology = parse_topo_matrix(text, "vm")
    assert same_socket(parse_topo_matrix(_text("h100_8gpu_nv18_ht_affinity.txt"), "raw"), 0, 3) is True
    assert all(same_socket(topology, a, b) is None for a in range(8) for b in range(a + 1, 8))
    assert vm_evidence(topology) == "line 1 of vm says 'Hypervisor vendor: KVM'"
    assert "virtual-machine" in {f.code for f in diagnose(topology)}


def test_soc_is_between_sockets_on_real_hardware_and_unknown_in_a_vm():
    k80 = parse_topo_matrix(_text("k80_4gpu_soc_header_and_legend_unindented.txt"), "k80")
    assert same_socket(k80, 0, 2) is False and same_socket(k80, 0, 1) is True
    vm = parse_topo_matrix(_text("azure_vm_4xm60_all_soc_one_cpuset.txt"), "vm")
    assert same_socket(vm, 0, 1) is None


def test_same_numa_node_is_one_socket_even_where_the_link_word_is_sys():
    text = ("\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\tSYS\tSYS\t0-15\t0\nGPU1\tSYS\t X \tSYS\tSYS\t0-15\t0\n"
            "GPU2\tSYS\tSYS\t X \tSYS\t16-31\t1\nGPU3\tSYS\tSYS\tSYS\t X \t16-31\t1\n")
    topology = parse_topo_matrix(text, "board")
    assert same_socket(topology, 0, 1) is True and same_socket(topology, 2, 3) is True
    assert same_socket(topology, 0, 2) is None  # different NUMA nodes: the socket is not shown


def test_cpu_sets_too_large_for_one_socket_are_different_sockets():
    text = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\t0-191,384-575\t0\nGPU1\tSYS\t X \t192-383,576-767\t1\n")
    assert same_socket(parse_topo_matrix(text, "big"), 0, 1) is False
    small = text.replace("0-191,384-575", "0-15").replace("192-383,576-767", "16-31")
    assert same_socket(parse_topo_matrix(small, "small"), 0, 1) is None


def test_topo_mp_shows_pcie_paths_only_so_nvswitch_stays_unknown():
    text = _text("dgx_a100_8gpu_nv12_epyc_nps4_12nic_mlx5.txt")
    header = next(k for k, line in enumerate(text.split("\n")) if "GPU0" in line)
    lines = text.split("\n")[header:]
    pcie = [re.sub(r"\bNV12\b", "SYS", line) for line in lines]  # PCIe words only, as -mp prints
    topology = parse_topo_matrix("\n".join(["# $ nvidia-smi topo -mp", *("# " + line for line in pcie)]), "mp")
    assert {link.type for link in topology.links} == {"SYS"}
    assert {link.nvswitch for link in topology.links} == {None}  # -m would say False: no NVLink
    assert "pcie-only-matrix" in {n.code for n in topology.reading_notes}


def test_slurm_cpuset_paste_with_expanded_tabs_keeps_numa_out_of_the_cpu_column():
    """Real: `srun ... nvidia-smi topo -m` copied from a terminal (tabs now spaces); the job's one CPU
    is on NUMA node 1, so GPUs 0-3 show an empty CPU Affinity. Read by whitespace, GPU0's NUMA 0
    would become its CPU list and GPU0/GPU4 would look alike."""
    topology = parse_topo_matrix(_text("nano4_h200_8gpu_nv18_empty_cpu_affinity_spaces_srun.txt"), "nano4")
    assert [(g.cpu_affinity, g.numa_node) for g in topology.gpus] == [(None, 0)] * 4 + [("56", 1)] * 4
    assert same_socket(topology, 0, 3) is True and same_socket(topology, 0, 4) is None


def test_sys_within_one_numa_node_on_a_real_pcie_board():
    """8x RTX 4090: SYS between every pair, also between GPUs that list one NUMA node and CPU set."""
    topology = parse_topo_matrix(_text("rtx4090_8gpu_all_sys_same_numa_2nic_tabs.txt"), "4090")
    assert same_socket(topology, 0, 3) is True and same_socket(topology, 4, 7) is True
    assert same_socket(topology, 0, 4) is None
    (cross,) = [f for f in diagnose(topology) if f.code == "cross-socket"]
    assert cross.message.startswith("GPUs 0,1,2,3 and 4,5,6,7 are on different NUMA nodes (0 and 1;")


def test_a_markdown_pipe_table_is_read_as_the_matrix_it_shows():
    """A machine's notes give `nvidia-smi topo -m` as `| GPU0 | X | NV4 | PHB |` rows under a `| --- |` rule."""
    from gputopo.sources.smi.smi_text_paste import unpipe_table

    text = (OWN_FIXTURES / "corpus" / "topo" / "llamacpp_fork_7gpu_3090_nv4_pair_pxb_markdown_pipe_table.txt").read_text()
    topology = parse_topo_matrix(text, "md")
    words = {(link.a, link.b): link.type for link in topology.links}
    assert len(topology.gpus) == 7 and words[(0, 1)] == "NV4" and words[(0, 6)] == "PHB" and words[(2, 6)] == "PXB"
    assert any("a markdown table" in f.message for f in note_findings(topology.reading_notes) if f.code == "repaired-paste")
    # With attribute columns too, and a lone pipe elsewhere left alone.
    lines = ["a | b", "| | GPU0 | GPU1 | CPU Affinity | NUMA Affinity |", "|---|:---:|---|---|---|",
             "| GPU0 | X | PIX | 0-15 | 0 |", "| GPU1 | PIX | X | 0-15 | 0 |"]
    out, piped = unpipe_table(lines)
    assert piped and out == ["a | b", "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity", "", "GPU0\tX\tPIX\t0-15\t0", "GPU1\tPIX\tX\t0-15\t0"]
    assert parse_topo_matrix("\n".join(lines), "md2").gpu(1).cpu_affinity == "0-15"
    assert unpipe_table(["| one | GPU0 |", "text"]) == (["| one | GPU0 |", "text"], False)


def test_a_markdown_tables_rule_line_is_not_called_a_blank_line_between_rows():
    """The llama.cpp fork's table has no blank line; its '| --- |' rule under the header was said to
    be "1 blank line between the rows were skipped"."""
    text = (OWN_FIXTURES / "corpus" / "topo" / "llamacpp_fork_7gpu_3090_nv4_pair_pxb_markdown_pipe_table.txt").read_text()
    said = " ".join(f.message for f in note_findings(parse_topo_matrix(text, "md").reading_notes) if f.code == "repaired-paste")
    assert "a markdown table" in said and "blank line" not in said
