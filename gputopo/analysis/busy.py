"""Which GPUs are in use right now (NVML's live state): compute processes, memory used, utilisation.

Pure functions over ``Gpu``'s live fields; every other source leaves them ``None`` ("not known"),
and a GPU whose state is not known is never called busy or free. Every word about busy GPUs says
when the state was read (``Topology.captured_at``; ``live_state_time``): a snapshot read back
later shows the state of then, not now.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputopo.model import Gpu, Topology

DEFAULT_MAX_MEMORY_USED_PERCENT = 10.0
DEFAULT_MAX_UTILIZATION_PERCENT = 10.0


@dataclass(frozen=True)
class BusyLimits:
    """A GPU is busy when it runs a compute process, or above either limit."""

    max_memory_used_percent: float = DEFAULT_MAX_MEMORY_USED_PERCENT
    max_utilization_percent: float = DEFAULT_MAX_UTILIZATION_PERCENT


def busy_reasons(gpu: Gpu, limits: BusyLimits = BusyLimits()) -> list[str]:
    """Why ``gpu`` is in use, in words; empty where it is free or its state is not known."""
    reasons = []
    if gpu.processes:
        shown = ", ".join(f"{p.name or '?'} (PID {p.pid})" for p in gpu.processes[:3])
        more = f" and {len(gpu.processes) - 3} more" if len(gpu.processes) > 3 else ""
        plural = "es" if len(gpu.processes) != 1 else ""
        reasons.append(f"{len(gpu.processes)} compute process{plural}: {shown}{more}")
    if gpu.memory_used_bytes is not None and gpu.memory_total_bytes:
        share = 100.0 * gpu.memory_used_bytes / gpu.memory_total_bytes
        if share > limits.max_memory_used_percent:
            reasons.append(f"{share:.0f}% of its memory in use (over {limits.max_memory_used_percent:g}%)")
    if gpu.utilization_percent is not None and gpu.utilization_percent > limits.max_utilization_percent:
        reasons.append(f"{gpu.utilization_percent}% utilisation (over {limits.max_utilization_percent:g}%)")
    return reasons


def busy_gpus(topology: Topology, limits: BusyLimits = BusyLimits()) -> dict[int, list[str]]:
    """``{gpu index: reasons}`` for every GPU in use."""
    found = {gpu.index: busy_reasons(gpu, limits) for gpu in topology.gpus}
    return {index: reasons for index, reasons in found.items() if reasons}


def has_live_state(topology: Topology) -> bool:
    """Whether the source said anything about the GPUs' live state (NVML does; text never)."""
    return any(g.processes is not None or g.memory_used_bytes is not None or g.utilization_percent is not None
               for g in topology.gpus)


def live_state_time(topology: Topology) -> str:
    """When the live state was read, for every line that shows or uses it (a snapshot read back
    later is not the state now): ``as of 2025-06-01 10:00:00 UTC``, or that the time is unknown (a
    snapshot saved before gputopo recorded it, or a text such as `nvidia-smi -q` whose timestamp has
    no time zone)."""
    from gputopo.notation import shown_utc_time

    if topology.captured_at is None:
        return "as of an unknown time (the source does not record when it was read)"
    return f"as of {shown_utc_time(topology.captured_at)}"


def choose_skipped(
    topology: Topology, wanted: int, require: list[int], exclude: list[int], limits: BusyLimits, policy: str
) -> tuple[list[int], dict[int, list[str]], list[str]]:
    """(busy GPUs to leave out, every busy GPU with its reasons, notes in words) for an ask of
    ``wanted`` GPUs. ``policy``: ``skip`` (default: leave busy GPUs out while enough free ones
    remain, else keep them and say so), ``free-only`` (leave them out, or refuse), ``include``
    (rank them like idle ones, say they are busy). A required GPU is never left out silently."""
    from gputopo.errors import InputError
    from gputopo.notation import gpu_list

    lost = lost_gpus(topology)
    lost_required = [g for g in lost if g in require and g not in exclude]
    if lost_required:
        raise InputError(f"required GPU {gpu_list(lost_required)} is lost: {lost[lost_required[0]]}")
    lost_skipped = [g for g in lost if g not in exclude]
    lost_notes = [f"left out: GPU {g} {lost[g]}" for g in lost_skipped]
    if policy == "free-only" and not has_live_state(topology):
        lost_notes.append("--free-only: whether the GPUs are free is not known here (the source has no live "
                          "state: run recommend on the GPU host, through NVML)")
    skipped, busy, notes = _choose_busy(topology, wanted, require, sorted(set(exclude) | set(lost_skipped)), limits, policy)
    return sorted(set(skipped) | set(lost_skipped)), busy, lost_notes + notes


