"""The one door to nvidia-ml-py (``pynvml``): start and stop NVML, ask it anything, decode its answers.

Every call goes through ``NvmlBinding.query``, which classifies what NVML says (as nvitop's
``nvmlQuery`` and gpustat's ``nvml`` module do):

- an answer: returned, a string (``bytes`` or ``str``) as one line of ``str`` (see below);
- an NVML error (not supported, not in this driver, no permission, unknown, ...) or a function this
  binding lacks: a ``Failed`` carrying the reason in words, so the probe can group them into
  findings;
- ``GpuIsLost``: ``GpuLost`` is raised, a distinct outcome the probe turns into its lost-GPU
  handling;
- anything else (a bug, not NVML): raised as is.

Binding-version traps live here and nowhere else, each with its evidence:
- nvidia-ml-py 13.x defines ``NVML_P2P_CAPS_INDEX_READ = 0,`` (a tuple, stray comma: pynvml.py of
  nvidia-ml-py 13.615.71, line 369); passing it to ``nvmlDeviceGetP2PStatus`` fails, so caps
  indices here are plain ints (nvml.h ``nvmlGpuP2PCapsIndex_t``: READ 0, WRITE 1, NVLINK 2,
  ATOMICS 3, PROP 4).
- ``nvmlDeviceGetNvLinkVersion`` returns the enum ``nvmlNvlinkVersion_t``, not the generation
  (pynvml.py ``NVML_NVLINK_VERSION_3_0 = 4``; 3 is NVLink 2.2): ``NVLINK_VERSION_ENUM`` below.
- Strings and ``busId`` come back as ``bytes`` from older bindings and ``str`` from newer ones
  (pynvml.py's ``convertStrBytes`` decodes only where the value is ``bytes``): both are accepted.
  Newer bindings decode strictly (``res.decode()`` in ``convertStrBytes``, and in
  ``_PrintableStructure.__getattribute__`` for a ``char[]`` field such as ``busId``), so a name that
  is not UTF-8 raises ``UnicodeDecodeError``; its ``object`` is the bytes the driver gave, decoded
  here with U+FFFD for each bad byte. Every string NVML gives is then one line of text: control
  characters (escape sequences, newlines, NULs) dropped (``quoting.one_line``), so whatever
  ``scan --save`` writes ``scan --from`` reads back (``quoting.check_text``) and nothing reaches a
  terminal raw.
- Older bindings and drivers lack newer functions: pynvml raises ``NVMLError_FunctionNotFound`` (or
  the module has no such attribute): "not in this driver". tests/system/test_fake_libnvml.py
  runs these paths through the real binding over a fake libnvidia-ml.so.1.
- nvidia-ml-py 13.610.43 (what the hardware runs of tests/fixtures/hardware/ had) declares
  ``c_nvmlGpuFabricInfo_t.clusterUuid`` with ``NVML_DEVICE_UUID_BUFFER_SIZE`` (80) bytes where nvml.h
  has ``NVML_GPU_FABRIC_UUID_LEN`` (16; 13.615.71 has 16): ``status``, ``cliqueId`` and ``state``
  are then read 64 bytes past where the driver writes them, always 0 ("not supported").
  ``fabric_info_v1`` gives a structure laid out as nvml.h has it.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from gputopo.errors import NvmlUnavailable
from gputopo.model import normalize_pci_bus_id
from gputopo.quoting import one_line

# nvmlGpuTopologyLevel_t -> nvidia-smi's path word. INTERNAL (0) is two GPUs on one board (K80,
# M60, ...); nvidia-smi has no separate word in the matrix, so it is recorded as PIX plus a finding.
TOPOLOGY_LEVEL_WORDS = {0: "PIX", 10: "PIX", 20: "PXB", 30: "PHB", 40: "NODE", 50: "SYS"}
TOPOLOGY_LEVEL_INTERNAL = 0

# nvmlDeviceGetP2PStatus capability indices, as plain ints (never pynvml's constants: see above).
P2P_CAPS_INDEX_READ = 0
P2P_CAPS_INDEX_WRITE = 1
P2P_CAPS_INDEX_NVLINK = 2
P2P_CAPS_INDEX_ATOMICS = 3

# nvmlNvlinkVersion_t enum -> NVLink generation as a version string.
NVLINK_VERSION_ENUM = {1: "1.0", 2: "2.0", 3: "2.2", 4: "3.0", 5: "3.1", 6: "4.0", 7: "5.0", 8: "6.0"}

# nvmlNvLinkDeviceType_t
NVLINK_REMOTE_GPU = 0
NVLINK_REMOTE_IBMNPU = 1  # the CPU (POWER9 NVLink to the CPU)
NVLINK_REMOTE_SWITCH = 2

# Upper bound on NVLinks per GPU to try (B200 has 18; nvidia-ml-py 13 says 36). Real NVML answers
# InvalidArgument for a link index past the GPU's last link, which ends the loop early.
DEFAULT_MAX_NVLINKS = 36
NVML_AFFINITY_SCOPE_NODE = 0
BITS_PER_AFFINITY_WORD = 64  # nvmlDeviceGetCpuAffinity fills unsigned long words (64-bit Linux)
MAX_PSTATE = 15  # nvmlPstates_t: NVML_PSTATE_0 .. NVML_PSTATE_15; NVML_PSTATE_UNKNOWN is 32

FALLBACK_HINT = (
    "use a reference machine with --machine NAME (see `gputopo machines`) "
    "or a saved snapshot / `nvidia-smi topo -m` text with --from FILE"
)

NOT_SUPPORTED = "NVMLError_NotSupported"
INVALID_ARGUMENT = "NVMLError_InvalidArgument"
FUNCTION_NOT_FOUND = "NVMLError_FunctionNotFound"

# Why an NVML query failed, in words, keyed by the pynvml exception class name.
_REASON_WORDS = {
    NOT_SUPPORTED: "not supported",
    FUNCTION_NOT_FOUND: "not in this driver",
    "NVMLError_NoPermission": "no permission",
    "NVMLError_GpuIsLost": "GPU is lost",
    "NVMLError_Unknown": "unknown error",
    INVALID_ARGUMENT: "invalid argument",
    "NVMLError_Uninitialized": "NVML not initialised",
    "NVMLError_Timeout": "timed out",
    "NVMLError_NotFound": "not found",
    "NVMLError_InsufficientSize": "buffer too small",
    "NVMLError_ResetRequired": "GPU needs a reset",
    "NVMLError_DriverNotLoaded": "driver not loaded",
}

_INIT_REASONS = {
    "NVMLError_LibraryNotFound": "the NVIDIA driver library libnvidia-ml.so was not found (no NVIDIA driver installed here?)",
    "NVMLError_DriverNotLoaded": "the NVIDIA kernel driver is not loaded",
    "NVMLError_NoPermission": "no permission to talk to the NVIDIA driver (check access to /dev/nvidia*)",
    "NVMLError_LibRmVersionMismatch": "the NVML library and the kernel driver versions differ (reboot after a driver update?)",
    "NVMLError_GpuIsLost": "a GPU fell off the bus while NVML started (see `dmesg` for Xid 79)",
}


FABRIC_UUID_BYTES = 16  # nvml.h NVML_GPU_FABRIC_UUID_LEN


class GpuFabricInfo(ctypes.Structure):
    """``nvmlGpuFabricInfo_t`` as nvml.h lays it out (``state``, one byte there, read as the binding reads it)."""

    _fields_ = [("clusterUuid", ctypes.c_ubyte * FABRIC_UUID_BYTES), ("status", ctypes.c_int),
                ("cliqueId", ctypes.c_uint), ("state", ctypes.c_uint)]


class GpuLost(Exception):
    """NVML said ``GpuIsLost``: the GPU (or one of the pair) fell off the bus."""


@dataclass(frozen=True)
class Failed:
    """NVML did not answer a query: the pynvml error class name and the reason in words."""

    error: str
    reason: str


UNDECODABLE = "UnicodeDecodeError"
# The functions gputopo asks whose answer is a string (each wrapped by pynvml's ``convertStrBytes``:
# tests/unit/sources/host/test_nvml_binding.py checks it against the installed binding).
TEXT_FUNCTIONS = frozenset({"nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion", "nvmlSystemGetProcessName",
                            "nvmlDeviceGetName", "nvmlDeviceGetUUID"})


def one_line_text(value: str | bytes | bytearray) -> str:
    """An NVML string as the door gives it: ``bytes`` decoded as UTF-8 with U+FFFD for each bad
    byte, every control character dropped (NULs, newlines, escape sequences: ``quoting.one_line``)."""
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    return one_line(value)


def text(value: Any) -> str | None:
    """NVML strings arrive as ``bytes`` (older nvidia-ml-py) or ``str`` (13.x): always give one line
    of ``str`` (``one_line_text``), stripped; None for nothing."""
    if value is None:
        return None
    stripped = one_line_text(value if isinstance(value, (bytes, bytearray)) else str(value)).strip()
    return stripped or None


def field_text(struct: Any, name: str) -> str | None:
    """``text`` of a structure's ``char[]`` field. nvidia-ml-py 13's structures decode such a field
    strictly when it is read (``_PrintableStructure.__getattribute__``): bytes that are not UTF-8
    are read from the error, which carries them."""
    try:
        value = getattr(struct, name, None)
    except UnicodeDecodeError as exc:
        value = exc.object
    return text(value)


def bus_id_of(pci_info: Any) -> str | None:
    """The normalised bus id of an ``nvmlPciInfo_t`` (``busId`` is bytes or str by version)."""
    if pci_info is None:
        return None
    for attr in ("busId", "busIdLegacy"):
        bus_id = normalize_pci_bus_id(field_text(pci_info, attr))
        if bus_id is not None:
            return bus_id
    return None


def mask_bits(words: Any, bits_per_word: int = BITS_PER_AFFINITY_WORD) -> list[int]:
    """Positions of the set bits in an NVML affinity mask (a sequence of integer words)."""
    result = []
    for w, word in enumerate(list(words)):
        word = int(word)
        bit = 0
        while word:
            if word & 1:
                result.append(w * bits_per_word + bit)
            word >>= 1
            bit += 1
    return result


def performance_state(answer: Any) -> int | None:
    """``nvmlDeviceGetPerformanceState``'s answer as the model keeps it: 0 (P0) .. 15 (P15), else None.

    The probe and doctor ask it right after the PCIe link, so the two describe one moment
    (analysis/expect/pstates.py says what a state tells of the link). Any failure, and
    ``NVML_PSTATE_UNKNOWN`` (32), is "not known" with no reading note: the link findings already word
    an unknown state (as they did before it was read)."""
    if isinstance(answer, (Failed, bool)) or not isinstance(answer, int):
        return None
    return answer if 0 <= answer <= MAX_PSTATE else None


def cuda_version_text(cuda_driver_version: int | None) -> str | None:
    """``12040`` (what NVML returns) -> ``"12.4"``."""
    if cuda_driver_version is None or cuda_driver_version <= 0:
        return None
    return f"{cuda_driver_version // 1000}.{(cuda_driver_version % 1000) // 10}"


def _undecoded_answer(fn_name: str, exc: UnicodeDecodeError) -> Any:
    """What a call whose answer the binding could not decode gives: the driver's bytes, where the
    function answers a string (``TEXT_FUNCTIONS``: ``convertStrBytes`` decodes the whole answer);
    otherwise a ``Failed`` (no answer to guess at)."""
    if fn_name in TEXT_FUNCTIONS and isinstance(exc.object, (bytes, bytearray)):
        return bytes(exc.object)
    return Failed(UNDECODABLE, "answer not UTF-8 text")


def _error_words(exc: BaseException) -> str:
    """An NVML error's own words, one line (pynvml asks ``nvmlErrorString``, itself a string the
    binding decodes strictly); empty where they cannot be read."""
    try:
        return one_line(str(exc)).strip()
    except UnicodeDecodeError:
        return ""


def _import_pynvml() -> Any:
    try:
        import pynvml  # nvidia-ml-py: NVIDIA's own binding
    except ImportError:
        raise NvmlUnavailable(
            f"cannot read this host's GPUs: the NVML binding (Python package nvidia-ml-py) is not installed; {FALLBACK_HINT}"
        ) from None
    return pynvml


class NvmlBinding:
    """A pynvml-like module behind one query door. ``module=None`` imports the real ``pynvml``
    (lazily: commands that never probe never load it); tests pass ``tests.fake_nvml.FakeNvml``."""

    def __init__(self, module: Any = None) -> None:
        self.module = _import_pynvml() if module is None else module

    def _error_name(self, exc: BaseException) -> str | None:
        """The pynvml class name of an NVML error; None for anything that is not one."""
        base = getattr(self.module, "NVMLError", None)
        if isinstance(base, type) and isinstance(exc, base):
            return type(exc).__name__
        return None

    def init(self) -> None:
        """``nvmlInit``; ``NvmlUnavailable`` (one line, pointing at the other sources) when it fails."""
        try:
            self.module.nvmlInit()
        except Exception as exc:
            name = self._error_name(exc)
            if name is None:
                raise
            reason = _INIT_REASONS.get(name) or f"NVML could not start ({_error_words(exc) or name})"
            raise NvmlUnavailable(f"cannot read this host's GPUs through NVML: {reason}; {FALLBACK_HINT}") from None

    def shutdown(self) -> None:
        try:
            self.module.nvmlShutdown()
        except Exception as exc:
            if self._error_name(exc) is None:
                raise

    def query(self, fn_name: str, *args: Any) -> Any:
        """``pynvml.<fn_name>(*args)``: its answer, a ``Failed``, or ``GpuLost`` raised (see the module)."""
        fn = getattr(self.module, fn_name, None)
        if fn is None:  # an older nvidia-ml-py without this binding
            return Failed(FUNCTION_NOT_FOUND, _REASON_WORDS[FUNCTION_NOT_FOUND])
        try:
            answer = fn(*args)
        except UnicodeDecodeError as exc:
            answer = _undecoded_answer(fn_name, exc)
        except Exception as exc:
            name = self._error_name(exc)
            if name is None:
                raise
            if name == "NVMLError_GpuIsLost":
                raise GpuLost() from None
            return Failed(name, _REASON_WORDS.get(name) or _error_words(exc) or name)
        if isinstance(answer, (bytes, bytearray, str)):
            return one_line_text(answer)
        return answer

    def gpu_count(self) -> int:
        """``nvmlDeviceGetCount``; ``NvmlUnavailable`` where NVML started but cannot count the GPUs."""
        try:
            count = self.query("nvmlDeviceGetCount")
        except GpuLost:
            count = Failed("NVMLError_GpuIsLost", _REASON_WORDS["NVMLError_GpuIsLost"])
        if isinstance(count, Failed):
            raise NvmlUnavailable(
                f"NVML started but could not count the GPUs ({count.reason}); {FALLBACK_HINT}"
            ) from None
        return int(count)

    def fabric_info_v1(self) -> Any:
        """A structure for ``nvmlDeviceGetGpuFabricInfo``: the binding's, unless it is laid out otherwise
        than nvml.h (see the module: nvidia-ml-py 13.610.43); None where the binding has no such call."""
        declared = getattr(self.module, "c_nvmlGpuFabricInfo_t", None)
        if declared is None:
            return None
        uuid = getattr(declared, "clusterUuid", None)  # the field's descriptor: offset and size
        if uuid is not None and (uuid.offset, uuid.size) == (0, FABRIC_UUID_BYTES):
            return declared()
        return GpuFabricInfo()

    def max_nvlinks(self) -> int:
        """How many NVLink indices to try per GPU (the binding's ``NVML_NVLINK_MAX_LINKS``)."""
        return int(getattr(self.module, "NVML_NVLINK_MAX_LINKS", DEFAULT_MAX_NVLINKS) or DEFAULT_MAX_NVLINKS)


# nvmlValueType_t -> the member of ``c_nvmlValue_t`` that holds a field value of that type.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}
NVML_SUCCESS_CODE = 0
NVML_NOT_SUPPORTED_CODE = 3


@dataclass(frozen=True)
class FieldValue:
    """One ``c_nvmlFieldValue_t`` of ``nvmlDeviceGetFieldValues``, decoded: the field and scope
    (the link), NVML's return code for this field alone (0 an answer, 3 not supported), the value
    (None unless answered) and when the driver read it (µs, the driver's clock)."""

    field_id: int
    scope_id: int
    code: int
    value: float | int | None
    timestamp_us: int


def field_values(answer: Any) -> list[FieldValue]:
    """The values of an ``nvmlDeviceGetFieldValues`` answer (the binding's ctypes array), each by
    its ``valueType``; a type this table does not know is no value."""
    decoded = []
    for item in answer:
        code = int(item.nvmlReturn)
        member = _VALUE_MEMBERS.get(int(item.valueType))
        value = getattr(item.value, member) if code == NVML_SUCCESS_CODE and member else None
        decoded.append(FieldValue(int(item.fieldId), int(item.scopeId), code, value, int(item.timestamp)))
    return decoded
