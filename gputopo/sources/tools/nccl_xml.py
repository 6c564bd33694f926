"""NCCL's topology XML (``NCCL_TOPO_DUMP_FILE`` / ``NCCL_TOPO_FILE``) -> Topology.

``<system version="1">`` holds ``<cpu numaid affinity ...>`` (a NUMA node), ``<pci busid class
link_speed link_width>`` trees under it, and in them ``<gpu dev sm rank gdr>`` with ``<nvlink target
count tclass>`` children and ``<nic><net name speed gdr .../></nic>``. ``dev`` is the NVML index
(nvidia-smi's). An NVLink whose target is another GPU's bus id is a direct NV<count> between the two;
a target of class ``0x068000`` is an NVSwitch, so GPUs with NVSwitch links reach each other through
the fabric (NV<n>, n = the fewer of their switch links). Pairs without NVLink get a PCIe word from the
tree, as nvidia-smi would word it (inferred): another NUMA node SYS, another top-level PCI tree of the
same node NODE, the same parent bridge PIX, else PXB; each GPU's way to each NIC is worded so too
(``nic_links``), and not at all where the text does not place the two.

The document is also the machine's fabric graph (``Topology.fabric``): each ``<cpu numaid>`` a NUMA
node, each ``<pci busid>`` a bridge under what encloses it (the one holding a ``<gpu>`` that GPU, a
``<nic>`` that NIC), with the PCIe link it states; NCCL writes no host bridge or root port, so the
tree gives no PCIe pair word of its own. Each ``<nvlink>`` is an edge (``sources.host.fabric_nvlink``:
to the GPU of its target's bus id, or, class ``0x068000``, to that NVSwitch; NCCL's
``fffffff:ffff:ff``, a switch the host cannot see, to the one ``nvswitch:fabric`` node).

The XML is parsed only after refusing what a topology file never holds: a DOCTYPE or an ENTITY
(no entity expansion can be triggered), more than ``MAX_XML_CHARS``, or elements nested more than
``MAX_XML_DEPTH`` deep (NCCL's dumps nest a few levels; the tree is walked without recursion all the
same). Tags are found by one linear pass (``_TAG_RE``). A dump pasted cut short (no
``</system>``) is read up to its last whole tag, the elements left open closed; the GPU whose
``<gpu>`` element was cut keeps its place and PCIe path, but its pairs without a known NVLink are
UNKNOWN (its NVLink list may go on), and the cut is said.

A fragment without its ``<system>`` root (a paste of ``<cpu>`` or ``<pci>`` elements holding a
``<gpu dev=...>``) is read as the elements it has, and the missing root is said
(``nccl-xml-no-root``): closing tags of elements the fragment does not open are skipped. Where no
``<cpu>`` encloses the GPUs, their NUMA nodes are unknown, and so is the PCIe word of a pair that
shares no ``<pci>`` above it (the fragment does not show whether their trees hang off one CPU). A
fragment that leaves an element open is cut short too: a ``<gpu>`` left open is the cut GPU above.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Iterator

from gputopo.errors import InputError
from gputopo.model import (
    MAX_NVLINKS_PER_PAIR,
    Gpu,
    Nic,
    NicLink,
    ReadingNote,
    Topology,
    make_link,
    normalize_pci_bus_id,
)
from gputopo.model.fabric import BRIDGE, GPU, NIC, NUMA, NVSWITCH, Fabric, FabricNode
from gputopo.sources.host.fabric_nvlink import (
    REMOTE_GPU,
    REMOTE_SWITCH,
    LinkEnd,
    add_nvlink_edges,
)
from gputopo.sources.pasted import MAX_GPUS, device_index

KIND = "NCCL topology XML"
MAX_XML_CHARS = 4_000_000
MAX_XML_DEPTH = 64  # system > cpu > pci (one per PCIe switch level) > gpu > nvlink: a real dump nests about 8
NVSWITCH_CLASS = "0x068000"
# The name is possessive: ``[\w.\-]*`` handing characters back to ``[^<>]*?`` made a tag cut short
# (``<aaaa...`` with no ``>``) cost the square of its length.
_TAG_RE = re.compile(r"<(/?)([A-Za-z_][\w.\-]*+)[^<>]*?(/?)>")
_GEN_OF_SPEED = {"2.5": 1, "5": 2, "5.0": 2, "8": 3, "8.0": 3, "16": 4, "16.0": 4, "32": 5, "32.0": 5, "64": 6, "64.0": 6}


_ROOT_RE = re.compile(r"<system\s+version\s*=")
_GPU_TAG_RE = re.compile(r"<gpu\s+dev\s*=")
_FRAGMENT_TOP_RE = re.compile(r"<(?:cpu|pci)\s")


def sniff(text: str) -> bool:
    """Whether the text holds a ``<system version=...>`` topology document, or a fragment of one (a
    ``<gpu dev=...>`` element after a ``<cpu>`` or ``<pci>`` element)."""
    if _ROOT_RE.search(text) is not None:
        return True
    top = _FRAGMENT_TOP_RE.search(text)
    return top is not None and _GPU_TAG_RE.search(text, top.end()) is not None


def _document(text: str, source: str) -> tuple[ET.Element, list[str] | None]:
    """The ``<system>`` element, and for a dump cut short the tags that were left open (else None)."""
    start = _ROOT_RE.search(text)
    if start is None:
        return _fragment(text, source)
    end = text.find("</system>", start.start())
    body = text[start.start() : end + len("</system>")] if end >= 0 else text[start.start() : text.rfind(">") + 1]
    if len(body) > MAX_XML_CHARS:
        raise InputError(f"{source}: the NCCL topology XML is over {MAX_XML_CHARS} characters; not a real dump")
    if re.search(r"<!(?:DOCTYPE|ENTITY)", text[: start.start() + len(body)], re.IGNORECASE):
        raise InputError(f"{source}: the XML declares a DOCTYPE or ENTITY, which NCCL topology files never do; refused")
    left_open, depth = _open_tags(body)
    if depth > MAX_XML_DEPTH:
        raise InputError(f"{source}: the NCCL topology XML nests elements {depth} deep; NCCL's dumps nest a few "
                         f"levels (at most {MAX_XML_DEPTH} are read); refused")
    open_tags = left_open if end < 0 else None
    if open_tags is not None:
        body += "".join(f"</{tag}>" for tag in reversed(open_tags))
    try:
        return ET.fromstring(body), open_tags
    except ET.ParseError as exc:
        raise InputError(f"{source}: the NCCL topology XML is damaged ({str(exc)[:80]})") from None


def _fragment(text: str, source: str) -> tuple[ET.Element, list[str] | None]:
    """Elements of a dump pasted without ``<system>``, under a ``<system>`` of their own (its
    ``fragment`` attribute marks it); closing tags the fragment does not open are skipped. The
    elements it opens and leaves open are returned as a cut document's are (a fragment cut short)."""
    top = _FRAGMENT_TOP_RE.search(text)
    if top is None or _GPU_TAG_RE.search(text, top.end()) is None:
        raise InputError(f"{source}: no NCCL topology XML (<system version=...>, or <cpu>/<pci> elements with a <gpu>)")
    body = text[top.start() : text.rfind(">") + 1]
    if len(body) > MAX_XML_CHARS:
        raise InputError(f"{source}: the NCCL topology XML is over {MAX_XML_CHARS} characters; not a real dump")
    if re.search(r"<!(?:DOCTYPE|ENTITY)", text[: top.start() + len(body)], re.IGNORECASE):
        raise InputError(f"{source}: the XML declares a DOCTYPE or ENTITY, which NCCL topology files never do; refused")
    kept: list[str] = []
    stack: list[str] = []
    at = 0
    for tag in _TAG_RE.finditer(body):
        closing, name, empty = tag.groups()
        if closing and (not stack or stack[-1] != name):
            kept.append(body[at : tag.start()])  # a closing tag of an element opened before the fragment
            at = tag.end()
        elif closing:
            stack.pop()
        elif not empty:
            stack.append(name)
            if len(stack) > MAX_XML_DEPTH:
                raise InputError(f"{source}: the NCCL topology XML nests elements over {MAX_XML_DEPTH} deep; NCCL's "
                                 "dumps nest a few levels; refused")
    kept.append(body[at:])
    wrapped = '<system version="fragment">' + "".join(kept) + "".join(f"</{t}>" for t in reversed(stack)) + "</system>"
    try:  # elements the fragment opens and never closes: it was cut there, as a dump without </system>
        return ET.fromstring(wrapped), (stack or None)
    except ET.ParseError as exc:
        raise InputError(f"{source}: the NCCL topology XML fragment is damaged ({str(exc)[:80]})") from None


