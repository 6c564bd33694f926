"""``nvidia-smi nvlink -s`` (``--status``), ``-R`` (remote) and ``-c`` (``--capabilities``) -> Topology
with the state of every NVLink (``Topology.nvlinks``).

``GPU N: name (UUID: GPU-...)`` lines start a GPU; under it ``Link L: 25.781 GB/s`` (active, its
speed per direction), ``Link L: <inactive>``, ``Link L: Remote ... 0000:xx:yy.z`` (the far end) and
``Link L, <capability>: true|false``. Lines of other outputs are skipped; a GPU whose lines were cut
(``[snip]``) is simply not listed: unknown, not absent. A line that only elides (``...``, ``[snip]``)
right after a GPU's links that are fewer than another GPU shows may stand for the rest of its list:
its count of active links is then unknown (an ``nvlink-list-cut`` note), never "links down". The
output never says which peer a link reaches (except ``-R``), so no GPU pair is linked here.

``-R`` numbers only the links that are up (an H100 PCIe with links 0-3, 6-9, 12-15 active lists them
as 0-11; the far-end link numbers it prints match those active links): where the same paste has the
GPU's ``-s`` lines and as many active links as ``-R`` lines, the far ends go to the active links in
order; otherwise to the link number ``-R`` prints.
"""

from __future__ import annotations

import re

from gputopo.errors import InputError
from gputopo.model import Gpu, NvLinkState, ReadingNote, Topology, normalize_pci_bus_id
from gputopo.sources.pasted import capped, device_index, lines_of, number

KIND = "nvidia-smi nvlink"
MAX_LINKS_PER_GPU = 64

# Each pattern is anchored or bounded. The GPU's name runs to the end of the line and its UUID, where
# printed, is found at the end alone (``(.+?)(?: \(UUID: ...\))?\s*$`` tried ``\s*$`` at every length
# of the name); a far end is looked for after the first ``Remote`` (``.*?Remote.*?(bus id)`` ran to
# the end of the line from every ``Remote``).
_GPU_RE = re.compile(r"^\s*+GPU (\d{1,9}): (.+)$")
_UUID_TAIL_RE = re.compile(r" \(UUID: ([^()]{0,80})\)$")  # a pasted UUID may be elided: "..."
_UUID_RE = re.compile(r"GPU-[0-9a-fA-F-]+")
_STATE_RE = re.compile(r"^\s*+Link (\d{1,9}): (?:(<inactive>)|([0-9.]{1,20}) GB/s)\s*$")
_LINK_RE = re.compile(r"^\s*+Link (\d{1,9}): ")
_BUS_ID_RE = re.compile(r"(?:[0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]")
# A line that only stands for lines left out: ``...``, ``....``, ``…``, ``[snip]``, ``<snip>``, ``(snipped)``.
ELIDED_RE = re.compile(r"^\s*+(?:\.{3,}|…+|[\[<(]\s*snip(?:ped)?\s*[\]>)])\s*$", re.IGNORECASE)
_CAPABILITY_RE = re.compile(r"^\s*+Link (\d{1,9}), (.{1,60}?): (true|false)\s*$")
# Blanks of its own line only: ``^\s*`` searched over the whole text ran across every blank line below.
_SNIFF_RE = re.compile(r"(?m)^[^\S\n]*+Link \d{1,9}(?:: (?:<inactive>|[0-9.]{1,20} GB/s)|, .{1,60}: (?:true|false))\s*$")


def sniff(text: str) -> bool:
    """Whether the text holds ``nvidia-smi nvlink`` link lines."""
    return _SNIFF_RE.search(text) is not None


