"""A host's topology as NCCL's topology XML (the file ``NCCL_TOPO_DUMP_FILE`` writes and
``NCCL_TOPO_FILE`` reads): ``gputopo nccl-topo``.

The document has the shape of NCCL's dump (src/graph/xml.cc, topo.cc) and of what
``sources/tools/nccl_xml.py`` reads back: ``<system version="1">``, one ``<cpu numaid=...>`` per NUMA
node (its ``affinity`` as the kernel's hex cpumask where the GPUs' CPU affinity gives it), under it
a ``<pci>`` tree, and in each GPU's own ``<pci busid=...>`` a ``<gpu dev sm rank gdr>`` with its
``<nvlink target count tclass>`` children (``dev``: the GPU's NVML index on its host; for one tray
of a rack read as one topology, its place among the tray's GPUs). What a source knows of the PCIe tree is the word for
each pair, not the bridges, so the bridges are made up from the words, with bus ids that are not
any device's (a comment says so):

- GPUs whose pair word is ``PIX`` share one switch; ``PXB``: two switches under one upper switch;
  any other word within a NUMA node (``PHB``, ``NODE``): separate trees under the CPU. NCCL's
  XML has one ``<cpu>`` per NUMA node and no host bridge of its own, so ``PHB`` and ``NODE`` are
  written alike (NCCL itself places both pairs under the CPU);
- NVLink: direct pairs get ``<nvlink target="<the other GPU's bus id>" count="N" tclass="0x030200">``
  (NCCL's ``ncclTopoAddNvLinks`` refuses an ``<nvlink>`` without ``tclass``); on NVSwitch
  boards every GPU gets one ``<nvlink>`` to an NVSwitch (``tclass="0x068000"``) with its link
  count, as NCCL's dump shows them;
- NICs are left out: a NIC's ``guid`` and ``speed`` gputopo does not know, and wrong ones lose NICs
  or GPUDirect RDMA in NCCL (nccl#1303); NCCL adds the host's NICs itself when it loads the file.

Every attribute is a number gputopo wrote or a bus id it normalised, through ``quoting.xml_attr``.
"""

from __future__ import annotations

import re
from collections import defaultdict

from gputopo.errors import InputError
from gputopo.model import Gpu, Topology
from gputopo.model.words import PCIE_PATHS
from gputopo.notation import parse_cpu_list
from gputopo.quoting import xml_attr, xml_comment

NVSWITCH_CLASS = "0x068000"
BRIDGE_CLASS = "0x060400"
GPU_CLASS = "0x030200"
_SPEED_OF_GEN = {1: "2.5 GT/s PCIe", 2: "5.0 GT/s PCIe", 3: "8.0 GT/s PCIe", 4: "16.0 GT/s PCIe",
                 5: "32.0 GT/s PCIe", 6: "64.0 GT/s PCIe"}


def _groups(indices: list[int], joined: set[tuple[int, int]]) -> list[list[int]]:
    """Connected groups of ``indices`` over the ``joined`` pairs, each sorted, in order of their first."""
    parent = {i: i for i in indices}

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in joined:
        if a in parent and b in parent:
            parent[find(a)] = find(b)
    groups: dict[int, list[int]] = defaultdict(list)
    for i in indices:
        groups[find(i)].append(i)
    return sorted(groups.values(), key=min)


def _pcie_words(topology: Topology) -> dict[tuple[int, int], str]:
    """Each pair's PCIe word: the path NVML read beside an NVLink, else the link's own word."""
    words = {}
    for link in topology.links:
        word = link.pcie_path or (link.type if link.type in PCIE_PATHS else None)
        if word in PCIE_PATHS:
            words[(link.a, link.b)] = word
    return words


