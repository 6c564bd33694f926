"""``gputopo watch --json`` / ``train --watch-file`` lines read back (``report --watch``): per interval
each GPU's NVLinks and PCIe as % of line rate, as the file says it.

Every line is one JSON object; ``gputopo.watch/1`` lines are the intervals, ``gputopo.watch-summary/1``
lines (the summary at the end of a watched command) are passed over, blank lines too. Anything else
-- not JSON, another schema, a field of the wrong kind, a non-finite number, an index out of range,
too many intervals or links -- is one ``InputError`` naming the line and the field (exit 2): the
file is ours, so what gputopo never writes is refused, not guessed at. Figures are kept as read
(``None`` where the file says unknown); nothing here judges them.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from gputopo.errors import InputError
from gputopo.fileio import read_text_input

SCHEMA = "gputopo.watch/1"
SUMMARY_SCHEMA = "gputopo.watch-summary/1"
MAX_BYTES = 256 * 1024 * 1024
MAX_FRAMES = 1_000_000
MAX_GPU = 4095
MAX_LINK = 63
MAX_SERIES = 576 * 18 + 576  # a 576-GPU domain's links and PCIe links
MAX_TEXT = 64


@dataclass
class Series:
    """One link's (``link`` None: the GPU's PCIe) % of line rate per interval (None: unknown)."""

    gpu: int
    link: int | None
    peer: str
    percent: list[float | None] = field(default_factory=list)
    peak_gbps: float = 0.0


@dataclass
class WatchLines:
    path: str
    frames: int = 0
    first_at: str | None = None
    last_at: str | None = None
    interval_s: float | None = None
    series: dict[tuple[int, int | None], Series] = field(default_factory=dict)
    summaries: int = 0


def _bad(where: str, what: str) -> InputError:
    return InputError(f"{where}: {what} (a file of `gputopo watch --json` lines, schema {SCHEMA})")


def _number(value: Any, where: str, name: str, low: float = 0.0, high: float = 1e9) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not low <= value <= high:
        raise _bad(where, f"{name} is {json.dumps(value)[:40]}, not a number from {low:g} to {high:g} or null")
    return float(value)


def _index(value: Any, where: str, name: str, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= high:
        raise _bad(where, f"{name} is {json.dumps(value)[:40]}, not a whole number from 0 to {high}")
    return value


def _text(value: Any, where: str, name: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise _bad(where, f"{name} is not a string of at most {MAX_TEXT} characters")
    return value


def _list(obj: dict[str, Any], key: str, where: str) -> list[Any]:
    value = obj.get(key, [])
    if not isinstance(value, list):
        raise _bad(where, f"{key} is not a list")
    return value


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _bad(where, "not a JSON object")
    return value


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def read_watch_lines(path: str) -> WatchLines:
    """The file's intervals, every one checked (see the module)."""
    text = read_text_input(path, "watch file", MAX_BYTES)
    result = WatchLines(path)
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        where = f"watch file {path} line {number}"
        try:
            obj = _object(json.loads(line, parse_constant=_refuse_constant), where)
        except json.JSONDecodeError as exc:
            raise _bad(where, f"not JSON ({exc.msg}, column {exc.colno})") from None
        except (ValueError, RecursionError) as exc:
            raise _bad(where, f"not JSON ({str(exc)[:80] or 'nested too deep'})") from None
        schema = obj.get("schema")
        if schema == SUMMARY_SCHEMA:
            result.summaries += 1
            continue
        if schema != SCHEMA:
            raise _bad(where, f"schema is {json.dumps(schema)[:60]}")
        _add_frame(result, obj, where)
    if not result.frames:
        raise InputError(f"watch file {path} holds no intervals (no {SCHEMA} line)")
    return result


def _add_frame(result: WatchLines, obj: dict[str, Any], where: str) -> None:
    if result.frames >= MAX_FRAMES:
        raise _bad(where, f"more than {MAX_FRAMES} intervals")
    at = obj.get("captured_at")
    at = None if at is None else _text(at, where, "captured_at")
    result.first_at = result.first_at or at
    result.last_at = at or result.last_at
    result.interval_s = result.interval_s or _number(obj.get("interval_s"), where, "interval_s", 0.0, 86400.0)
    seen: set[tuple[int, int | None]] = set()
    for i, entry in enumerate(_list(obj, "links", where)):
        here = f"{where} links[{i}]"
        entry = _object(entry, here)
        key = (_index(entry.get("gpu"), here, "gpu", MAX_GPU), _index(entry.get("link"), here, "link", MAX_LINK))
        _put(result, key, _text(entry.get("peer", "?"), here, "peer"), entry, here, seen)
    for i, entry in enumerate(_list(obj, "pcie", where)):
        here = f"{where} pcie[{i}]"
        entry = _object(entry, here)
        _put(result, (_index(entry.get("gpu"), here, "gpu", MAX_GPU), None), "CPU", entry, here, seen)
    for series in result.series.values():  # a link the interval does not list: unknown then
        if len(series.percent) == result.frames:
            series.percent.append(None)
    result.frames += 1


def _put(result: WatchLines, key: tuple[int, int | None], peer: str, entry: dict[str, Any], where: str,
         seen: set[tuple[int, int | None]]) -> None:
    if key in seen:
        raise _bad(where, "names a link the interval already listed")
    seen.add(key)
    percent = _number(entry.get("percent_of_peak"), where, "percent_of_peak", 0.0, 1e6)
    gbps = [_number(entry.get(name), where, name) for name in ("tx_gbps", "rx_gbps")]
    series = result.series.get(key)
    if series is None:
        if len(result.series) >= MAX_SERIES:
            raise _bad(where, f"more than {MAX_SERIES} links")
        series = result.series[key] = Series(key[0], key[1], peer, [None] * result.frames)
    series.percent.append(percent)
    series.peak_gbps = max([series.peak_gbps] + [g for g in gbps if g is not None])
