"""The words of what the readers of other tools' outputs noticed while reading (``ReadingNote``s of
``sources.tools.p2pbw``, ``nvbandwidth``, ``nccl_log``, ``nccl_xml``), for ``analysis.notes.reading_notes``:

- ``cuda-ordinals-only``: p2pBandwidthLatencyTest without its ``Device: N, ... pciBusID`` lines;
- ``no-pair-measured``: nvbandwidth measured no pair (device-to-device tests waived: a warning that
  the GPUs could not peer; the run stopped at its byte check; one GPU), or a p2pBandwidthLatencyTest
  output cut before its first matrix;
- ``p2p-enabled-not-measured``: a p2pBandwidthLatencyTest output cut after its P2P=Disabled matrices;
- ``nvbandwidth-wrong-data``: nvbandwidth stopped at its pattern check: a copy delivered wrong bytes
  (a warning; "GPU-to-GPU" only where every stopped test was a device-to-device one);
- ``nccl-gpus-by-bus-id``: an NCCL log numbers GPUs by the ranks' bus ids (inferred);
- ``nccl-xml-cut``: an NCCL topology XML cut short, read up to its last whole tag;
- ``nccl-tests-gpus-from-command``: nccl-tests without its device list, its GPUs from the command's ``-g``/``-t``;
- ``nvidia-smi -q`` (``sources.smi.smi_q``): ``smi-q-gpus-not-listed`` (``Attached GPUs`` says more than
  the text lists), ``smi-q-unavailable`` (values printed as N/A), ``smi-q-grep-gaps`` (grep's ``--``
  lines), ``smi-q-gpu-repeated`` (a second block of one bus id), ``smi-q-no-bus-id``;
- ``nvidia-smi nvlink`` (``sources.smi.nvlink``): ``nvlink-list-cut`` (a GPU's link list elided);
- ``paste-part-empty`` (``sources.registry``): one output of a paste of several carries nothing its
  reader takes (an NCCL log of bootstrap lines beside a ``topo -m``): skipped, and said.
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
    if facts.get("cut_before_d2d") and not waived:
        return ("info", (f"{source}: nvbandwidth measured no GPU pair: the output ends before any device-to-device "
                         f"test (only host copies are in the text), so whether these {facts['gpu_count']} GPUs can "
                         "peer, and how fast, is not in it"),
                "paste the whole output, or run `nvbandwidth -t device_to_device_memcpy_read_ce`")
    why = (f"nvbandwidth waived {', '.join(waived)}: it waives a device-to-device test where the GPUs' peer "
           f"mapping fails, so these {facts['gpu_count']} GPUs could not peer" if waived else
           "the run stopped at its byte check" if stopped else "device-to-device tests waived, or one GPU")
    return ("warning" if waived else "info", f"{source}: nvbandwidth measured no GPU pair ({why})",
            None if stopped else "run `nvbandwidth -t device_to_device_memcpy_read_ce` on a box whose GPUs can peer")


def _p2p_enabled_not_measured(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']}: the p2pBandwidthLatencyTest output holds its P2P=Disabled figures only (copies "
                     "staged through host memory) and ends before any P2P=Enabled matrix: how fast the GPUs copy "
                     "peer to peer is not in the text"),
            "paste the whole output, down to its `NOTE: The CUDA Samples are not meant for performance` line")


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
            (f"{facts['source']}: the NCCL topology XML is cut short (elements left open): read up to its last whole tag"
             + (f"; GPU {cut_gpu}'s NVLink list was cut, so its pairs without a known NVLink are unknown"
                if cut_gpu is not None else "")
             + "; GPUs and NICs after the cut are not in the text"), None)


def _nccl_xml_no_root(facts: dict[str, Any], gpus: list[int]) -> Words:
    where = ("" if facts.get("cpus") else
             "; no <cpu> encloses its GPUs, so their NUMA nodes, and how pairs without a shared <pci> above them "
             "are connected, are unknown")
    return ("info", (f"{facts['source']}: a fragment of an NCCL topology XML without its <system> root: read the "
                     f"<cpu>/<pci> elements it has{where}; GPUs and NICs outside the fragment are not in the text"), None)


def _nccl_tests_no_rows(facts: dict[str, Any], gpus: list[int]) -> Words:
    where = "after its column header" if facts.get("header") else "before its column header"
    if facts.get("beside_log"):
        return ("info", (f"{facts['source']}: the nccl-tests table among its NCCL_DEBUG lines is cut {where}, before "
                         "its first row: the log lines are read, and no bus bandwidth (paste the rows and "
                         "`# Avg bus bandwidth` too)"), None)
    return ("info", (f"{facts['source']}: the nccl-tests output is cut {where}, before its first row: the GPUs its "
                     "`Using devices` lines name are read, and no bus bandwidth (run it to the end, or paste the "
                     "rows and `# Avg bus bandwidth`)"), None)


def _nccl_tests_gpus_from_command(facts: dict[str, Any], gpus: list[int]) -> Words:
    count = facts["gpu_count"]
    return ("info", (f"{facts['source']}: no `# Using devices` list: the {count} GPU{'s' if count != 1 else ''} "
                     f"{'are' if count != 1 else 'is'} what its command line's `{facts['options']}` gives one process, "
                     f"CUDA device{'s' if count != 1 else ''} {_gpu_range(count)} of it (under CUDA_VISIBLE_DEVICES, "
                     "numbered as the process sees them); their names and bus ids are not in the text"),
            "paste the output from its first line (the `# Using devices` list names each GPU and its bus id)")


def _gpu_range(count: int) -> str:
    return "0" if count == 1 else f"0-{count - 1}" if count > 2 else "0 and 1"


def _nccl_tests_separate_jobs(facts: dict[str, Any], gpus: list[int]) -> Words:
    named = ", ".join(f"pid {pid} on {host}" for host, pid in facts["processes"])
    return ("warning", (f"{facts['source']}: one rank is named by {len(facts['processes'])} processes ({named}): each "
                        "ran nccl-tests as a job of its own, so no collective joined their GPUs and its figures are "
                        "no measure of the link between them (under mpirun: nccl-tests built without MPI support)"),
            "rebuild nccl-tests with `make MPI=1` (MPI_HOME set) and run it under mpirun again; each process then "
            "prints a rank of its own")


def _nccl_p2p_disabled_unplaced(facts: dict[str, Any], gpus: list[int]) -> Words:
    pairs = ", ".join(f"{a} and {b}" for a, b in facts["pairs"])
    how = ("each rank's `nvmlDev` (NCCL 2.19 and later print it in `Init START` lines)" if facts.get("one_host")
           else "each rank's host and `nvmlDev`")
    return ("info", (f"{facts['source']}: NCCL says P2P is disabled between connected GPUs {pairs} (NVML's numbers, "
                     f"so P2P is not used between them), but the log does not say which of its ranks those GPUs are: "
                     f"not placed on a pair here (a log with {how} places them)"), None)


def _nccl_log_hosts_missing(facts: dict[str, Any], gpus: list[int]) -> Words:
    hosts = ", ".join(facts["hosts"]) or "no host name"
    return ("info", (f"{facts['source']}: the job runs on {facts['nodes']} nodes (`nNodes`), and the text holds the "
                     f"lines of {hosts} only: its ranks are shown as ranks, not as GPUs of one host, and what the "
                     "other hosts logged is not in the text (paste every host's log, each line with its "
                     "`host:pid:tid` prefix)"), None)


def _smi_q_gpus_not_listed(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']}: `nvidia-smi -q` says {facts['attached']} GPUs are attached but the text lists "
            f"{facts['listed']} (run with -i, or cut short): the others are not in the text, and which indices the "
            "listed ones hold cannot be told, so they are matched to other sources by PCI bus id only"),
            "paste the whole `nvidia-smi -q` output (without -i)")


_FIELD_WORDS = {"name": "name", "memory_total_bytes": "memory total", "pcie_gen_current": "current PCIe generation",
                "pcie_gen_max": "maximum PCIe generation", "pcie_width_current": "current PCIe width",
                "pcie_width_max": "maximum PCIe width"}


def _smi_q_unavailable(facts: dict[str, Any], gpus: list[int]) -> Words:
    fields = ", ".join(_FIELD_WORDS.get(name, name) for name in facts["fields"])
    return ("info", (f"{facts['source']}: `nvidia-smi -q` prints N/A for the {fields} of GPU "
                     f"{', '.join(map(str, gpus))}: unknown"), None)


def _smi_q_grep_gaps(facts: dict[str, Any], gpus: list[int]) -> Words:
    lines = ", ".join(map(str, facts["lines"])) + ("..." if facts["count"] > len(facts["lines"]) else "")
    return ("info", (f"{facts['source']}: the `nvidia-smi -q` output was cut by grep ('--' at line{'s' if facts['count'] > 1 else ''} "
            f"{lines}): what grep left out is unknown"), None)


def _smi_q_gpu_repeated(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']}: line {facts['line']} starts another block of GPU {facts['bus_id']} (a second "
            f"output of the same GPU, e.g. `nvidia-smi vgpu -q`): read as GPU {gpus[0]}, its first values kept"), None)


def _smi_q_no_bus_id(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']}: the `GPU` line{'s' if len(facts['lines']) > 1 else ''} at line "
            f"{', '.join(map(str, facts['lines']))} of `nvidia-smi -q` hold no readable PCI bus id: GPU "
            f"{', '.join(map(str, gpus))} cannot be matched to other sources by bus id"), None)


def _paste_part_empty(facts: dict[str, Any], gpus: list[int]) -> Words:
    return ("info", (f"{facts['source']}: its {facts['kind']} lines carry nothing gputopo reads ({facts['reason']}); "
            "the other outputs of the paste were read"), None)


def _nvlink_list_cut(facts: dict[str, Any], gpus: list[int]) -> Words:
    shown = "; ".join(f"GPU {g}: {n} link{'s' if n != 1 else ''} listed, then line {line}"
                      for g, n, line in zip(gpus, facts["links_listed"], facts["lines"]))
    return ("info", (f"{facts['source']}: the `nvidia-smi nvlink` output elides lines ({shown}: '...'): the links "
            "left out are unknown, so how many of those GPUs' links are up is not known (not 'down')"),
            f"paste the whole `nvidia-smi nvlink -s -i {gpus[0]}` output")


TOOL_WORDINGS: dict[str, Callable[[dict[str, Any], list[int]], Words]] = {
    "cuda-ordinals-only": _cuda_ordinals_only,
    "no-pair-measured": _no_pair_measured,
    "p2p-enabled-not-measured": _p2p_enabled_not_measured,
    "nvbandwidth-wrong-data": _nvbandwidth_wrong_data,
    "nccl-gpus-by-bus-id": _nccl_gpus_by_bus_id,
    "nccl-xml-cut": _nccl_xml_cut,
    "nccl-xml-no-root": _nccl_xml_no_root,
    "nccl-tests-no-rows": _nccl_tests_no_rows,
    "nccl-tests-separate-jobs": _nccl_tests_separate_jobs,
    "nccl-tests-gpus-from-command": _nccl_tests_gpus_from_command,
    "nccl-p2p-disabled-unplaced": _nccl_p2p_disabled_unplaced,
    "nccl-log-hosts-missing": _nccl_log_hosts_missing,
    "smi-q-gpus-not-listed": _smi_q_gpus_not_listed,
    "smi-q-unavailable": _smi_q_unavailable,
    "smi-q-grep-gaps": _smi_q_grep_gaps,
    "smi-q-gpu-repeated": _smi_q_gpu_repeated,
    "smi-q-no-bus-id": _smi_q_no_bus_id,
    "nvlink-list-cut": _nvlink_list_cut,
    "paste-part-empty": _paste_part_empty,
}
