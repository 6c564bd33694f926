"""NVML recorded on real hardware, and replayed: a fake of the NVML *library* built from what a real
driver answered to gputopo's own queries (the idea of DCGM's NVML injection, run backwards).

``Recorder(pynvml)`` stands where the pynvml module would (``probe(nvml=...)``,
``read_nvml_health(nvml=...)``) and passes every call through to the real binding, writing down the
function, its arguments (a device handle as its GPU index, a ``ctypes.byref`` structure as its
type), and the answer: a value, the NVML error code, or another exception. A structure the caller
passed by reference is written down as the call left it. ``tests/hardware/record_nvml.py`` runs it
on a machine with a GPU; the recording is kept under ``tests/fixtures/hardware/``.

``Replay(recording)`` answers the same calls with the same answers: structures as objects with the
recorded fields, NVML errors as the installed ``pynvml``'s real exception classes (other exceptions
as the same built-in type, else ``NotRecorded``), a ``byref`` structure filled as the driver filled
it. A call that was not recorded fails the test (``NotRecorded``) instead of being made up: when the
probe asks something new, record again. The same call asked more times than recorded gets the last
recorded answer to that very call (function and arguments): NVML's static answers do not change
between two asks, and a probe and doctor replayed apart each ask them once more.

A function the code came to ask after a recording was made is no answer the driver gave: the replay
does not invent one. Named in ``predates`` (by the test, with the reason), it is *absent* from the
replayed module, as from an older nvidia-ml-py (``getattr`` finds no such function; the query door
says "not in this driver"), so what the probe reads from it stays unknown and everything else is
replayed as recorded. Only a function the recording never saw may be named: once a new recording
holds its real answers, ``predates`` refuses it and the real answers are replayed.
Constants and structure types come from the installed ``pynvml``.

``Recorder`` also records a fake (``Recorder(FakeNvml(...))``, or the real binding over the C fake
library) so that ``differences(fake_calls, recorded_calls)`` can say where a fake answers otherwise
than the real driver did; a fake's calls to a function the recording predates (``predated``) are no
difference: the driver was never asked them.
"""

from __future__ import annotations

import builtins
import ctypes
import types
from collections import defaultdict, deque
from typing import Any

import pynvml

# Functions the probe or doctor came to ask after the recordings kept in tests/fixtures/hardware/ were
# made, and the GPU fields they fill. A recording that never saw one replays without it (absent, as
# from an older binding), its field unknown; a recording made since holds the real answers.
ASKED_SINCE = {"nvmlDeviceGetPerformanceState": "performance_state",  # record on the next device run
               "nvmlDeviceGetMinorNumber": "minor_number"}


def predated(recording: dict[str, Any]) -> frozenset[str]:
    """The functions of ``ASKED_SINCE`` this recording never saw."""
    return frozenset(ASKED_SINCE) - {call["fn"] for call in recording["calls"]}

_CArg = type(ctypes.byref(ctypes.c_int()))


class NotRecorded(AssertionError):
    """The code asked NVML something the real driver was never asked."""


def plain(value: Any) -> Any:
    """A JSON-able copy of an NVML answer: structures as ``{"__struct__": name, field: ...}``."""
    if isinstance(value, (bytes, bytearray)):
        return {"__bytes__": bytes(value).decode("latin-1")}
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if isinstance(value, ctypes.Array):
        return [plain(v) for v in value]
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, ctypes.Structure):
        fields = {name: plain(getattr(value, name)) for name, *_ in value._fields_}
        return {"__struct__": type(value).__name__, **fields}
    if isinstance(value, (ctypes.c_uint, ctypes.c_int, ctypes.c_ulonglong)):
        return value.value
    return {"__repr__": repr(value)}


def _revived(value: Any) -> Any:
    if isinstance(value, list):
        return [_revived(v) for v in value]
    if isinstance(value, dict):
        if "__bytes__" in value:
            return value["__bytes__"].encode("latin-1")
        return types.SimpleNamespace(**{k: _revived(v) for k, v in value.items() if k != "__struct__"})
    return value


class Recorder:
    """The real pynvml, every function call written down in ``self.calls``."""

    def __init__(self, module: Any = pynvml) -> None:
        self._module = module
        self._handles: dict[int, int] = {}  # address of the handle's device struct (a fake's: its id) -> GPU index
        self._kept: list[Any] = []  # a fake's handles, kept alive so that no other object takes their id
        self.calls: list[dict[str, Any]] = []

    def _arg(self, arg: Any) -> Any:
        if isinstance(arg, _CArg):
            return f"byref:{type(arg._obj).__name__}"
        address = _handle_address(arg)
        if address is None and any(arg is kept for kept in self._kept):
            address = id(arg)
        if address is not None and address in self._handles:
            return {"gpu": self._handles[address]}
        return plain(arg)

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._module, name)
        if not (name.startswith("nvml") and callable(real)) or isinstance(real, type):
            return real

        def call(*args: Any) -> Any:
            entry: dict[str, Any] = {"fn": name, "args": [self._arg(a) for a in args]}
            self.calls.append(entry)
            try:
                answer = real(*args)
            except pynvml.NVMLError as exc:
                entry["error"] = int(exc.value)
                raise
            except Exception as exc:
                entry["exception"] = [type(exc).__name__, str(exc)]
                raise
            finally:
                filled = [plain(a._obj) for a in args if isinstance(a, _CArg)]
                if filled:
                    entry["filled"] = filled
            if name == "nvmlDeviceGetHandleByIndex":
                address = _handle_address(answer)
                if address is None:  # a fake's handle (tests/fake_nvml.py FakeHandle)
                    self._kept.append(answer)
                    address = id(answer)
                self._handles[address] = int(args[0])
                entry["answer"] = {"handle": int(args[0])}
            else:
                entry["answer"] = plain(answer)
            return answer

        return call


