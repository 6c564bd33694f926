"""``nvbandwidth -j`` JSON -> Topology, read like the text form (``gputopo.sources.tools.nvbandwidth``).

The document (``json_output.cpp`` of NVIDIA/nvbandwidth): ``{"nvbandwidth": {"CUDA Runtime Version",
"Driver Version", "GPU Device list": ["0: name (dddddddd:bb:dd): (host)", ...], "testcases": [{"name",
"status", "bandwidth_description", "bandwidth_matrix": [["N/A", "276.07", ...], ...], "sum", ...}]}}``
with the numbers as strings. Lines around the object (warnings nvbandwidth printed, other outputs in
the same paste) are skipped: the object is found by its ``"nvbandwidth"`` key and decoded alone.
"""

from __future__ import annotations

import json
import re
from typing import Any

from gputopo.errors import InputError
from gputopo.model import Gpu, Topology
from gputopo.sources.pasted import MAX_GPUS, device_index, hex_bus_id, number, undecorated_lines
from gputopo.sources.tools.nvbandwidth import DESCRIPTION_RE, Matrix, directed, matrix_kind, topology_from

KIND = "nvbandwidth -j"

_START_RE = re.compile(r'\{\s*"nvbandwidth"\s*:')
_DEVICE_RE = re.compile(r"^(\d+): (.+?)(?: \(([0-9a-fA-F]{4,8}):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\))?(?:: \(.*\))?$")


def sniff(text: str) -> bool:
    """Whether the text holds an ``nvbandwidth -j`` JSON object."""
    return _START_RE.search(text) is not None


def read(text: str, source: str) -> Topology:
    """The GPU pairs measured by the ``nvbandwidth -j`` object in ``text``."""
    body = _document(text, source).get("nvbandwidth")
    if not isinstance(body, dict):
        raise InputError(f'{source}: the JSON object has no "nvbandwidth" object inside')
    gpus = _devices(body.get("GPU Device list"))
    matrices: list[Matrix] = []
    host_columns = 0
    cases = body.get("testcases")
    for case in cases if isinstance(cases, list) else []:
        if not isinstance(case, dict) or case.get("status") not in (None, "Passed"):
            continue
        description = re.search(DESCRIPTION_RE, str(case.get("bandwidth_description", ""))[:300])
        rows = case.get("bandwidth_matrix")
        if description is None or not isinstance(rows, list):
            continue
        cells = _cells(rows, description.group("arrow"))
        if description.group("row") == "CPU":
            host_columns = max(host_columns, 1 + max((max(pair) for pair in cells), default=-1))
            continue
        name = case.get("name")
        matrices.append(Matrix(name if isinstance(name, str) else None, matrix_kind(description), cells))
    return topology_from(gpus, matrices, host_columns, source, "nvbandwidth -j")


def _document(text: str, source: str) -> dict[str, Any]:
    text = "\n".join(undecorated_lines(text))  # a quote's or a prompt's marks before every line are no JSON
    start = _START_RE.search(text)
    if start is None:
        raise InputError(f'{source}: no nvbandwidth JSON object (a {{ "nvbandwidth" : ... }} block)')
    try:
        document, _ = json.JSONDecoder().raw_decode(text, start.start())
    except RecursionError:
        raise InputError(f"{source}: the nvbandwidth JSON is nested too deeply to be nvbandwidth's") from None
    except json.JSONDecodeError as exc:
        raise InputError(f"{source}: the nvbandwidth JSON is cut or damaged ({exc.msg} at line {exc.lineno})") from None
    except ValueError:  # an integer of more than 4300 digits (int() refuses it), which nvbandwidth never prints
        raise InputError(f"{source}: the nvbandwidth JSON holds a number of thousands of digits; not nvbandwidth's") from None
    return document


def _devices(listing: Any) -> dict[int, Gpu]:
    gpus: dict[int, Gpu] = {}
    for entry in listing if isinstance(listing, list) else []:
        m = _DEVICE_RE.match(str(entry)[:300])
        if m and (index := device_index(m.group(1))) is not None:
            bus = hex_bus_id(m.group(3), m.group(4), m.group(5)) if m.group(3) else None
            gpus[index] = Gpu(index=index, name=m.group(2).strip(), pci_bus_id=bus)
    return gpus


def _cells(rows: list[Any], arrow: str) -> dict[tuple[int, int], float]:
    cells: dict[tuple[int, int], float] = {}
    for row, values in enumerate(rows[:MAX_GPUS]):
        for column, value in enumerate(values[:MAX_GPUS] if isinstance(values, list) else []):
            figure = number(str(value)) if isinstance(value, (str, int, float)) else None
            if figure is None:
                continue
            cells[directed(arrow, row, column) if row != column else (row, column)] = figure
    return cells
