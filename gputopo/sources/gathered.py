"""``scan --from box.tar.gz``: the topology in a ``gputopo gather`` archive.

The archive's ``gputopo/nvidia-smi/topo-m.txt`` (and ``topo-p2p-r.txt`` where present) is read
through the registry like any pasted text, and its ``nvidia-smi -q`` (``q.txt``) merged in
(``smi_q.with_gathered_q``: names, bus ids, memory, PCIe links); the host's files packed beside it
then add what sysfs tells the live probe: CPU sockets, NUMA distances, RDMA NICs and their paths to the GPUs.
The archive is unpacked safely (``gputopo.sources.archive``) and removed afterwards.
"""

from __future__ import annotations

import os
from typing import Callable

from gputopo.errors import InputError
from gputopo.fileio import read_text_input
from gputopo.model import Topology
from gputopo.sources.archive import unpacked
from gputopo.sources.merge import merge_views
from gputopo.sources.sysfs import add_host_locality

SMI_OUTPUTS = ("gputopo/nvidia-smi/topo-m.txt", "gputopo/nvidia-smi/topo-p2p-r.txt")
SMI_Q = "gputopo/nvidia-smi/q.txt"


def read_gathered(path: str, read_text: Callable[[str, str], Topology]) -> Topology:
    """The topology of the host a ``gather`` archive was taken on; ``read_text`` is the registry's
    (text, label) -> Topology (passed in: the registry calls us)."""
    label = os.path.basename(path)
    with unpacked(path) as root:
        topology = read_smi_outputs(root, label, read_text)
        if topology is None:
            raise InputError(f"{label} holds no `nvidia-smi topo -m` output (gathered where nvidia-smi was missing "
                             "or failed); `gputopo doctor --from` still reads its host files")
        add_host_locality(topology, root)
    topology.source_detail = label
    return topology


def read_smi_outputs(root: str, label: str, read_text: Callable[[str, str], Topology]) -> Topology | None:
    """The gathered nvidia-smi outputs under ``root``, each read as its own file and merged as
    ``scan --from a --from b`` merges files of one host (None where there is none).

    Not one concatenated text: with one GPU, ``topo -p2p r``'s matrix holds only "X" and cannot be
    told from a second ``topo -m`` matrix (a real one-GPU H200 archive, tests/hardware)."""
    parts, names = [], []
    for name in SMI_OUTPUTS:
        full = os.path.join(root, name)
        if os.path.isfile(full):
            names.append(f"{label}:{name}")
            parts.append(read_text(read_text_input(full, "gathered nvidia-smi output"), names[-1]))
    if not parts:
        return None
    topology = parts[0] if len(parts) == 1 else merge_views(parts, names)
    if os.path.isfile(os.path.join(root, SMI_Q)):  # names, bus ids, memory and PCIe links (smi_q)
        from gputopo.sources.smi_q import with_gathered_q

        q_text = read_text_input(os.path.join(root, SMI_Q), "gathered nvidia-smi output")
        topology = with_gathered_q(topology, q_text, f"{label}:{SMI_Q}")
    return topology
