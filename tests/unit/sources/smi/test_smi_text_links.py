"""smi_text_links: a matrix's GPU links read a row at a time; only rows that need it go pair by pair
through the reader's careful look."""

from __future__ import annotations

from gputopo.model import make_link
from gputopo.sources.smi.smi_text_links import gpu_links, row_words
from gputopo.sources.smi.smi_text_matrix import find_matrices

MATRIX = """\
\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity
GPU0\t X \tNV2\tSYS\tpix\t0-11\t0
GPU1\tNV2\t X \tSOC\tPIX\t0-11\t0
GPU2\tSYS\tSYS\t X \tNODE\t12-23\t1
GPU3\tPIX\tPIX\tNODE\t X \t12-23\t1
"""


def _matrix(text: str):
    (matrix,) = find_matrices(text.splitlines())
    return matrix, {c: int(c[3:]) for c in matrix.gpu_columns}


def test_a_symmetric_matrix_gives_every_link_without_a_careful_look():
    matrix, index_of = _matrix(MATRIX)
    asked = []
    links = gpu_links(matrix, index_of, lambda a, b: asked.append((a, b)) or "SYS")
    assert asked == []
    words = {(0, 1): "NV2", (0, 2): "SYS", (0, 3): "PIX", (1, 2): "SYS", (1, 3): "PIX", (2, 3): "NODE"}
    expected = [make_link(a, b, w, pcie_path=None if w.startswith("NV") else w, nvswitch=None if w.startswith("NV") else False)
                for (a, b), w in words.items()]
    assert links == expected
    assert row_words(matrix, ["GPU1"])["GPU1"] == ["NV2", "X", "SYS", "PIX"]  # SOC is SYS, case folded


def test_only_a_row_that_disagrees_with_its_column_is_read_pair_by_pair():
    matrix, index_of = _matrix(MATRIX.replace("GPU2\tSYS\tSYS", "GPU2\tSYS\tPHB"))
    asked = []

    def careful(a: str, b: str) -> str:
        asked.append((a, b))
        return "SYS"  # the worse word, as the reader keeps

    links = gpu_links(matrix, index_of, careful)
    assert asked == [("GPU1", "GPU2"), ("GPU1", "GPU3")]  # row GPU1: its GPU2 cell is not what row GPU2 says
    assert {(lk.a, lk.b): lk.type for lk in links}[(1, 2)] == "SYS"


def test_a_cell_that_is_no_word_and_a_diagonal_without_x_get_the_careful_look():
    matrix, index_of = _matrix(MATRIX.replace("GPU3\tPIX\tPIX\tNODE\t X ", "GPU3\tPIX\tPIX\tNODE\tNV1"))
    asked = []
    gpu_links(matrix, index_of, lambda a, b: asked.append((a, b)) or "NODE")
    assert ("GPU3", "GPU3") in asked
    matrix, index_of = _matrix(MATRIX.replace("GPU0\t X \tNV2", "GPU0\t X \tNVX"))
    asked.clear()
    gpu_links(matrix, index_of, lambda a, b: asked.append((a, b)) or "NV2")
    assert asked[:1] == [("GPU0", "GPU1")]