def _open_tags(body: str) -> tuple[list[str], int]:
    """The elements a cut document leaves open, outermost first, and the deepest nesting seen."""
    stack: list[str] = []
    depth = 0
    for closing, tag, empty in _TAG_RE.findall(body):
        if closing:
            if stack and stack[-1] == tag:
                stack.pop()
        elif not empty:
            stack.append(tag)
            depth = max(depth, len(stack))
    return stack, depth


def read(text: str, source: str) -> Topology:
    """GPUs, NVLinks, PCIe paths and NICs of the NCCL topology XML in ``text``."""
    root, open_tags = _document(text, source)
    gpus: dict[int, Gpu] = {}
    paths: dict[int, list[str]] = {}  # GPU -> its PCI bus ids from the top of its cpu down
    nvlinks: dict[int, list[tuple[str, int, str]]] = {}
    nics: list[Nic] = []
    nic_paths: list[list[str]] = []  # beside ``nics``: each NIC's path of <pci> bus ids
    fragment = root.get("version") == "fragment"
    cpus = list(root.iter("cpu"))
    for numa, cpu in enumerate(cpus):
        node = _int(cpu.get("numaid"))
        _walk(cpu, node if node is not None else numa, gpus, paths, nvlinks, nics, nic_paths)
    if fragment and not cpus:  # <pci> elements only: under which CPU (NUMA node) is not in the text
        _walk(root, None, gpus, paths, nvlinks, nics, nic_paths)
    if open_tags is not None and not gpus:
        raise InputError(f"{source}: the NCCL topology XML is cut (no </system>) before its first <gpu>")
    if len(gpus) > MAX_GPUS:
        raise InputError(f"{source}: {len(gpus)} GPUs in one topology file; more than {MAX_GPUS}")
    for index, links in nvlinks.items():  # (NV100 was shown and saved, and the snapshot did not read back)
        if sum(count for _, count, _ in links) > MAX_NVLINKS_PER_PAIR:
            raise InputError(f"{source}: GPU {index}'s <nvlink> elements count {sum(c for _, c, _ in links)} links, "
                             f"more NVLinks than a GPU has (at most {MAX_NVLINKS_PER_PAIR} are read); not a real dump")
    topo = Topology(gpus=sorted(gpus.values(), key=lambda g: g.index), nics=nics, source="nccl-xml",
                    source_detail=source, label=f"{len(gpus)} GPUs in an NCCL topology XML")
    # The <gpu> left open by a cut is the last one read: its NVLink list may go on past the cut.
    cut_gpu = list(gpus)[-1] if open_tags and "gpu" in open_tags and gpus else None
    _links(topo, paths, nvlinks, cut_gpu)
    topo.nic_links = [NicLink(gpu.index, nic.name, word) for gpu in topo.gpus for nic, nic_path in zip(nics, nic_paths)
                      if (word := _pcie_word(gpu.numa_node, nic.numa_node, paths.get(gpu.index, []), nic_path)) != "UNKNOWN"]
    for index, links in nvlinks.items():  # NCCL writes only the links that are up (``_link_ends``)
        if index != cut_gpu and links:
            gpus[index].nvlink_active_links = sum(count for _, count, _ in links)
    topo.fabric = _tree(root, cpus, fragment)
    add_nvlink_edges(topo, _link_ends(topo, nvlinks))
    if open_tags is not None:
        topo.reading_notes.append(ReadingNote("nccl-xml-cut", {"source": source, "cut_gpu": cut_gpu}))
    if fragment:
        topo.reading_notes.append(ReadingNote("nccl-xml-no-root", {"source": source, "cpus": len(cpus)}))
    return topo


