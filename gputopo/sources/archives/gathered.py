"""``scan --from box.tar.gz``: the topology in a ``gputopo gather`` archive.

The archive's ``gputopo/nvidia-smi/topo-m.txt`` (and ``topo-p2p-r.txt`` where present) is read
through the registry like any pasted text, and its ``nvidia-smi -q`` (``q.txt``) merged in
(``smi_q.with_gathered_q``: names, bus ids, memory, PCIe links); the host's files packed beside it
then add what sysfs tells the live probe: CPU sockets, NUMA distances, RDMA NICs and their paths to the GPUs,
the fabric graph's tree, and on it the NVLinks ``topo -m``'s words give (``fabric_nvlink.add_pair_word_edges``).
The archive is checked and held in memory (``gputopo.sources.archives.archive``), never unpacked to disk;
every path in it is resolved inside it (``gputopo.sources.host.tree``).
"""

from __future__ import annotations

import os
from typing import Callable

from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.sources.archives.archive import opened_archive
from gputopo.sources.host.fabric_nvlink import add_pair_word_edges
from gputopo.sources.host.fabric_sysfs import add_fabric
from gputopo.sources.merge import merge_views
from gputopo.sources.host.sysfs import add_host_locality
from gputopo.sources.host.tree import Tree

MAX_OUTPUT_BYTES = 16 << 20

SMI_OUTPUTS = ("gputopo/nvidia-smi/topo-m.txt", "gputopo/nvidia-smi/topo-p2p-r.txt")
SMI_Q = "gputopo/nvidia-smi/q.txt"


def read_gathered(path: str, read_text: Callable[[str, str], Topology]) -> Topology:
    """The topology of the host a ``gather`` archive was taken on; ``read_text`` is the registry's
    (text, label) -> Topology (passed in: the registry calls us)."""
    label = os.path.basename(path)
    tree = opened_archive(path)
    topology = read_smi_outputs(tree, label, read_text)
    if topology is None:
        raise InputError(f"{label} holds no `nvidia-smi topo -m` output (gathered where nvidia-smi was missing "
                         "or failed); `gputopo doctor --from` still reads its host files")
    add_host_locality(topology, tree)
    add_fabric(topology, tree)
    add_pair_word_edges(topology)  # its NVLinks, from topo -m's words, on the tree sysfs gave
    topology.source_detail = label
    return topology


def _output(tree: Tree, name: str) -> str | None:
    """A gathered nvidia-smi output as text; None where there is none (or it is no regular text
    file inside the tree)."""
    return tree.read_text(name, MAX_OUTPUT_BYTES, "gathered nvidia-smi output")


def read_smi_outputs(tree: Tree, label: str, read_text: Callable[[str, str], Topology]) -> Topology | None:
    """The gathered nvidia-smi outputs in ``tree``, each read as its own file and merged as
    ``scan --from a --from b`` merges files of one host (None where there is none).

    Not one concatenated text: with one GPU, ``topo -p2p r``'s matrix holds only "X" and cannot be
    told from a second ``topo -m`` matrix (a real one-GPU H200 archive, tests/hardware)."""
    parts, names = [], []
    for name in SMI_OUTPUTS:
        text = _output(tree, name)
        if text is not None:
            names.append(f"{label}:{name}")
            parts.append(read_text(text, names[-1]))
    if not parts:
        return None
    topology = parts[0] if len(parts) == 1 else merge_views(parts, names)
    q_text = _output(tree, SMI_Q)
    if q_text is not None:  # names, bus ids, memory and PCIe links (smi_q)
        from gputopo.sources.smi.smi_q import with_gathered_q

        topology = with_gathered_q(topology, q_text, f"{label}:{SMI_Q}")
    return topology