def read(text: str, source: str) -> Topology:
    """Every GPU's NVLinks as the ``nvidia-smi nvlink`` output in ``text`` states them."""
    gpus: dict[int, Gpu] = {}
    states: dict[tuple[int, int], NvLinkState] = {}
    remotes: dict[int, list[tuple[int, str | None]]] = {}  # GPU -> (link number -R printed, far end)
    current: int | None = None
    elided: dict[int, int] = {}  # GPU -> the line of an elision right below its links
    for number_, line in enumerate(map(capped, lines_of(text)), start=1):
        if (m := _GPU_RE.match(line)) and (index := device_index(m.group(1))) is not None:
            current = index
            name, uuid = _name_and_uuid(m.group(2))
            gpus.setdefault(index, Gpu(index=index, name=name[:200], uuid=uuid))
            continue
        if current is None:
            continue
        if ELIDED_RE.match(line):
            elided.setdefault(current, number_)
            continue
        m = _STATE_RE.match(line) or _CAPABILITY_RE.match(line)
        remote = None if m else _remote(line)
        said = m.group(1) if m else remote[0] if remote else None
        if said is None:
            continue
        link = int(said) if len(said) <= 3 else MAX_LINKS_PER_GPU
        if link >= MAX_LINKS_PER_GPU:
            continue
        if remote is not None:
            remotes.setdefault(current, []).append((link, normalize_pci_bus_id(remote[1])))
            continue
        state = states.setdefault((current, link), NvLinkState(gpu=current, link=link))
        if m.re is _STATE_RE:
            state.active = m.group(2) is None
            state.gbps = number(m.group(3)) if m.group(3) else None
        elif len(state.capabilities) < 16:
            state.capabilities[m.group(2).strip()] = m.group(3) == "true"
    _place_remotes(states, remotes)
    if not states:
        raise InputError(f"{source}: `nvidia-smi nvlink` lines without a `GPU N:` line above them")
    cut = _cut_lists(states, elided)
    for gpu in gpus.values():
        said = [s.active for s in states.values() if s.gpu == gpu.index and s.active is not None]
        gpu.nvlink_active_links = sum(said) if said and gpu.index not in cut else None
    topo = Topology(gpus=sorted(gpus.values(), key=lambda g: g.index), source="nvidia-smi-nvlink",
                    source_detail=source, label=f"NVLinks of {len(gpus)} GPUs (nvidia-smi nvlink)")
    topo.nvlinks = sorted(states.values(), key=lambda s: (s.gpu, s.link))
    if cut:
        topo.reading_notes.append(ReadingNote("nvlink-list-cut", {
            "source": source, "lines": [elided[g] for g in cut],
            "links_listed": [sum(1 for s in states.values() if s.gpu == g) for g in cut]}, cut))
    return topo


def _cut_lists(states: dict[tuple[int, int], NvLinkState], elided: dict[int, int]) -> list[int]:
    """The GPUs whose link list an elision cut: one right below their links, which are fewer than
    another GPU lists (an elision after a whole list stands for GPUs left out, not for its links)."""
    listed: dict[int, int] = {}
    for gpu, _ in states:
        listed[gpu] = listed.get(gpu, 0) + 1
    most = max(listed.values(), default=0)
    return sorted(g for g in elided if listed.get(g, 0) < most)


def _name_and_uuid(rest: str) -> tuple[str, str | None]:
    """``name (UUID: GPU-...)`` (the UUID optional, blanks after it) -> the name and the UUID, where whole."""
    rest = rest.rstrip()
    tail = _UUID_TAIL_RE.search(rest, max(1, len(rest) - 100))  # the name has at least one character
    if tail is None:
        return rest.strip(), None
    uuid = tail.group(1).strip()
    return rest[: tail.start()].strip(), uuid if _UUID_RE.fullmatch(uuid) else None


def _remote(line: str) -> tuple[str, str] | None:
    """``Link L: ... Remote ... <bus id>`` (``-R``): the link number and the first bus id after ``Remote``."""
    head = _LINK_RE.match(line)
    at = line.find("Remote", head.end()) if head else -1
    bus = _BUS_ID_RE.search(line, at + len("Remote")) if at >= 0 else None
    return (head.group(1), bus.group(0)) if head and bus else None


def _place_remotes(states: dict[tuple[int, int], NvLinkState], remotes: dict[int, list[tuple[int, str | None]]]) -> None:
    """Put ``-R``'s far ends on the links (see the module docstring for the numbering)."""
    for gpu, ends in remotes.items():
        active = sorted(link for (g, link), state in states.items() if g == gpu and state.active)
        numbers = active if len(active) == len(ends) else [link for link, _ in ends]
        for link, (_, remote) in zip(numbers, ends):
            states.setdefault((gpu, link), NvLinkState(gpu=gpu, link=link)).remote = remote
