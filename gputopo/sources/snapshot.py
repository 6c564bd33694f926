"""Saved topology snapshots (``gputopo scan --save``): JSON in the ``gputopo.topology/1`` schema."""

from __future__ import annotations

import json
import os
import re

from gputopo.errors import InputError
from gputopo.fileio import atomic_write_text
from gputopo.model import Topology


def looks_like_snapshot(text: str) -> bool:
    return text.lstrip().startswith("{")


# `gputopo report` embeds the snapshot in its page as
# <script type="application/json" id="gputopo-snapshot">JSON with <, >, & written as \u003c ...</script>
REPORT_SNAPSHOT_ID = "gputopo-snapshot"
_REPORT_SNAPSHOT_RE = re.compile(
    r'<script type="application/json" id="' + REPORT_SNAPSHOT_ID + r'">(?P<json>.*?)</script>', re.DOTALL
)


def looks_like_report(text: str) -> bool:
    """An HTML page (a `gputopo report`, or another page given by mistake)."""
    head = text.lstrip()[:200].lower()
    return head.startswith("<!doctype html") or head.startswith("<html")


def report_snapshot_script(topology: Topology) -> str:
    """The ``<script>`` element that embeds the snapshot in a page; ``report_snapshot_text`` reads it.

    ``<``, ``>`` and ``&`` are written as JSON escapes, so no text from the topology (GPU names,
    paths) can close the element or start markup; ``json.loads`` reads them back unchanged."""
    body = json.dumps(topology.to_dict(), indent=1)
    body = body.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{REPORT_SNAPSHOT_ID}">{body}</script>'


def report_snapshot_text(text: str, source: str = "report") -> str:
    """The snapshot JSON embedded in a `gputopo report` page; an ``InputError`` if there is none."""
    match = _REPORT_SNAPSHOT_RE.search(text)
    if match is None:
        raise InputError(
            f"{source} is an HTML page without an embedded gputopo snapshot "
            f"(expected a page written by `gputopo report`)"
        )
    return match.group("json")


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
