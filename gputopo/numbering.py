"""The one owner of GPU numbering: which number a GPU has for CUDA, for TensorFlow and for NVML.

Three numberings meet in gputopo, and mixing them up launches training on other GPUs than the ones
recommended:

- NVML / ``nvidia-smi`` index a host's GPUs in PCI bus order; a topology's ``Gpu.index`` is that
  index (on a multi-host topology the indices run on across hosts, each host counting from 0 again
  for CUDA).
- CUDA numbers GPUs by ``CUDA_DEVICE_ORDER`` (default ``FASTEST_FIRST``, not PCI order) among those
  ``CUDA_VISIBLE_DEVICES`` shows. gputopo always launches with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``.
- TensorFlow's ``GPU:i`` ordinals are CUDA's numbers in the process TensorFlow runs in.

The only sure join of TensorFlow's GPUs and NVML's is the PCI bus id; this module makes it, and
falls back to the environment's order only where bus ids are missing, saying so.
"""

from __future__ import annotations

import os
from typing import Iterable, Mapping, Sequence

from gputopo.errors import InputError
from gputopo.model import TfView, Topology, normalize_pci_bus_id
from gputopo.notation import ascii_int, number_list

PCI_ORDER = "PCI_BUS_ID"


# --- the CUDA environment ------------------------------------------------------------------------


def cuda_env(cuda_numbers: Sequence[int]) -> dict[str, str]:
    """Make CUDA number GPUs as NVML/nvidia-smi do (PCI bus order) and show only ``cuda_numbers``.

    Without ``CUDA_DEVICE_ORDER=PCI_BUS_ID`` CUDA's default FASTEST_FIRST order can differ from
    nvidia-smi's, and ``CUDA_VISIBLE_DEVICES=2,3`` would then pick the wrong boards.
    """
    return {"CUDA_DEVICE_ORDER": PCI_ORDER, "CUDA_VISIBLE_DEVICES": number_list(cuda_numbers)}


def visible_pci_order(environ: Mapping[str, str] | None = None) -> list[int] | None:
    """The nvidia-smi (PCI order) index of each CUDA ordinal, from ``CUDA_VISIBLE_DEVICES``:
    ``2,3`` makes CUDA's (and TF's) GPU:0 nvidia-smi's GPU 2. ``None`` where it does not say
    (unset, UUIDs, or an order other than ``PCI_BUS_ID``)."""
    env = os.environ if environ is None else environ
    visible = env.get("CUDA_VISIBLE_DEVICES")
    if visible is None or env.get("CUDA_DEVICE_ORDER") != PCI_ORDER:
        return None
    parts = [part.strip() for part in visible.split(",") if part.strip()]
    numbers = [ascii_int(part, 6) for part in parts]
    if not numbers or any(n is None for n in numbers):
        return None
    return [n for n in numbers if n is not None]


# --- a topology's GPUs as CUDA numbers them ------------------------------------------------------


def cuda_numbers(topology: Topology) -> dict[int, int]:
    """``{GPU index: its number under CUDA_DEVICE_ORDER=PCI_BUS_ID on its own host}``.

    On one host that is the NVML / nvidia-smi index (also PCI bus order); in a multi-host topology
    each host numbers its own GPUs from 0; a TF log alone is renumbered by its PCI bus ids.
    """
    pci_numbers = pci_order_numbers(topology)
    by_host: dict[str | None, list[int]] = {}
    for gpu in topology.gpus:
        by_host.setdefault(gpu.host, []).append(gpu.index)
    numbers: dict[int, int] = {}
    for host, indices in by_host.items():
        if host is None:
            numbers.update({i: pci_numbers.get(i, i) for i in indices})
        else:
            numbers.update({i: n for n, i in enumerate(sorted(indices))})
    return numbers


