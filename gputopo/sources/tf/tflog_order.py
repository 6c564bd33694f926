"""What the ORDER of TensorFlow 0.x-1.4's "cannot peer" lines says about the pairs they do not name.

TF of those years, at start-up, lists its GPUs ("Found device 0 with properties:" ... up to the
last), then walks every ordered pair of them, source-major: for i in 0..N-1, for j in 0..N-1,
j != i, it asks CUDA whether i can reach j and logs one line for each pair that cannot
("cannot enable peer access from device ordinal i to device ordinal j", TF 0.x; "Peer access not
supported between device ordinals i and j", TF 1.2-1.4). So between two lines printed one after the
other, every pair the walk passed could peer; before the first line, every pair of the walk up to
it (when that line comes straight after the device listing); after the last line, every pair left
(only when a line TF prints after the walk comes straight after it: otherwise the log is cut there
and the rest is unknown).

``tflog_startup._infer_unnamed_pairs`` covers a whole log (every GPU named on both sides); this
covers a log cut short, or one where some GPU can peer with every other (and so is never named).
Where the walk is seen to its end, order does not matter: every pair without a line could peer. Where
it is cut, which pairs came before the cut assumes the walk went in number order, as TF 0.x's
``gpu_init.cc`` always did and TF 1.x does unless ``gpu_options.visible_device_list`` reorders the
GPUs (then the lines name CUDA ids in that order); the finding says so.

It is an inference, and is only made where the lines allow no other reading:

- the "cannot peer" lines are on consecutive lines of the file, from one process, in strictly
  increasing walk order (anything else: another order, a lost or interleaved line; no inference);
- the first comes straight after the last "Found device k" block (only its detail lines between):
  then TF had exactly k + 1 GPUs, 0..k, as it numbers them densely in the order it lists them;
- no GPU was "Ignoring"-ed (TF leaves it out of the walk), and every ordinal the lines name is <= k.

Only pairs of GPUs the log names are set (an ordinal the excerpt never names is not described).
"""

from __future__ import annotations

from typing import Any

from gputopo.sources.tf.tflog_lines import DENIED, FOUND, IGNORED, PROPS, LogEvent, message_of


def infer_from_walk_order(events: list[LogEvent], lines: list[str], named: set[int],
                          peer: list[list[bool | None]]) -> dict[str, Any] | None:
    """Set ``peer[i][j] = True`` for the ordered pairs the walk order proves could peer (only where
    ``peer[i][j]`` is still unknown and both ordinals are named). Returns the walk's plain facts for
    a reading note (GPU count, the last pair printed, whether the walk is seen to its end), or None
    where nothing was inferred."""
    walk = _walk(events, lines)
    if walk is None:
        return None
    gpus, last, complete = walk
    order = [(i, j) for i in range(gpus) for j in range(gpus) if i != j]
    position = {pair: k for k, pair in enumerate(order)}
    denied = {position[pair] for pair in _denied_pairs(events)}
    inferred = False
    for k in range(len(order) if complete else position[last] + 1):
        i, j = order[k]
        if k in denied or i not in named or j not in named or peer[i][j] is not None:
            continue
        peer[i][j] = True
        inferred = True
    return {"gpus": gpus, "last": list(last), "complete": complete} if inferred else None


def _denied_pairs(events: list[LogEvent]) -> list[tuple[int, int]]:
    return [(e.ordinals[0], e.ordinals[1]) for e in events if e.kind == DENIED]


def _walk(events: list[LogEvent], lines: list[str]) -> tuple[int, tuple[int, int], bool] | None:
    """(GPU count, last pair, whether the walk is seen to its end), or None where the lines do not
    allow the inference (module docstring)."""
    denied = [e for e in events if e.kind == DENIED]
    if not denied or any(e.kind == IGNORED for e in events):
        return None
    pairs = [(e.ordinals[0], e.ordinals[1]) for e in denied]
    if len({e.process for e in denied}) != 1 or any(not _adjacent(lines, a, b) for a, b in zip(denied, denied[1:])):
        return None
    if any(p >= q for p, q in zip(pairs, pairs[1:])) or any(i == j for i, j in pairs):
        return None
    before = [e for e in events if e.line_no < denied[0].line_no]
    if not before or before[-1].kind not in (FOUND, PROPS):
        return None
    found = [e for e in before if e.kind == FOUND]
    if not found:
        return None
    last_found = found[-1]
    between = lines[last_found.line_no: denied[0].line_no - 1]  # the lines after "Found device k" itself
    if any(message_of(line) != line.strip() for line in between if line.strip()):
        return None  # a prefixed log line between the listing and the walk: not straight after it
    gpus = last_found.ordinals[0] + 1
    if any(max(pair) >= gpus for pair in pairs):
        return None
    after = [e for e in events if e.line_no > denied[-1].line_no]
    complete = bool(after) and _adjacent(lines, denied[-1], after[0])
    return gpus, pairs[-1], complete


def _adjacent(lines: list[str], a: LogEvent, b: LogEvent) -> bool:
    """Nothing but blank lines between the two events' lines (a paste may double its line breaks)."""
    return b.line_no > a.line_no and not any(line.strip() for line in lines[a.line_no: b.line_no - 1])