def _walk(cpu: ET.Element, numa: int | None, gpus: dict[int, Gpu], paths: dict[int, list[str]],
          nvlinks: dict[int, list[tuple[str, int, str]]], nics: list[Nic], nic_paths: list[list[str]]) -> None:
    """The GPUs and NICs under ``cpu`` in document order, each with its path of ``<pci>`` bus ids
    (depth first, with a stack of the elements being read: no recursion)."""
    stack: list[tuple[ET.Element, Iterator[ET.Element], list[str]]] = [(cpu, iter(cpu), [])]
    while stack:
        element, children, path = stack[-1]
        child = next(children, None)
        if child is None:
            stack.pop()
        elif child.tag == "pci":
            stack.append((child, iter(child), path + [child.get("busid", "?")]))
        elif child.tag == "gpu" and (index := device_index(child.get("dev", ""))) is not None and index not in gpus:
            gpus[index] = _gpu(index, element, path, numa, child.get("sm"))
            paths[index] = path
            nvlinks[index] = [(link.get("target", "").lower(), _int(link.get("count")) or 0, link.get("tclass", "").lower())
                              for link in child.iter("nvlink")]
        elif child.tag == "nic":
            for net in child.iter("net"):
                nics.append(Nic(name=net.get("name", "?")[:64], pci_bus_id=_bus(path[-1] if path else None), numa_node=numa))
                nic_paths.append(path)


