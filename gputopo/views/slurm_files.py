"""The files Slurm reads, as text: gres.conf (``recommend --format gres``) and topology.conf's block
topology (``recommend --format slurm-topology``).

Every value from an input goes through its check in ``gputopo.quoting``: node names through
``slurm_node`` (refused), GPU names through ``slurm_gres_type`` (mapped to ``[a-z0-9_.-]``), and what
is said of them in ``#`` comments through ``comment`` (one line, no control character). Numbers are
written by this module. So a line of the file is ``key=value`` words gputopo chose, whatever the input.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING

from gputopo.notation import count_word, format_cpu_list
from gputopo.quoting import comment

if TYPE_CHECKING:
    from gputopo.analysis.slurm.slurm_blocks import BlockTopology
    from gputopo.analysis.slurm.slurm_gres import GresGpu, GresNode

GRES_HEADER = (
    "gres.conf written by gputopo (`gputopo recommend --format gres`): one line per GPU.",
    "AutoDetect=off: these lines state the wiring themselves. With AutoDetect=nvml Slurm checks explicit",
    "Cores=/Links= against what it detects and drops a GPU whose values differ; on NVSwitch boards it",
    "detects no GPU-to-GPU link (0 to every peer), where this file gives the NVLink count.",
    "GPUs in Slurm's device order (PCI bus id, smallest first); Links= counts the connections to",
    "GPU 0, 1, ... of that order (-1 itself, 0 none, NV<N> -> N).",
)


def _comments(text: str) -> list[str]:
    """``text`` as ``#`` lines of at most about 100 columns, none of which it can leave."""
    return [comment(part) for part in textwrap.wrap(text, 98, break_long_words=False, break_on_hyphens=False)]


def _gres_line(node: str | None, gpu: GresGpu) -> str:
    words = [f"NodeName={node}"] if node is not None else []
    words.append("Name=gpu")
    if gpu.type is not None:
        words.append(f"Type={gpu.type}")
    words.append(f"File=/dev/nvidia{int(gpu.minor)}")
    if gpu.cores:
        words.append(f"Cores={format_cpu_list(int(c) for c in gpu.cores)}")
    words.append("Links=" + ",".join(str(int(n)) for n in gpu.links))
    return " ".join(words)


def slurm_conf_gres(node: GresNode) -> str:
    """``Gres=gpu:TYPE:N[,gpu:OTHER:M]`` for the node's slurm.conf line (types in order of first GPU)."""
    counts: dict[str | None, int] = {}
    for gpu in node.gpus:
        counts[gpu.type] = counts.get(gpu.type, 0) + 1
    return "Gres=" + ",".join(f"gpu:{kind}:{n}" if kind else f"gpu:{n}" for kind, n in counts.items())


def format_gres(nodes: list[GresNode]) -> str:
    """gres.conf for the nodes: the header, ``AutoDetect=off``, then a block per node."""
    lines = [comment(text) for text in GRES_HEADER]
    lines.append("AutoDetect=off")
    for node in nodes:
        lines.append("")
        where = f"node {node.node}" if node.node is not None else "this node (no NodeName: the source names no host)"
        lines.extend(_comments(f"{where}: {count_word(len(node.gpus), 'GPU')}; in slurm.conf: "
                               f"{'NodeName=' + node.node + ' ' if node.node else ''}{slurm_conf_gres(node)}"))
        for note in node.notes:
            lines.extend(_comments(note))
        for gpu in node.gpus:
            bus = gpu.pci_bus_id or "bus id unknown"
            name = gpu.name or "name unknown"
            minor = "" if gpu.minor_known else ", minor number assumed = index"
            lines.append(comment(f"GPU {gpu.index} ({bus}, {name}{minor})"))
            lines.append(_gres_line(node.node, gpu))
    return "\n".join(lines) + "\n"


def format_block_topology(blocks: BlockTopology) -> str:
    """topology.conf for topology/block: a ``BlockName=`` line per NVLink domain, then ``BlockSizes=``."""
    lines = [comment(text) for text in (
        "topology.conf written by gputopo (`gputopo recommend --format slurm-topology`), for",
        "TopologyPlugin=topology/block (Slurm 23.11 or later): one block per NVLink domain.",
    )]
    for note in blocks.notes:
        lines.extend(_comments(note))
    for block in blocks.blocks:
        lines.extend(_comments(f"{block.name}: {block.why}"))
        lines.append(f"BlockName={block.name} Nodes={','.join(block.nodes)}")
    lines.append(f"BlockSizes={','.join(str(int(size)) for size in blocks.sizes)}")
    return "\n".join(lines) + "\n"
