"""The words of what the readers of other tools' outputs noticed while reading (``ReadingNote``s of
``sources.p2pbw``, ``nvbandwidth``, ``nccl_log``, ``nccl_xml``), for ``analysis.reading_notes``:

- ``cuda-ordinals-only``: p2pBandwidthLatencyTest without its ``Device: N, ... pciBusID`` lines;
- ``no-pair-measured``: nvbandwidth measured no pair (device-to-device tests waived: a warning that
  the GPUs could not peer; the run stopped at its byte check; one GPU), or a p2pBandwidthLatencyTest
  output cut before its first matrix;
- ``nvbandwidth-wrong-data``: nvbandwidth stopped at its pattern check: a copy delivered wrong bytes
  (a warning; "GPU-to-GPU" only where every stopped test was a device-to-device one);
- ``nccl-gpus-by-bus-id``: an NCCL log numbers GPUs by the ranks' bus ids (inferred);
- ``nccl-xml-cut``: an NCCL topology XML cut short, read up to its last whole tag.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Words = tuple[str, str, str | None]  # (severity, message, fix)


def _cuda_ordinals_only(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']}: no `Device: N, ..., pciBusID` lines, so the GPUs are CUDA ordinals only; with a "
            "`nvidia-smi topo -m` of the same box they are joined by position, which holds only where "
            "CUDA_DEVICE_ORDER=PCI_BUS_ID or the GPUs are all alike"),
            "paste the whole output, from its `[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]` line")


def _no_pair_measured(facts: dict[str, Any], gpus: list[int]) -> Words:
    source = facts["source"]
    if facts.get("tool") == "p2pBandwidthLatencyTest":
        return ("info", (f"{source}: the p2pBandwidthLatencyTest output ends before its first matrix: its GPUs and "
                "which pairs can peer are read, no pair was measured"),
                "paste the whole output, down to its `NOTE: The CUDA Samples are not meant for performance` line")
    waived, stopped = facts.get("waived") or [], bool(facts.get("stopped"))
    why = (f"nvbandwidth waived {', '.join(waived)}: it waives a device-to-device test where the GPUs' peer "
           f"mapping fails, so these {facts['gpu_count']} GPUs could not peer" if waived else
           "the run stopped at its byte check" if stopped else "device-to-device tests waived, or one GPU")
    return ("warning" if waived else "info", f"{source}: nvbandwidth measured no GPU pair ({why})",
            None if stopped else "run `nvbandwidth -t device_to_device_memcpy_read_ce` on a box whose GPUs can peer")


def _nvbandwidth_wrong_data(facts: dict[str, Any], gpus: list[int]) -> Words:
    peer = bool(facts["peer"])
    return ("warning",
            (f"{facts['source']}: nvbandwidth stopped in {', '.join(facts['tests'])}: a copy's bytes failed its pattern "
             f"check ('Invalid value when checking the pattern'), so a {'GPU-to-GPU ' if peer else ''}copy delivered "
             "wrong data"),
            (f"do not trust {'P2P' if peer else 'copies'} on this box until it passes: check IOMMU and ACS "
             "(`gputopo doctor`), the driver and Fabric Manager versions, then rerun nvbandwidth"))


def _nccl_gpus_by_bus_id(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']}: GPUs are numbered in PCI bus-id order of the ranks' busIds (nvidia-smi's order "
            "where every GPU of the host is in the job; inferred)"), None)


def _nccl_xml_cut(facts: dict[str, Any], gpus: list[int]) -> Words:
    cut_gpu = facts.get("cut_gpu")
    return ("info",
            (f"{facts['source']}: the NCCL topology XML is cut short (no </system>): read up to its last whole tag"
             + (f"; GPU {cut_gpu}'s NVLink list was cut, so its pairs without a known NVLink are unknown"
                if cut_gpu is not None else "")
             + "; GPUs and NICs after the cut are not in the text"), None)


TOOL_WORDINGS: dict[str, Callable[[dict[str, Any], list[int]], Words]] = {
    "cuda-ordinals-only": _cuda_ordinals_only,
    "no-pair-measured": _no_pair_measured,
    "nvbandwidth-wrong-data": _nvbandwidth_wrong_data,
    "nccl-gpus-by-bus-id": _nccl_gpus_by_bus_id,
    "nccl-xml-cut": _nccl_xml_cut,
}
