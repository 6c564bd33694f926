"""Saved topology snapshots (``gputopo scan --save``): JSON in the ``gputopo.topology/1`` schema."""

from __future__ import annotations

import json
import os

from gputopo.errors import InputError
from gputopo.fileio import atomic_write_text
from gputopo.model import Topology


def looks_like_snapshot(text: str) -> bool:
    return text.lstrip().startswith("{")


def parse_snapshot(text: str, source: str = "snapshot") -> Topology:
    """A Topology from snapshot JSON text; any problem is an ``InputError`` naming ``source``."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{source} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    try:
        return Topology.from_dict(data)
    except ValueError as exc:
        raise InputError(f"{source}: {exc}") from None


def snapshot_json(topology: Topology) -> str:
    return json.dumps(topology.to_dict(), indent=2) + "\n"


def save_snapshot(topology: Topology, path: str | os.PathLike[str]) -> None:
    """Write the snapshot atomically: a crash leaves the old file or the new one, never half of one."""
    atomic_write_text(path, snapshot_json(topology))