def _cpumask(cpus: list[int]) -> str:
    """CPU ids as the kernel's cpumask: 32-bit hex words, most significant first, comma-separated."""
    words = [0] * (max(cpus) // 32 + 1)
    for cpu in cpus:
        words[cpu // 32] |= 1 << (cpu % 32)
    return ",".join(f"{w:08x}" for w in reversed(words))


_CAPABILITY = re.compile(r"([0-9]{1,2})(?:\.([0-9]{1,2}))?")


class _BusIds:
    """Made-up bus ids for the bridges: bus numbers no GPU of the host uses, from 0xff down."""

    def __init__(self, used: set[str]) -> None:
        self.used_buses = {bus.split(":")[1] for bus in used if bus.count(":") >= 2}  # (a snapshot's bus id may be anything)
        self.next_bus = 0xFF
        self.device = 0

    def take(self) -> str:
        while f"{self.next_bus:02x}" in self.used_buses and self.next_bus > 0:
            self.next_bus -= 1
        busid = f"0000:{self.next_bus:02x}:{self.device:02x}.0"
        self.device += 1
        if self.device == 32:
            self.device, self.next_bus = 0, self.next_bus - 1
        if self.next_bus < 0:
            raise InputError("too many PCIe bridges to number in one NCCL topology file")
        return busid


def _host_gpus(topology: Topology, node: str | None) -> list[Gpu]:
    hosts = list(dict.fromkeys(gpu.host for gpu in topology.gpus))
    if len(hosts) <= 1:
        return list(topology.gpus)
    if node is None or node not in hosts:
        shown = ", ".join(str(h) for h in hosts[:6]) + (", ..." if len(hosts) > 6 else "")
        raise InputError(f"the topology holds {len(hosts)} hosts ({shown}): name one with --node (NCCL's file is per host)")
    return [gpu for gpu in topology.gpus if gpu.host == node]


def _gpu_lines(gpu: Gpu, dev: int, depth: int, nvlinks: list[tuple[str, int, str | None]], bus: str,
               indent: str) -> list[str]:
    speed = _SPEED_OF_GEN.get(gpu.pcie_gen_current or gpu.pcie_gen_max or 0)
    width = gpu.pcie_width_current or gpu.pcie_width_max
    pci = f'<pci busid={xml_attr(bus)} class="{GPU_CLASS}"'
    pci += f" link_speed={xml_attr(speed)}" if speed else ""
    pci += f' link_width="{int(width)}"' if width else ""
    sm = ""
    capability = _CAPABILITY.fullmatch(gpu.compute_capability or "")
    if capability:  # ("8.0"; a crafted snapshot's "1.2.3", "²" or 5,000 digits is left out)
        sm = f' sm="{int(capability.group(1)) * 10 + int(capability.group(2) or 0)}"'
    lines = [indent * depth + pci + ">", indent * (depth + 1) + f'<gpu dev="{int(dev)}"{sm} rank="{int(dev)}" gdr="1">']
    for target, count, tclass in nvlinks:
        attrs = f'<nvlink target={xml_attr(target)} count="{int(count)}"'
        lines.append(indent * (depth + 2) + attrs + (f' tclass="{tclass}"' if tclass else "") + "/>")
    lines += [indent * (depth + 1) + "</gpu>", indent * depth + "</pci>"]
    return lines


def nccl_topology_xml(topology: Topology, node: str | None = None) -> str:
    """The host's GPUs as NCCL's topology XML (module docstring)."""
    gpus = _host_gpus(topology, node)
    if not gpus:
        raise InputError("the topology has no GPUs: nothing for NCCL's topology file")
    made_up_bus = [g.index for g in gpus if not g.pci_bus_id]
    bus_of = {g.index: g.pci_bus_id or f"0000:{0x10 + i:02x}:00.0" for i, g in enumerate(gpus)}
    if made_up_bus and len(set(bus_of.values())) != len(bus_of):
        raise InputError("some GPUs have no PCI bus id and the ids made up for them clash: not written")
    words = _pcie_words(topology)
    indices = [g.index for g in gpus]
    chosen = set(indices)
    words = {pair: word for pair, word in words.items() if pair[0] in chosen and pair[1] in chosen}
    buses = _BusIds(set(bus_of.values()))
    nvlinks: dict[int, list[tuple[str, int, str | None]]] = defaultdict(list)
    switch_counts: dict[int, int] = {}
    for link in topology.links:
        if link.a in chosen and link.b in chosen and link.nvlink_count > 0:
            if link.nvswitch:
                for end in (link.a, link.b):
                    switch_counts[end] = max(switch_counts.get(end, 0), link.nvlink_count)
            else:
                nvlinks[link.a].append((bus_of[link.b], link.nvlink_count, GPU_CLASS))
                nvlinks[link.b].append((bus_of[link.a], link.nvlink_count, GPU_CLASS))
    if switch_counts:
        switch_bus = buses.take()
        for index, count in switch_counts.items():
            nvlinks[index].append((switch_bus, count, NVSWITCH_CLASS))
    indent = "  "
    lines = ['<system version="1">',
             indent + xml_comment("written by gputopo nccl-topo from " + (topology.source_detail or topology.source)
                                  + "; bridges and their bus ids are made up from the pair words (PIX, PXB, NODE); "
                                    "NICs left out (NCCL adds them)"
                                  + ("; GPU(s) " + ",".join(map(str, made_up_bus)) + " have made-up bus ids"
                                     if made_up_bus else ""))]
    by_index = {g.index: g for g in gpus}
    # dev is the GPU's NVML index on its host: a rack's tray numbers its own GPUs from 0.
    several_hosts = len(gpus) < len(topology.gpus)
    dev_of = {index: (position if several_hosts else index) for position, index in enumerate(sorted(indices))}
    numa_groups = _groups(indices, {p for p, w in words.items() if w != "SYS"})
    for position, members in enumerate(numa_groups):
        nodes = {by_index[i].numa_node for i in members}
        numaid = nodes.pop() if len(nodes) == 1 and None not in nodes else position
        cpus = sorted({c for i in members for c in (parse_cpu_list(by_index[i].cpu_affinity) or [])})
        affinity = f" affinity={xml_attr(_cpumask(cpus))}" if cpus else ""
        lines.append(indent + f'<cpu numaid="{int(numaid)}"{affinity}>')
        tops = _groups(members, {p for p, w in words.items() if w in ("PIX", "PXB")})
        for top in tops:
            lines.append(indent * 2 + f'<pci busid={xml_attr(buses.take())} class="{BRIDGE_CLASS}">')
            for switch in _groups(top, {p for p, w in words.items() if w == "PIX"}):
                lines.append(indent * 3 + f'<pci busid={xml_attr(buses.take())} class="{BRIDGE_CLASS}">')
                for index in switch:
                    lines += _gpu_lines(by_index[index], dev_of[index], 4, nvlinks.get(index, []), bus_of[index], indent)
                lines.append(indent * 3 + "</pci>")
            lines.append(indent * 2 + "</pci>")
        lines.append(indent + "</cpu>")
    lines.append("</system>")
    return "\n".join(lines) + "\n"
