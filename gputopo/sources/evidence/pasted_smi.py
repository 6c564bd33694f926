"""``nvidia-smi`` text users paste, for doctor's health checks:

- ``nvidia-smi nvlink -s``: ``GPU N: ...`` then ``Link K: <inactive>`` or ``Link K: 25.781 GB/s``: the
  lines are kept (``PastedEvidence.nvlink_status``) for ``sources.smi.nvlink``, the one reader of that
  output, which scan reads it with too;
- ``nvidia-smi nvlink -e``: ``GPU N: ...`` then ``Link K: Replay Errors: 12`` (each counter by its
  name: ``replay``, ``recovery``, ``crc`` ...). Lines a person condensed (``Links 0-2, 4-5: ...``)
  are no output of nvidia-smi and are not read;
- ``nvidia-smi -q``'s ``Fabric`` section (``State``, ``Status``, and under ``Health``: ``Summary``,
  ``Bandwidth`` ...), nested by indentation, in the ``GPU 00000000:xx:yy.z`` block it belongs to
  where the paste shows that line (grep often leaves only the section).

The topology side of these outputs (GPUs, link counts, bus ids) is ``sources.smi.nvlink`` and
``sources.smi.smi_q``'s; this reads only what doctor judges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from gputopo.sources.evidence.pasted_evidence import PastedEvidence, PastedFabric, full_bdf
from gputopo.sources.smi.nvlink import ELIDED_RE

# Numbers are ASCII digits and bounded: int() refuses a number of more than 4300 digits (a traceback).
_NVLINK_GPU = re.compile(r"^\s*GPU ([0-9]{1,9}):(.*)$")  # the name after it: read in Python, not a lazy group
# No ``\s*(.*?)\s*$`` in these: a lazy group before trailing spaces is quadratic on a long line of
# spaces; the text after the colon is stripped instead.
_NVLINK_LINK = re.compile(r"^\s+Link ([0-9]{1,9}):(.*)$")
_NVLINK_COUNTER = re.compile(r"^(.{1,40}?) Errors?:\s*([0-9]{1,20})$")
_SMI_Q_GPU = re.compile(r"^\s*GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*$")
_FABRIC = re.compile(r"^(\s*)Fabric\s*$")
_TITLE = re.compile(r"[A-Za-z][\w ]*")
MAX_LINKS = 64
MAX_STATUS_LINES = 4096 * 65  # every link of the most GPUs named, with their GPU lines
MAX_NAMED_GPUS = 4096  # the most GPU names kept from `GPU N: name` lines
MAX_FABRIC_FIELDS = 32


@dataclass
class SmiState:
    """What reading nvidia-smi text line by line carries from one line to the next."""

    nvlink_gpu: int | None = None
    nvlink_gpu_line: str | None = None  # that GPU's line, kept until a status line of it is read
    smi_q_gpu: str | None = None  # the bus id of the ``nvidia-smi -q`` GPU block the lines are in
    fabric: PastedFabric | None = None  # the Fabric section being read, with its indentation
    fabric_indent: int = 0
    sections: list[tuple[int, str]] = field(default_factory=list)  # titles inside it: (indentation, name)


def scan_smi(evidence: PastedEvidence, line: str, number: int, state: SmiState) -> bool:
    """Read one line of nvidia-smi text into ``evidence``; whether it was one."""
    if state.fabric is not None and _in_fabric(line, state):
        return True
    gpu_q = _SMI_Q_GPU.match(line)
    if gpu_q:
        state.smi_q_gpu = _bus_id(gpu_q.group(1))
    fabric = _FABRIC.match(line)
    if fabric:
        evidence.add_kind("nvidia-smi -q")
        state.fabric = PastedFabric(state.smi_q_gpu, number)
        state.fabric_indent, state.sections = len(fabric.group(1)), []
        evidence.fabric.append(state.fabric)
        return True
    match = _NVLINK_GPU.match(line)
    if match and not gpu_q:
        state.nvlink_gpu, state.nvlink_gpu_line = int(match.group(1)), line
        name = match.group(2).split(" (UUID", 1)[0].strip()[:80]  # `GPU 3: Tesla V100-SXM2-32GB (UUID: ...)`
        if name and len(evidence.nvlink_names) < MAX_NAMED_GPUS:
            evidence.nvlink_names[state.nvlink_gpu] = name
        return False
    if (state.nvlink_gpu is not None and state.nvlink_gpu_line is None and evidence.nvlink_status
            and len(evidence.nvlink_status) < MAX_STATUS_LINES and ELIDED_RE.match(line)):
        evidence.nvlink_status.append((number, line))  # kept below the GPU's links: the reader says the list is cut
        return True
    link = _NVLINK_LINK.match(line)
    if link is None or state.nvlink_gpu is None or int(link.group(1)) >= MAX_LINKS:
        return False
    said, number_of_link = link.group(2).strip(), int(link.group(1))
    if "GB/s" in said or "inactive" in said:  # read by scan's reader (sources.smi.nvlink): the lines are kept for it
        evidence.add_kind("nvidia-smi nvlink -s")
        if len(evidence.nvlink_status) < MAX_STATUS_LINES:
            if state.nvlink_gpu_line is not None:
                evidence.nvlink_status.append((0, state.nvlink_gpu_line))
                state.nvlink_gpu_line = None
            evidence.nvlink_status.append((number, line))
        return True
    counter = _NVLINK_COUNTER.match(said)
    if counter:
        evidence.add_kind("nvidia-smi nvlink -e")
        name = counter.group(1).strip().lower().replace(" ", "_")
        links = evidence.nvlink_errors.setdefault(state.nvlink_gpu, {})
        links.setdefault(number_of_link, {})[name] = int(counter.group(2))
        return True
    return False


def _bus_id(text: str) -> str:
    """``00000000:01:00.0`` (nvidia-smi's 8-digit domain) -> ``0000:01:00.0``."""
    domain, rest = text.lower().split(":", 1)
    return full_bdf(f"{int(domain, 16):04x}:{rest}")


def _in_fabric(line: str, state: SmiState) -> bool:
    """One line of the Fabric section being read; False (and the section closed) past its end."""
    fabric = state.fabric
    assert fabric is not None
    indent = len(line) - len(line.lstrip())
    if not line.strip() or line.strip() == "--" or indent <= state.fabric_indent:
        state.fabric = None
        return False
    while state.sections and indent <= state.sections[-1][0]:
        state.sections.pop()
    name, colon, value = line.strip().partition(":")
    if colon and name.strip():
        if len(fabric.fields) < MAX_FABRIC_FIELDS:
            key = "/".join([*(title for _, title in state.sections), name.strip()])
            fabric.fields[key] = value.strip()[:80]
        return True
    if _TITLE.fullmatch(line.strip()):
        state.sections.append((indent, line.strip()))
        return True
    state.fabric = None
    return False
