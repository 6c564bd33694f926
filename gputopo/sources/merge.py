"""Several views of ONE host merged into one Topology: ``--from topo.txt --from p2pbw.txt``, or a
paste that holds several outputs in a row.

Each source says part of the truth: ``nvidia-smi topo -m`` the links, ``p2pBandwidthLatencyTest``
the measured GB/s, a snapshot the NVML facts. Merging fills what one source leaves unknown with
what another says. Where two sources say *different* things about the same fact, the first source
(the order given) is kept and the disagreement is recorded on the topology
(``Topology.disagreements``); ``gputopo.analysis`` turns them into findings. Nothing is dropped
silently.

GPUs are joined by PCI bus id where every GPU of both sources has one; otherwise by index, which
assumes both number the GPUs the same way (nvidia-smi and NVML use PCI order, CUDA programs
``CUDA_DEVICE_ORDER=FASTEST_FIRST`` by default): that assumption is recorded too.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any, Sequence

from gputopo.errors import InputError
from gputopo.model import GPU_NUMBERING_SUBJECT as NUMBERING
from gputopo.model import Disagreement, Fabric, Gpu, Link, Measurement, Topology
from gputopo.model.reading_notes import worded_note

# Facts that are no facts: a field holding one of these says nothing and is filled from another source.
_UNKNOWN_LINK_TYPE = "UNKNOWN"
# Fields that are bookkeeping of one source, never compared.
_GPU_FIELDS_NOT_COMPARED = frozenset({"index"})
_LINK_FIELDS_NOT_COMPARED = frozenset({"a", "b", "measured", "nvlink_count", "health"})
# Sources that number GPUs in PCI bus order, as NVML does: joined by index without a doubt.
# (NCCL's topology XML numbers a GPU by ``dev``, its NVML index; ``nvidia-smi nvlink`` and ``-q`` by nvidia-smi's.)
_PCI_ORDER_SOURCES = frozenset({"nvml", "nvidia-smi", "nvidia-smi-nvlink", "nvidia-smi-q", "nccl-xml", "snapshot",
                                "reference"})
_P2P_FIELDS = frozenset({"p2p_read", "p2p_write", "p2p_atomics", "p2p_nvlink"})


def merge_views(parts: Sequence[Topology], names: Sequence[str] | None = None) -> Topology:
    """One Topology from several sources of the same host (``names``: what to call each, e.g. its
    file; by default its source), the first one's answers winning a disagreement (which is recorded)."""
    if not parts:
        raise ValueError("nothing to merge")
    merged = copy.deepcopy(parts[0])
    names = list(names) if names is not None else [_source_name(part) for part in parts]
    for name, part in zip(names[1:], parts[1:]):
        _merge_into(merged, names[0], part, name)
    merged.source_detail = " + ".join(names)
    return merged


def _source_name(topology: Topology) -> str:
    return topology.source_detail or topology.source


def _merge_into(merged: Topology, kept_from: str, part: Topology, other_from: str) -> None:
    hosts = {merged.host, part.host} - {None}
    if len(hosts) > 1:
        raise InputError(f"{kept_from} is of host {merged.host}, {other_from} of host {part.host}: "
                         "several --from of different hosts are one snapshot per host (each naming its host)")
    merged.host = merged.host or part.host
    for name, one in ((kept_from, merged), (other_from, part)):
        if any(link.measured is not None and link.measured.device_kind != "GPU" for link in one.links):
            raise InputError(f"{name} measured host memory on logical CPU devices (bench-p2p --cpu-devices), not "
                             "GPUs: its figures are not laid on another source's GPU links")
    index_of = _join_gpus(merged, kept_from, part, other_from)
    _refuse_other_wiring(merged, kept_from, part, other_from, index_of)
    for gpu in part.gpus:
        _merge_gpu(merged, index_of[gpu.index], gpu, kept_from, other_from)
    links = merged.link_map()
    for link in part.links:
        a, b = sorted((index_of[link.a], index_of[link.b]))
        mine = links.get((a, b))
        if mine is None:
            moved = dataclasses.replace(copy.deepcopy(link), a=a, b=b)
            merged.links.append(moved)
            links[(a, b)] = links[(b, a)] = moved
        else:
            _merge_link(merged, mine, link, kept_from, other_from, flipped=index_of[link.a] > index_of[link.b])
    _merge_nics(merged, part, index_of)
    for name in ("driver_version", "cuda_driver_version", "nvml_version", "socket_interconnect", "numa_distances", "label"):
        if getattr(merged, name) is None:
            setattr(merged, name, copy.deepcopy(getattr(part, name)))
    if merged.tf is None:
        merged.tf = copy.deepcopy(part.tf)
    if merged.fabric is None and part.fabric is not None:
        merged.fabric = _renumbered_fabric(part.fabric, index_of)
    _merge_observed(merged, part, index_of)
    _merge_notes(merged, part)
    merged.disagreements.extend(copy.deepcopy(part.disagreements))


