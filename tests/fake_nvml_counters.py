"""Counters that move, for both fakes of NVML (``gputopo watch``): the one description of what
``nvmlDeviceGetFieldValues`` answers, which tests/fake_nvml.py uses and tests/fake_libnvml/fake_nvml.c
(``field_value``) answers alike (tests/system/test_watch_real_binding.py checks the two agree).

The scripted rates, per GPU (NVML's index, as a string) -- the format of the file named by
``GPUTOPO_FAKE_NVML_COUNTERS`` for the C fake, and of ``FakeNvml(counters=...)``::

    {"gpus": {"0": {"nvlink_tx_bytes_per_s": {"3": 25e9}, "nvlink_rx_bytes_per_s": {"3": 1e9},
                    "pcie_tx_bytes_per_s": 2e9, "pcie_rx_bytes_per_s": 1e9,
                    "nvlink_replay_errors_per_s": {"3": 5}, "nvlink_recovery_errors_per_s": {},
                    "nvlink_crc_errors_per_s": {}, "pcie_replay_errors_per_s": 0,
                    "unsupported": ["nvlink_throughput", "nvlink_errors", "pcie_count", "pcie_replay",
                                    "pcie_throughput"]}}}

A counter is cumulative, as NVML's are: value = floor(rate x seconds since ``nvmlInit``), the NVLink
throughput in KiB (bytes / 1024), the others in their own unit; a rate not given is 0. Each value
carries the time it was read, in µs of the wall clock, and its own return code: NOT_SUPPORTED for a
group named in ``unsupported``, for NVLink fields of a GPU without NVLink or of a link that is down,
and for a field id not listed here; INVALID_ARGUMENT for a link past the GPU's last.
``nvmlDeviceGetPcieThroughput`` (the fallback where ``pcie_count`` is unsupported) answers the PCIe
rates in KiB/s, NOT_SUPPORTED where ``pcie_throughput`` is named.
"""

from __future__ import annotations

import math
from typing import Any

import pynvml

SUCCESS, INVALID_ARGUMENT, NOT_SUPPORTED = 0, 2, 3
VALUE_TYPE_ULL = 3

# field id -> (group that ``unsupported`` names, the rate's key, per link?, bytes per unit)
FIELDS = {
    138: ("nvlink_throughput", "nvlink_tx_bytes_per_s", True, 1024),
    139: ("nvlink_throughput", "nvlink_rx_bytes_per_s", True, 1024),
    161: ("nvlink_errors", "nvlink_replay_errors_per_s", True, 1),
    162: ("nvlink_errors", "nvlink_recovery_errors_per_s", True, 1),
    163: ("nvlink_errors", "nvlink_crc_errors_per_s", True, 1),
    94: ("pcie_replay", "pcie_replay_errors_per_s", False, 1),
    197: ("pcie_count", "pcie_tx_bytes_per_s", False, 1),
    198: ("pcie_count", "pcie_rx_bytes_per_s", False, 1),
}


def rate_of(script: dict[str, Any], key: str, link: int | None) -> float:
    rate = script.get(key, 0)
    if link is not None:
        rate = rate.get(str(link), 0) if isinstance(rate, dict) else 0
    return float(rate or 0)


def answer(script: dict[str, Any] | None, field_id: int, scope: int, links: list[bool] | None,
           elapsed_s: float) -> tuple[int, int]:
    """(NVML return code, value) of one field of one GPU: ``script`` its entry of the counters,
    ``links`` its NVLinks' states (None: no NVLink), ``elapsed_s`` seconds since nvmlInit."""
    if field_id not in FIELDS:
        return NOT_SUPPORTED, 0
    group, key, per_link, unit = FIELDS[field_id]
    script = script or {}
    if group in script.get("unsupported", []):
        return NOT_SUPPORTED, 0
    if per_link:
        if links is None:
            return NOT_SUPPORTED, 0
        if scope >= len(links):
            return INVALID_ARGUMENT, 0
        if not links[scope]:
            return NOT_SUPPORTED, 0
    rate = rate_of(script, key, scope if per_link else None)
    return SUCCESS, int(math.floor(rate * max(elapsed_s, 0.0) / unit))


def field_values(script: dict[str, Any] | None, field_ids: list[Any], links: list[bool] | None,
                 elapsed_s: float, now_us: int) -> Any:
    """What the real binding's ``nvmlDeviceGetFieldValues`` returns: a ctypes array of
    ``c_nvmlFieldValue_t``, each with its field, scope, timestamp, type and return code."""
    values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
    for i, field_id in enumerate(field_ids):
        try:
            values[i].fieldId, values[i].scopeId = field_id
        except TypeError:
            values[i].fieldId = field_id
        code, value = answer(script, int(values[i].fieldId), int(values[i].scopeId), links, elapsed_s)
        values[i].nvmlReturn = code
        values[i].timestamp = now_us if code == SUCCESS else 0
        values[i].valueType = VALUE_TYPE_ULL
        values[i].value.ullVal = value
    return values


def pcie_throughput(script: dict[str, Any] | None, counter: int) -> tuple[int, int]:
    """(NVML return code, KiB/s) of ``nvmlDeviceGetPcieThroughput``: counter 0 TX, 1 RX."""
    script = script or {}
    if "pcie_throughput" in script.get("unsupported", []) or counter not in (0, 1):
        return NOT_SUPPORTED, 0
    key = "pcie_tx_bytes_per_s" if counter == 0 else "pcie_rx_bytes_per_s"
    return SUCCESS, int(rate_of(script, key, None) // 1024)