def _handle_address(value: Any) -> int | None:
    try:
        return ctypes.addressof(value.contents)
    except (AttributeError, TypeError, ValueError):
        return None


class ReplayHandle:
    def __init__(self, index: int) -> None:
        self.index = index

    def __repr__(self) -> str:
        return f"<replayed handle of GPU {self.index}>"


class Replay:
    """A pynvml-like module answering from a recording (see the module docstring)."""

    def __init__(self, calls: list[dict[str, Any]], predates: frozenset[str] = frozenset()) -> None:
        self._answers: dict[tuple[str, str], deque[dict[str, Any]]] = defaultdict(deque)
        for entry in calls:
            self._answers[(entry["fn"], repr(entry["args"]))].append(entry)
        recorded = {entry["fn"] for entry in calls}
        if predates & recorded:
            raise ValueError(f"the recording holds {sorted(predates & recorded)}: replay its answers, do not hide them")
        self._absent = frozenset(predates)
        self.asked: list[str] = []

    def _key_arg(self, arg: Any) -> Any:
        if isinstance(arg, _CArg):
            return f"byref:{type(arg._obj).__name__}"
        if isinstance(arg, ReplayHandle):
            return {"gpu": arg.index}
        return plain(arg)

    def __getattr__(self, name: str) -> Any:
        if name in self._absent:  # asked only since the recording: absent, as from an older binding
            raise AttributeError(f"{name} was not asked when this recording was made")
        if not name.startswith("nvml") or not callable(getattr(pynvml, name, None)) \
                or isinstance(getattr(pynvml, name), type):
            return getattr(pynvml, name)

        def call(*args: Any) -> Any:
            key = (name, repr([self._key_arg(a) for a in args]))
            self.asked.append(name)
            queue = self._answers.get(key)
            if not queue:
                raise NotRecorded(f"{name}{key[1]} was not asked of the real driver")
            entry = queue[0] if len(queue) == 1 else queue.popleft()
            for arg, filled in zip([a for a in args if isinstance(a, _CArg)], entry.get("filled", [])):
                _fill(arg._obj, filled)
            if "error" in entry:
                raise pynvml.NVMLError(entry["error"])
            if "exception" in entry:
                kind, text = entry["exception"]
                error = getattr(builtins, kind, None)
                if not (isinstance(error, type) and issubclass(error, Exception)):
                    raise NotRecorded(f"{name}: the real binding raised {kind}, which this replay cannot raise")
                raise error(text)
            if name == "nvmlDeviceGetHandleByIndex":
                return ReplayHandle(entry["answer"]["handle"])
            return _revived(entry["answer"])

        return call


def _fill(struct: Any, filled: dict[str, Any]) -> None:
    for field, value in filled.items():
        if field == "__struct__":
            continue
        target = getattr(struct, field)
        if isinstance(target, ctypes.Array):
            for i, v in enumerate(value[: len(target)]):
                target[i] = v
        else:
            setattr(struct, field, value)


# What a gputopo snapshot does not carry, so that no fake built from one can answer it as the machine
# did: the PCI device and subsystem ids (both fakes answer 0; gputopo reads neither).
NOT_IN_A_SNAPSHOT = {"nvmlDeviceGetPciInfo": ("pciDeviceId", "pciSubSystemId")}


def _comparable(entry: dict[str, Any]) -> dict[str, Any]:
    entry = dict(entry)
    left_out = NOT_IN_A_SNAPSHOT.get(entry["fn"], ())
    if left_out and isinstance(entry.get("answer"), dict):
        entry["answer"] = {k: v for k, v in entry["answer"].items() if k not in left_out}
    return entry


def differences(got: list[dict[str, Any]], want: list[dict[str, Any]]) -> list[str]:
    """Where the calls ``got`` (a fake, recorded) differ from ``want`` (the real driver, recorded): the
    same calls in the same order, each with the same answer, error or filled structure, leaving out
    what ``NOT_IN_A_SNAPSHOT`` names and the calls to functions ``want`` predates. One line per
    difference."""
    unasked = predated({"calls": want})
    got = [call for call in got if call["fn"] not in unasked]
    lines = []
    for number, (mine, real) in enumerate(zip(map(_comparable, got), map(_comparable, want))):
        if mine != real:
            shown = {k: v for k, v in mine.items() if mine.get(k) != real.get(k)}
            expected = {k: v for k, v in real.items() if mine.get(k) != real.get(k)}
            lines.append(f"call {number} {real['fn']}{real['args']}: the fake gave {shown}, the driver {expected}")
    if len(got) != len(want):
        lines.append(f"the fake was asked {len(got)} calls, the driver {len(want)}")
    return lines


def live_state(recording: dict[str, Any]) -> dict[str, dict[int, Any]]:
    """A one-GPU recording's live state (which a snapshot does not carry), as FakeNvml's knobs:
    ``utilization``, ``processes``, ``memory_used``, ``memory_reserved``."""
    answers = {c["fn"]: c.get("answer") for c in recording["calls"] if c["args"][:1] == [{"gpu": 0}]}
    memory = answers["nvmlDeviceGetMemoryInfo"]
    return {"utilization": {0: answers["nvmlDeviceGetUtilizationRates"]["gpu"]},
            "processes": {0: answers["nvmlDeviceGetComputeRunningProcesses"]},
            "memory_used": {0: memory["used"]}, "memory_reserved": {0: memory["reserved"]}}
