"""The links between the GPUs of a ``nvidia-smi topo -m`` matrix, read a row at a time.

The cells are read as words once per distinct cell (a 576-column matrix has 331,776 cells and a
handful of words). A row whose cells right of the diagonal are the words below it in their columns
(as a real matrix is) gives its links at once; only a row where they differ, or that holds a cell
that is no word or could not be read, goes pair by pair through the reader's careful look
(``smi_text._careful_word``: the worse of two words and a finding, or the error to raise).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from gputopo.model import Link, is_known_link_type, nvlink_count_of
from gputopo.model.json_text import gc_paused
from gputopo.sources.smi.smi_text_matrix import LINK_WORDS, NV_RE, SELF_WORD, _Matrix


def gpu_links(matrix: _Matrix, index_of: dict[str, int], careful: Callable[[str, str], str]) -> list[Link]:
    """``_gpu_links`` with no cyclic garbage collection while a domain's 165,600 links are made (they
    make no cycles; each collection would scan every object the readers' modules hold)."""
    with gc_paused():
        return _gpu_links(matrix, index_of, careful)


def _gpu_links(matrix: _Matrix, index_of: dict[str, int], careful: Callable[[str, str], str]) -> list[Link]:
    """The link of every pair of GPU columns; ``careful(a, b)``: the word of a pair (or, for
    ``a == b``, the diagonal's check) where a row needs a closer look."""
    gpu_columns = matrix.gpu_columns
    words = row_words(matrix, gpu_columns)
    order = [matrix.position(column) for column in gpu_columns]
    grid = [list(map(words[column].__getitem__, order)) for column in gpu_columns]  # GPU columns only
    below = list(zip(*grid))  # below[k][j]: the word of row j in column k
    indices = [index_of[column] for column in gpu_columns]
    facts: dict[str, tuple[int, bool | None, str | None]] = {}  # word -> (nvlink_count, nvswitch, pcie_path)
    links: list[Link] = []
    for pos, a in enumerate(gpu_columns):
        if grid[pos][pos] != SELF_WORD:
            careful(a, a)
        right, first = grid[pos][pos + 1 :], indices[pos]
        if matrix.unreadable or right != list(below[pos][pos + 1 :]) or None in right or SELF_WORD in right:
            right = [careful(a, b) for b in gpu_columns[pos + 1 :]]
        for word in set(right) - facts.keys():
            facts[word] = link_facts(word, matrix.pcie_only)
        links += [Link(first, other, word, *facts[word]) if first < other else Link(other, first, word, *facts[word])
                  for other, word in zip(indices[pos + 1 :], right)]  # (a, b, type, nvlink_count, nvswitch, pcie_path)
    return links


def link_facts(word: str, pcie_only: bool) -> tuple[int, bool | None, str | None]:
    """What a matrix cell's word says of its pair: (nvlink_count, nvswitch, pcie_path). A PCIe word
    says there is no NVLink, so no NVSwitch either (but ``topo -mp`` shows PCIe paths only: there it
    says nothing of NVLink); NVLinks: see ``infer_nvswitch``."""
    nvlink = NV_RE.match(word) is not None
    return nvlink_count_of(word), None if nvlink or pcie_only else False, None if nvlink else word


def row_words(matrix: _Matrix, columns: list[str]) -> dict[str, list[str | None]]:
    """Each row's cells as words (``smi_text._cell_word``'s reading; None: not a word, which it refuses)."""
    cells = {column: matrix.rows[column] for column in columns}
    normal: dict[str, str | None] = {}
    for cell in set(itertools.chain.from_iterable(cells.values())):
        word = cell.upper()
        word = "SYS" if word == "SOC" else word  # nvidia-smi before 2017 (r384) said SOC for what is now SYS
        known = word == SELF_WORD or word in LINK_WORDS or (NV_RE.match(word) and is_known_link_type(word))
        normal[cell] = word if known else None  # NV0, NV65: the careful reading says why not
    return {column: list(map(normal.__getitem__, row)) for column, row in cells.items()}
