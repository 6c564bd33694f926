"""CUDA samples' peer-access answers -> Topology: ``deviceQuery`` (``Device N: "name"`` blocks, then,
with two or more GPUs, ``> Peer access from <name> (GPU0) -> <name> (GPU1) : Yes``) and ``simpleP2P``
(the same peer lines after ``CUDA-capable device count: N``; before CUDA 8 after one
``> GPUn = "name" IS capable of Peer-to-Peer (P2P)`` line per GPU, which names it).

Read: the GPUs (numbered as CUDA numbers them: ``CUDA_DEVICE_ORDER`` and ``CUDA_VISIBLE_DEVICES``
decide, so not necessarily nvidia-smi's numbers) with their names; for each pair, whether CUDA
allows peer access (``cudaDeviceCanAccessPeer``): ``ok`` where every direction said says ``Yes``,
``NS`` where one says ``No``; pairs no line names stay unknown. How the GPUs are wired is never
said (link type ``UNKNOWN``), nor are deviceQuery's PCI numbers read (it prints them in decimal
without the function). ``Detected N CUDA Capable device(s)`` / ``CUDA-capable device count: N``
proves N GPUs where a cut paste names fewer.

Lines are found by their words wherever they sit (a prompt, a ``host:`` prefix, a quote's ``>``,
markdown bold): ``Peer access from`` is searched with ``str.find``, then each side is matched on
the line's first ``LINE_CAP_CHARS`` by bounded patterns.
"""

from __future__ import annotations

import re

from gputopo.errors import InputError
from gputopo.model import Gpu, Topology
from gputopo.sources.pasted import MAX_GPUS, capped, device_index, lines_of, with_all_pairs

KIND = "CUDA samples peer access (deviceQuery, simpleP2P)"
MARKER = "Peer access from "
MAX_NAME = 120
_DEVICE_RE = re.compile(r"Device (\d{1,4}): \"([^\"]{1,%d})\"" % MAX_NAME)
# simpleP2P before CUDA 8 named each GPU first: ``> GPU0 = "      Tesla K80" IS  capable of Peer-to-Peer (P2P)``
_CAPABLE_RE = re.compile(r"GPU(\d{1,4}) = \"([^\"]{1,%d})\" IS\s+(?:NOT\s+)?capable of Peer-to-Peer" % MAX_NAME)
_COUNT_RE = re.compile(r"(?:Detected (\d{1,4}) CUDA Capable device\(s\)|CUDA-capable device count: (\d{1,4}))")


def sniff(text: str) -> bool:
    """Whether the text holds a CUDA sample's ``Peer access from X (GPUa) -> Y (GPUb) : Yes|No`` line."""
    at = text.find(MARKER)
    while at >= 0:
        end = text.find("\n", at)
        if _peer(text[at : end if end >= 0 else len(text)]) is not None:
            return True
        at = text.find(MARKER, at + len(MARKER))
    return False


def _peer(line: str) -> tuple[int, str, int, str, bool] | None:
    """``(a, name of a, b, name of b, answer)`` of a peer line, or ``None`` (string methods only: each
    a single pass over the line's cut part)."""
    at = line.find(MARKER)
    if at < 0:
        return None
    left, arrow, right = capped(line[at + len(MARKER) :]).partition(" -> ")
    left = left.rstrip()
    if not arrow or not left.endswith(")"):
        return None
    open_left = left.rfind("(GPU")
    a = device_index(left[open_left + 4 : -1]) if open_left >= 0 else None
    open_right = right.find("(GPU")
    close_right = right.find(")", open_right) if open_right >= 0 else -1
    b = device_index(right[open_right + 4 : close_right]) if close_right >= 0 else None
    if a is None or b is None or a == b:
        return None
    rest = right[close_right + 1 :].lstrip()
    word = rest[1:].lstrip() if rest.startswith(":") else ""
    yes = word.startswith("Yes") and not word[3:4].isalnum()
    if not yes and not (word.startswith("No") and not word[2:3].isalnum()):
        return None
    return a, _name(left[:open_left]), b, _name(right[:open_right]), yes


def _name(text: str) -> str:
    return text.strip(" *>")[:MAX_NAME].strip()


def read(text: str, source: str) -> Topology:
    """The GPUs and the peer access CUDA reports between them, as the sample's output in ``text`` says."""
    names: dict[int, str] = {}
    answers: dict[tuple[int, int], list[bool]] = {}
    counted = 0
    for line in map(capped, lines_of(text)):
        peer = _peer(line) if MARKER in line else None
        if peer is not None:
            a, name_a, b, name_b, yes = peer
            for index, name in ((a, name_a), (b, name_b)):
                if name:
                    names.setdefault(index, name)
            answers.setdefault((min(a, b), max(a, b)), []).append(yes)
            continue
        device = _DEVICE_RE.search(line) or _CAPABLE_RE.search(line)
        if device and (index := device_index(device.group(1))) is not None:
            names.setdefault(index, device.group(2).strip())
            continue
        count = _COUNT_RE.search(line)
        if count:
            counted = max(counted, int(count.group(1) or count.group(2)))
    if not answers:
        raise InputError(f"{source}: no `Peer access from X (GPU0) -> Y (GPU1) : Yes|No` line of a CUDA sample")
    indices = set(names) | {i for pair in answers for i in pair} | set(range(min(counted, MAX_GPUS)))
    gpus = [Gpu(index=i, name=names.get(i)) for i in sorted(indices)]
    topo = with_all_pairs(gpus, "cuda-peer-access", f"{len(gpus)} GPUs, peer access as CUDA reports it", source)
    for link in topo.links:
        said = answers.get((link.a, link.b))
        if said:
            link.p2p_read = link.p2p_write = "ok" if all(said) else "NS"
    return topo