def _gpu(index: int, pci: ET.Element, path: list[str], numa: int | None, sm: str | None) -> Gpu:
    speed = (pci.get("link_speed") or "").split(" ")[0]
    width = _int(pci.get("link_width"))
    return Gpu(index=index, pci_bus_id=_bus(path[-1] if path else None), numa_node=numa,
               pcie_gen_current=_GEN_OF_SPEED.get(speed), pcie_width_current=width or None,
               compute_capability=_capability(sm))


def _capability(sm: str | None) -> str | None:
    """NCCL's ``sm="90"`` (major * 10 + minor) as CUDA writes it, ``9.0``; None where it is not that."""
    number = _int(sm) if sm and sm.isdigit() and len(sm) <= 3 else None
    return f"{number // 10}.{number % 10}" if number else None


def _links(topo: Topology, paths: dict[int, list[str]], nvlinks: dict[int, list[tuple[str, int, str]]],
           cut_gpu: int | None = None) -> None:
    by_bus = {g.pci_bus_id: g.index for g in topo.gpus if g.pci_bus_id}
    switch_links = {i: sum(c for _, c, tclass in links if tclass == NVSWITCH_CLASS) for i, links in nvlinks.items()}
    direct: dict[tuple[int, int], int] = {}
    for a, links in nvlinks.items():
        for target, count, _ in links:
            b = by_bus.get(_bus(target))
            if b is not None and b != a:
                key = (min(a, b), max(a, b))
                direct[key] = max(direct.get(key, 0), count)
    indices = topo.gpu_indices
    for i, a in enumerate(indices):
        for b in indices[i + 1 :]:
            word = _pcie_word(topo.gpu(a).numa_node, topo.gpu(b).numa_node, paths.get(a, []), paths.get(b, []))
            pcie = None if word == "UNKNOWN" else word
            switched = min(switch_links.get(a, 0), switch_links.get(b, 0))
            if direct.get((a, b)):
                topo.links.append(make_link(a, b, f"NV{direct[(a, b)]}", nvswitch=False, pcie_path=pcie))
            elif cut_gpu in (a, b):  # its NVLinks past the cut are not in the text
                topo.links.append(make_link(a, b, "UNKNOWN", nvswitch=None, pcie_path=pcie))
            elif switched:
                topo.links.append(make_link(a, b, f"NV{switched}", nvswitch=True, pcie_path=pcie))
            else:
                topo.links.append(make_link(a, b, word, pcie_path=pcie))