def _renumbered_fabric(fabric: Fabric, index_of: dict[int, int]) -> Fabric:
    """A later source's fabric (the first source had none: ``topo -m`` text beside an NCCL topology
    XML), its GPUs numbered as the merged topology numbers them (a GPU known only by index is the
    node ``gpu:<index>``: renamed with every reference to it, all at once)."""
    fabric = copy.deepcopy(fabric)
    renamed: dict[str, str] = {}
    for node in fabric.nodes:
        if node.gpu is None or node.gpu not in index_of:
            continue
        if node.id == f"gpu:{node.gpu}":
            renamed[node.id] = f"gpu:{index_of[node.gpu]}"
        node.gpu = index_of[node.gpu]
    for node in fabric.nodes:
        node.id = renamed.get(node.id, node.id)
        node.parent = renamed.get(node.parent, node.parent) if node.parent is not None else None
    for edge in fabric.edges:
        edge.a, edge.b = renamed.get(edge.a, edge.a), renamed.get(edge.b, edge.b)
    return Fabric(nodes=list(fabric.nodes), edges=list(fabric.edges))  # fresh lookups


def _merge_notes(merged: Topology, part: Topology) -> None:
    """The part's findings (a snapshot's) and reading notes after those of the sources before it.
    Notes become findings only in analysis, after the findings already made: where earlier sources
    left notes, the part's findings are carried as notes that keep their words (``worded_note``),
    so every command lists the findings in the order of the sources."""
    if merged.reading_notes:
        merged.reading_notes.extend(worded_note(finding) for finding in part.diagnostics)
    else:
        for finding in part.diagnostics:
            merged.add_finding(copy.deepcopy(finding))
    merged.reading_notes.extend(copy.deepcopy(part.reading_notes))


# Two captures of one host may disagree on a link or two (a link down, a driver change); on most of
# its GPU pairs they describe two machines.
_OTHER_HOST_MIN_PAIRS = 3


def _refuse_other_wiring(merged: Topology, kept_from: str, part: Topology, other_from: str,
                         index_of: dict[int, int]) -> None:
    """A one-line refusal where both sources know the wiring of three or more GPU pairs and
    disagree on more than half of them: they are not views of the same host."""
    links = merged.link_map()
    compared = differ = 0
    for link in part.links:
        mine = links.get((index_of[link.a], index_of[link.b]))
        if mine is None or _UNKNOWN_LINK_TYPE in (mine.type, link.type):
            continue
        compared += 1
        differ += mine.type != link.type
    if compared >= _OTHER_HOST_MIN_PAIRS and differ * 2 > compared:
        raise InputError(f"{kept_from} and {other_from} disagree on how {differ} of {compared} GPU pairs are "
                         "wired: they are not captures of the same host (give one host's files, or snapshots "
                         "that each name their host)")


def numbering(topology: Topology) -> str:
    """How a source numbers its GPUs: ``nvml`` (nvidia-smi's numbers, PCI bus order) for NVML,
    nvidia-smi text and snapshots, else what the reader declared, else ``cuda`` (a CUDA program's
    numbers, which follow ``CUDA_DEVICE_ORDER`` and ``CUDA_VISIBLE_DEVICES``)."""
    if topology.gpu_numbering is not None:
        return topology.gpu_numbering
    return "nvml" if topology.source in _PCI_ORDER_SOURCES or topology.is_reference else "cuda"