# Findings a reader makes (NVML's lost GPU, worded from its note) or a snapshot carries (doctor's): never
# ``diagnose``'s, which `recommend` does not run (``analysis.topologies_for(..., diagnosed=False)``).
LOST_CODES = ("gpu-lost", "doctor-gpu-fallen-off-bus")


def lost_gpus(topology: Topology) -> dict[int, str]:
    """``{gpu index: why}`` for GPUs the source found lost (NVML's GPU_IS_LOST, a GPU that fell off
    the bus): never chosen, whatever the policy."""
    lost: dict[int, str] = {}
    for finding in topology.diagnostics:
        if finding.code in LOST_CODES:
            for gpu in finding.gpus:
                lost.setdefault(gpu, "is lost (" + finding.code + "; see the findings)")
    return lost


def _choose_busy(
    topology: Topology, wanted: int, require: list[int], exclude: list[int], limits: BusyLimits, policy: str
) -> tuple[list[int], dict[int, list[str]], list[str]]:
    from gputopo.errors import InputError
    from gputopo.notation import gpu_list

    busy = busy_gpus(topology, limits)
    if not busy:
        return [], {}, []
    candidates = [g for g in busy if g not in exclude]
    required_busy = [g for g in candidates if g in require]
    if policy == "free-only" and required_busy:
        raise InputError(f"--free-only: required GPU {gpu_list(required_busy)} is busy ({'; '.join(busy[required_busy[0]])}; "
                         f"{live_state_time(topology)})")
    skippable = [g for g in candidates if g not in require]
    free_left = len(topology.gpus) - len(set(exclude) | set(skippable))
    when = live_state_time(topology)
    words = {g: f"GPU {g} ({when}): {'; '.join(busy[g])}" for g in candidates}
    if policy == "include" or not skippable:
        return [], busy, [f"busy, ranked like an idle GPU: {words[g]}" for g in candidates]
    if free_left < wanted:
        if policy == "free-only":
            raise InputError(f"--free-only: only {free_left} free GPUs for {wanted}; busy: "
                             + " | ".join(words[g] for g in skippable))
        return [], busy, [f"busy but kept (only {free_left} free GPUs for {wanted}): {words[g]}" for g in candidates]
    notes = [f"skipped busy {words[g]}" for g in skippable]
    notes += [f"busy but required (--require): {words[g]}" for g in required_busy]
    return skippable, busy, notes


def memory_held(topology: Topology) -> dict[int, str]:
    """``{gpu index: why}`` for GPUs a TF log shows short of memory (``tf-gpu-memory-short``: TensorFlow
    got under half of what it got on the others of the model, most likely as another process held
    the rest). Weaker evidence than NVML's live state: the state when the log was written, a past
    one, so such GPUs are never left out, only put after the others where groups tie
    (``recommend(held=...)``); where the source has live state, that state says more and this none."""
    from gputopo.analysis.causes.tf_log_findings import memory_short_findings
    from gputopo.numbering import tf_ordinal_to_index

    view = topology.tf
    if view is None or has_live_state(topology):
        return {}
    findings = memory_short_findings(view)
    if not findings:
        return {}
    devices = {device.ordinal: device for device in view.devices}
    mapping = ({o: o for o in devices} if topology.source == "tf-log" else tf_ordinal_to_index(topology, view))
    known = set(topology.gpu_indices)
    held: dict[int, str] = {}
    for finding in findings:
        for ordinal in finding.gpus:
            index = mapping.get(ordinal)
            device = devices.get(ordinal)
            if index is None or index not in known or device is None:
                continue
            most = max((d.memory_mb or 0) for d in view.devices if d.name == device.name)
            held[index] = (f"TensorFlow got only {device.memory_mb} MB of GPU {index}'s memory against up to {most} MB on the "
                           f"other {device.name} GPUs when the TF log was written, most likely as another process held "
                           "the rest (a past state, read from the log's figures: check `nvidia-smi` now)")
    return held