def _tree(root: ET.Element, cpus: list[ET.Element], fragment: bool) -> Fabric | None:
    """The containment the XML states: NUMA nodes, ``<pci>`` bridges, GPUs and NICs (no recursion:
    a stack of (element, its node id)). None where it places no device."""
    fabric = Fabric()
    tops: list[tuple[ET.Element, str | None]] = []
    for numa, cpu in enumerate(cpus):
        node = _int(cpu.get("numaid"))
        node = numa if node is None else node
        tops.append((cpu, fabric.add(FabricNode(f"numa:{node}", NUMA, numa_node=node)).id))
    if fragment and not cpus:
        tops.append((root, None))
    stack = [(child, parent) for element, parent in tops for child in element]
    placed = False
    while stack:
        element, parent = stack.pop()
        bus = _bus(element.get("busid")) if element.tag == "pci" else None
        if bus is None:
            continue
        gpu = next((device_index(g.get("dev", "")) for g in element.findall("gpu")), None)
        card = element.find("nic")
        nic = next((net.get("name", "?")[:64] for net in card.iter("net")), None) if card is not None else None
        kind = GPU if gpu is not None else NIC if nic is not None else BRIDGE
        kind = NVSWITCH if kind == BRIDGE and (element.get("class") or "").lower() == NVSWITCH_CLASS else kind
        speed = (element.get("link_speed") or "").split(" ")[0]
        fabric.add(FabricNode(f"pci:{bus}", kind, parent=parent, bdf=bus, gpu=gpu, nic=nic if kind == NIC else None,
                              link_gts_current=_speed(speed), link_width_current=_int(element.get("link_width")) or None))
        placed = placed or kind in (GPU, NIC)
        stack.extend((child, f"pci:{bus}") for child in element if child.tag == "pci")
    return fabric if placed else None


def _link_ends(topo: Topology, nvlinks: dict[int, list[tuple[str, int, str]]]) -> dict[int, list[LinkEnd]]:
    """Each GPU's ``<nvlink>`` elements as one ``LinkEnd`` per element, its links up: NCCL writes only
    the links NVML says are active when it dumps (``ncclTopoGetXmlFromGpu`` in its ``xml.cc`` skips
    a link whose state is not ``NVML_FEATURE_ENABLED``), so ``count`` is the links up at that time."""
    by_bus = {g.pci_bus_id for g in topo.gpus if g.pci_bus_id}
    ends: dict[int, list[LinkEnd]] = {}
    for index, links in nvlinks.items():
        for target, count, tclass in links:
            bus = _bus(target)
            remote = REMOTE_GPU if bus in by_bus else REMOTE_SWITCH if tclass == NVSWITCH_CLASS else None
            if remote is not None and count > 0:
                ends.setdefault(index, []).append(LinkEnd(remote, bus, True, links=count))
    return ends


def _speed(text: str) -> float | None:
    try:
        return float(text) if text in _GEN_OF_SPEED else None
    except ValueError:
        return None


def _pcie_word(numa_a: int | None, numa_b: int | None, path_a: list[str], path_b: list[str]) -> str:
    """The word for two devices (GPUs, or a GPU and a NIC) from their NUMA nodes and ``<pci>`` paths."""
    shared_top = bool(path_a) and bool(path_b) and path_a[0] == path_b[0]
    if (numa_a is None or numa_b is None) and not shared_top:
        return "UNKNOWN"  # a fragment without <cpu>: whether the trees hang off one CPU is not in the text
    if numa_a != numa_b:
        return "SYS"
    if not path_a or not path_b or path_a[0] != path_b[0]:
        return "NODE"
    if path_a[:-1] == path_b[:-1]:
        return "PIX"
    return "PXB"


def _bus(value: str | None) -> str | None:
    return normalize_pci_bus_id(value) if value else None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        number = int(value, 0)
    except ValueError:
        return None
    return number if 0 <= number < 1 << 31 else None