def pci_order_numbers(topology: Topology) -> dict[int, int]:
    """``{GPU index: its number under CUDA_DEVICE_ORDER=PCI_BUS_ID}`` where the two differ.

    Only a TF log alone numbers GPUs otherwise (TensorFlow's ordinals, FASTEST_FIRST by default);
    where the log gives every GPU's PCI bus id, the launch lines must use PCI bus order instead.
    """
    if topology.source != "tf-log":
        return {}
    bus_ids = [normalize_pci_bus_id(g.pci_bus_id) for g in topology.gpus]
    if None in bus_ids or len(set(bus_ids)) != len(bus_ids):
        return {}
    by_bus = sorted(zip(bus_ids, topology.gpu_indices))  # type: ignore[arg-type]
    return {index: number for number, (_, index) in enumerate(by_bus)}


def host_cuda_numbers(topology: Topology, gpus: Sequence[int], what: str) -> list[int]:
    """The CUDA numbers of ``gpus`` on their own host (what ``CUDA_VISIBLE_DEVICES`` there means).

    One training process runs on one host: GPUs of several hosts are refused with the way out.
    """
    hosts = {topology.gpu(g).host for g in gpus}
    if len(hosts) > 1:
        names = ", ".join(sorted(str(h) for h in hosts))
        raise InputError(
            f"{what} GPUs {number_list(gpus)} span several hosts ({names}); `gputopo train` runs on "
            "one host: ask for fewer GPUs, name one host's GPUs with --devices, or start one "
            "--strategy multi-worker process per host"
        )
    numbers = cuda_numbers(topology)  # the same numbering `recommend` prints
    return [numbers[g] for g in gpus]


# --- TensorFlow <-> NVML, by PCI bus id ----------------------------------------------------------


def index_by_bus_id(topology: Topology) -> dict[str, int]:
    """``{normalised PCI bus id: GPU index}`` for the topology's GPUs that have one."""
    by_bus: dict[str, int] = {}
    for gpu in topology.gpus:
        bus = normalize_pci_bus_id(gpu.pci_bus_id)
        if bus is not None:
            by_bus[bus] = gpu.index
    return by_bus


def join_by_bus_id(topology: Topology, bus_ids: Iterable[str | None]) -> list[int | None]:
    """The topology GPU index of each PCI bus id (``None`` where it has none or is not there)."""
    by_bus = index_by_bus_id(topology)
    return [by_bus.get(normalize_pci_bus_id(bus)) if bus else None for bus in bus_ids]


def tf_ordinal_to_index(topology: Topology, view: TfView) -> dict[int, int]:
    """``{TF ordinal: topology GPU index}`` for the TF devices that join: by PCI bus id where the
    log gives one, else by a join made earlier (``TfDevice.nvml_index``)."""
    by_bus = index_by_bus_id(topology)
    mapping: dict[int, int] = {}
    for device in view.devices:
        index = by_bus.get(normalize_pci_bus_id(device.pci_bus_id) or "") if device.pci_bus_id else None
        if index is None:
            index = device.nvml_index
        if index is not None:
            mapping[device.ordinal] = index
    return mapping


def tf_gpu_indices(
    topology: Topology | None, bus_ids: Sequence[str | None], environ: Mapping[str, str] | None = None
) -> tuple[list[int], str | None]:
    """The topology index of each of TensorFlow's GPUs (``bus_ids`` in TF ordinal order), and a
    note where the join had to be assumed.

    By PCI bus id where both sides know every id; else by order: PCI order, renumbered by
    ``CUDA_VISIBLE_DEVICES`` where it is set (``2,3`` makes TF's GPU:0 nvidia-smi's GPU 2).
    """
    visible = visible_pci_order(environ)
    if visible is not None and len(visible) < len(bus_ids):
        visible = None
    order = visible if visible is not None else list(range(len(bus_ids)))
    if topology is None:
        return order[: len(bus_ids)], None
    joined = join_by_bus_id(topology, bus_ids)
    if bus_ids and all(index is not None for index in joined):
        return [index for index in joined if index is not None], None
    positions = topology.gpu_indices
    note = "could not join TensorFlow's GPUs to the topology's by PCI bus id; assumed " + (
        "CUDA_VISIBLE_DEVICES's order" if visible is not None else "the same order"
    )
    return [positions[k] if k < len(positions) else k for k in order[: len(bus_ids)]], note
