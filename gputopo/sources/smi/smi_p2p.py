"""``nvidia-smi topo -p2p r|w|n|a|p`` alone (no ``topo -m`` beside it) -> Topology of the GPUs with each
pair's P2P capability and an ``UNKNOWN`` link type (the P2P matrix does not say how they are wired).

The matrices are found by ``smi_text_matrix`` (the same code that reads them beside ``topo -m``);
where ``topo -m`` is in the paste too, the ``nvidia-smi topo -m`` reader reads both.
"""

from __future__ import annotations

import functools

from gputopo.errors import InputError
from gputopo.model import Gpu, Topology
from gputopo.sources.pasted import MAX_GPUS, lines_of, with_all_pairs
from gputopo.sources.smi.smi_text import _merge_p2p  # noqa: PLC2701 - the one reading of a P2P matrix
from gputopo.sources.smi.smi_text_matrix import GPU_RE, find_matrices, strip_escapes

KIND = "nvidia-smi topo -p2p"


def _matrices(text: str):
    return find_matrices(lines_of(strip_escapes(text)[0]))


@functools.lru_cache(maxsize=1)  # asked twice of one text: alone, and beside the `topo -m` reader's sniff
def _kinds(text: str) -> frozenset[str]:
    return frozenset(m.kind for m in _matrices(text))


def sniff(text: str) -> bool:
    """Whether the text holds a ``topo -p2p`` matrix and no ``topo -m`` matrix."""
    if "GPU0" not in text and "GPU 0" not in text:
        return False
    kinds = _kinds(text)
    return "p2p" in kinds and "topo" not in kinds


def read(text: str, source: str) -> Topology:
    """The GPUs of the ``topo -p2p`` matrices in ``text`` with their P2P words."""
    matrices = [m for m in _matrices(text) if m.kind == "p2p"]
    if not matrices:
        raise InputError(f"{source}: no `nvidia-smi topo -p2p` matrix")
    columns = [c for c in matrices[0].gpu_columns if c in matrices[0].rows]
    indices = sorted({int(GPU_RE.match(c).group(1)) for c in columns})  # type: ignore[union-attr]
    if len(indices) > MAX_GPUS:
        raise InputError(f"{source}: {len(indices)} GPUs; more than {MAX_GPUS}")
    topo = with_all_pairs([Gpu(index=i) for i in indices], "nvidia-smi", f"{len(indices)} GPUs (nvidia-smi topo -p2p)", source)
    for matrix in matrices:
        _merge_p2p(topo, matrix, source, topo.reading_notes)
    return topo