def _join_gpus(merged: Topology, kept_from: str, part: Topology, other_from: str) -> dict[int, int]:
    """``{part's GPU index: merged's}``, exactly where the sources allow it, never by guesswork:

    1. PCI bus ids on every GPU of both: by bus id;
    2. both number GPUs the NVML way: by index;
    3. one numbers the NVML way (PCI bus order) without bus ids, the other has a bus id on every
       GPU, and they have the same GPUs count: by the other's bus-id order (recorded: it assumes
       every GPU of the host is in both);
    4. else by index where both have the same GPUs count (recorded as an assumption); different
       counts numbered differently cannot be matched: a one-line refusal with the way out."""
    mine = {g.pci_bus_id: g.index for g in merged.gpus if g.pci_bus_id}
    theirs = [g.pci_bus_id for g in part.gpus]
    identity = {g.index: g.index for g in part.gpus}
    if not merged.gpus or not part.gpus:
        return identity
    if len(mine) == len(merged.gpus) and all(theirs):
        unknown = [bus for bus in theirs if bus not in mine]
        if unknown:
            raise InputError(f"{other_from} has a GPU at PCI bus id {unknown[0]}, which {kept_from} does not have: "
                             "are they of the same host?")
        return {g.index: mine[g.pci_bus_id] for g in part.gpus if g.pci_bus_id}
    if numbering(merged) == numbering(part) == "nvml":
        _check_indices(merged, kept_from, part, other_from)
        return identity
    same_count = len(merged.gpus) == len(part.gpus)
    by_bus = _by_bus_order(merged, part) if same_count else None
    if by_bus is not None:
        merged.disagreements.append(Disagreement(
            subject=NUMBERING, kept="by PCI bus order (every GPU of the host assumed to be in both)",
            kept_from=kept_from, other=None, other_from=other_from, gpus=sorted(by_bus.values())))
        return by_bus
    lacking = [name for name, gpus in ((kept_from, merged.gpus), (other_from, part.gpus))
               if not all(g.pci_bus_id for g in gpus)]
    if not same_count:
        which = "neither says their PCI bus ids" if len(lacking) == 2 else f"{lacking[0]} does not say every GPU's PCI bus id"
        raise InputError(
            f"{kept_from} ({len(merged.gpus)} GPUs) and {other_from} ({len(part.gpus)} GPUs) number their GPUs "
            f"differently and {which}, so which GPUs they share cannot be told: give a "
            "snapshot with bus ids (`gputopo scan --save` on that host), or run the tool with "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID on every GPU")
    _check_indices(merged, kept_from, part, other_from)
    merged.disagreements.append(Disagreement(
        subject=NUMBERING, kept=f"by index ({' and '.join(lacking)} without PCI bus ids)",
        kept_from=kept_from, other=None, other_from=other_from, gpus=sorted(identity)))
    return identity


def _check_indices(merged: Topology, kept_from: str, part: Topology, other_from: str) -> None:
    known = {g.index for g in merged.gpus}
    extra = sorted(g.index for g in part.gpus if g.index not in known)
    if extra:
        raise InputError(f"{other_from} names GPU {extra[0]}, which {kept_from} does not have "
                         f"({len(merged.gpus)} GPUs): are they of the same host?")


def _by_bus_order(merged: Topology, part: Topology) -> dict[int, int] | None:
    """Where one side numbers GPUs in PCI bus order (NVML's way) without bus ids and the other
    has a bus id on every GPU: the other's GPUs in bus-id order are the first's 0, 1, 2..."""
    ordered = sorted(merged.gpus, key=lambda g: g.index)
    if numbering(merged) == "nvml" and not any(g.pci_bus_id for g in merged.gpus) and all(g.pci_bus_id for g in part.gpus):
        return {g.index: ordered[k].index for k, g in enumerate(sorted(part.gpus, key=lambda g: str(g.pci_bus_id)))}
    if numbering(part) == "nvml" and not any(g.pci_bus_id for g in part.gpus) and all(g.pci_bus_id for g in merged.gpus):
        by_bus = sorted(merged.gpus, key=lambda g: str(g.pci_bus_id))
        return {g.index: by_bus[k].index for k, g in enumerate(sorted(part.gpus, key=lambda g: g.index))}
    return None


def _merge_gpu(merged: Topology, index: int, gpu: Gpu, kept_from: str, other_from: str) -> None:
    try:
        mine = merged.gpu(index)
    except KeyError:
        merged.gpus.append(dataclasses.replace(copy.deepcopy(gpu), index=index))
        merged.gpus.sort(key=lambda g: g.index)
        return
    for f in dataclasses.fields(Gpu):
        if f.name not in _GPU_FIELDS_NOT_COMPARED:
            _merge_field(merged, mine, gpu, f.name, f"GPU {index} {f.name}", [index], kept_from, other_from)


def _merge_link(merged: Topology, mine: Link, other: Link, kept_from: str, other_from: str, flipped: bool) -> None:
    if mine.type == _UNKNOWN_LINK_TYPE and other.type != _UNKNOWN_LINK_TYPE:
        mine.type, mine.nvlink_count = other.type, other.nvlink_count
    # A source that does not know the link (a measurement, a P2P matrix) says nothing of its kind.
    other_knows_kind = _UNKNOWN_LINK_TYPE not in (mine.type, other.type)
    for f in dataclasses.fields(Link):
        if f.name in _LINK_FIELDS_NOT_COMPARED or (f.name not in _P2P_FIELDS and not other_knows_kind):
            continue
        _merge_field(merged, mine, other, f.name, f"link {mine.a}-{mine.b} {f.name}", [mine.a, mine.b], kept_from, other_from)
    mine.health = sorted(set(mine.health) | set(other.health))  # doctor's problems: each source's count
    if other.measured is not None:
        measured = _oriented(other.measured, flipped)
        mine.measured = measured if mine.measured is None else _fill(mine.measured, measured)


def _merge_field(merged: Topology, mine: Any, other: Any, name: str, subject: str, gpus: list[int],
                 kept_from: str, other_from: str) -> None:
    """Fill ``mine.name`` from ``other`` where unknown; record a disagreement where both know it."""
    ours, theirs = getattr(mine, name), getattr(other, name)
    if theirs is None or theirs == ours:
        return
    if ours is None:
        setattr(mine, name, copy.deepcopy(theirs))
        return
    merged.disagreements.append(Disagreement(subject=subject, kept=str(ours), kept_from=kept_from,
                                             other=str(theirs), other_from=other_from, gpus=gpus))


def _oriented(measured: Measurement, flipped: bool) -> Measurement:
    """The measurement with its directions swapped where the join reversed the pair."""
    result = copy.deepcopy(measured)
    if flipped:
        result.a_to_b_gbps, result.b_to_a_gbps = result.b_to_a_gbps, result.a_to_b_gbps
        result.p2p_off_a_to_b_gbps, result.p2p_off_b_to_a_gbps = result.p2p_off_b_to_a_gbps, result.p2p_off_a_to_b_gbps
    return result


def _fill(mine: Measurement, other: Measurement) -> Measurement:
    """``mine`` with its unknown figures taken from ``other`` (two tools measure differently: the
    figures are kept side by side where the model has room, never averaged)."""
    for f in dataclasses.fields(Measurement):
        if getattr(mine, f.name) is None:
            setattr(mine, f.name, getattr(other, f.name))
    return mine


def _merge_nics(merged: Topology, part: Topology, index_of: dict[int, int]) -> None:
    names = {nic.name for nic in merged.nics}
    for nic in part.nics:
        if nic.name not in names:
            merged.nics.append(copy.deepcopy(nic))
            names.add(nic.name)
    have = {(link.gpu, link.nic) for link in merged.nic_links}
    for link in part.nic_links:
        key = (index_of.get(link.gpu, link.gpu), link.nic)
        if key not in have:
            merged.nic_links.append(dataclasses.replace(link, gpu=key[0]))
            have.add(key)


def _merge_observed(merged: Topology, part: Topology, index_of: dict[int, int]) -> None:
    """NVLink states, NCCL's view and nccl-tests runs of ``part``, renumbered to the merged GPUs."""
    have = {(state.gpu, state.link) for state in merged.nvlinks}
    for state in part.nvlinks:
        moved = dataclasses.replace(copy.deepcopy(state), gpu=index_of.get(state.gpu, state.gpu))
        if (moved.gpu, moved.link) not in have:
            merged.nvlinks.append(moved)
    if merged.nccl is None and part.nccl is not None:
        merged.nccl = copy.deepcopy(part.nccl)
        for transport in merged.nccl.transports:
            transport.a = None if transport.a is None else index_of.get(transport.a, transport.a)
            transport.b = None if transport.b is None else index_of.get(transport.b, transport.b)
    for run in part.collectives:
        moved_run = copy.deepcopy(run)
        moved_run.gpus = [index_of.get(g, g) for g in run.gpus]
        merged.collectives.append(moved_run)
