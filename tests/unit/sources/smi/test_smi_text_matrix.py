"""Finding the matrix in a paste by its structure: headers whose device names ran together, rows
pasted without a header and cut short (which columns are GPUs)."""

from __future__ import annotations

from gputopo.sources.smi.smi_text import parse_topo_matrix
from gputopo.sources.smi.smi_text_matrix import find_matrices


def _row(i: int, gpus: int, words: dict[int, str], nics: list[str], tail: str) -> str:
    cells = [" X " if j == i else words.get(j, "NV18") for j in range(gpus)]
    return f"GPU{i}\t" + "\t".join(cells + nics) + f"\t{tail}"


def test_rows_cut_without_a_header_count_the_columns_that_hold_nvlink_cells_as_gpus():
    """Rows GPU0-GPU5 of an 8-GPU NV18 board with 4 NICs, no header: columns 6 and 7 hold NV18, so they
    are GPUs (without rows); the 4 columns after them, never NV#, stay unnamed NICs."""
    lines = [_row(i, 8, {}, ["PXB", "SYS", "SYS", "SYS"], "0-15\t0\t\tN/A") for i in range(6)]
    (matrix,) = find_matrices(lines)
    assert matrix.columns[:8] == [f"GPU{k}" for k in range(8)] and len(matrix.columns) == 12
    topology = parse_topo_matrix("\n".join(lines) + "\n", "cut")
    assert len(topology.gpus) == 8 and topology.link(0, 7).type == "NV18" and topology.link(6, 7).type == "UNKNOWN"
    (note,) = [n for n in topology.reading_notes if n.code == "repaired-paste"]
    (repair,) = [r for r in note.facts["repairs"] if r["repair"] == "rows-without-header"]
    assert repair["gpus_by_nvlink"] == ["GPU6", "GPU7"] and repair["unnamed_nics"] == 4


def test_rows_without_nvlink_past_the_last_row_do_not_make_gpus_up():
    lines = [_row(i, 2, {1 - i: "SYS"}, ["PIX", "SYS"], "0-7") for i in range(2)]
    topology = parse_topo_matrix("\n".join(lines) + "\n", "pcie")
    assert len(topology.gpus) == 2


def test_a_header_with_two_names_run_together_is_split_where_the_rows_were_cut():
    """vllm#31594's 'NIC11NIC12' header with rows GPU0-GPU3 only: the header's 8 GPUs and 13 NICs hold."""
    names = [f"GPU{k}" for k in range(8)] + [f"NIC{k}" for k in range(11)] + ["NIC11NIC12"]
    header = "\t" + "\t".join(names) + "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID"
    nics = ["SYS"] * 8 + ["NODE"] * 5
    rows = [_row(i, 8, {}, nics, "0-15\t0\t\tN/A") for i in range(4)]
    topology = parse_topo_matrix("\n".join([header, *rows]) + "\n", "glued")
    assert len(topology.gpus) == 8 and [n.name for n in topology.nics][-2:] == ["NIC11", "NIC12"]
    assert topology.link(3, 7).type == "NV18" and topology.link(4, 5).type == "UNKNOWN"
    (note,) = [n for n in topology.reading_notes if n.code == "repaired-paste"]
    (repair,) = [r for r in note.facts["repairs"] if r["repair"] == "header-ran-together"]
    assert repair["cell"] == "NIC11NIC12" and repair["split"] is True


def test_a_split_header_that_names_other_rows_is_not_used():
    header = "\tGPU0GPU1\tmlx5_9\tCPU Affinity"
    rows = ["GPU0\t X \tNV2\tPHB\t0-7", "GPU1\tNV2\t X \tPHB\t0-7", "mlx5_0\tPHB\tPHB\t X "]
    assert find_matrices([header, *rows])[0].columns != ["GPU0", "GPU1", "mlx5_9"]


class _Untouchable(str):
    """A line that fails the test if anything reads it."""

    def split(self, *args, **kwargs):
        raise AssertionError("read a line below the matrix's rows")


def test_the_row_labels_stop_at_a_repeated_label_without_reading_further():
    """Every row line of a headerless paste is a candidate header, and each looked at every row below
    it: thousands of pasted rows were quadratic (benchmarks/readers_speed.py prints the figures).
    Reading stops where a label repeats."""
    from gputopo.sources.smi.smi_text_matrix import _row_labels

    rows = ["GPU0   X    NV12  0-23  0", "GPU1  NV12   X    0-23  0"]
    lines = rows + rows + [_Untouchable("GPU0   X    NV12  0-23  0")]
    assert _row_labels(lines, 0) == ["GPU0", "GPU1"]


def test_a_gpu_column_of_thousands_of_digits_is_one_input_error_not_a_traceback():
    """(``GPU`` and 5,000 digits in a topo -m header: ``int`` refuses past 4,300 digits, and scan
    ended in a ValueError traceback.)"""
    from gputopo.errors import InputError
    from gputopo.sources.registry import read_text

    digits = "9" * 5000
    text = f"\tGPU0\tGPU{digits}\nGPU0\t X \tNV4\nGPU{digits}\tNV4\t X \n"
    try:
        read_text(text, "topo.txt")
    except InputError:
        pass
