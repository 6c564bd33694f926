"""Slurm's core numbers for each GPU's CPUs: gres.conf ``Cores=`` from the CPU affinity a source read.

Slurm's ``Cores=`` are *logical core indices*, not the CPU ids Linux, NVML and ``nvidia-smi`` print:
core 0 is the first core of the first socket, core 1 its second, ... socket by socket (lstopo's
``Core L#``), one number per core whatever its hyperthreads (gres.conf(5), "Cores"). Slurm's own
AutoDetect=nvml reads the same affinity and converts it with the node's hwloc map
(``xcpuinfo_mac_to_abs``); a snapshot has no such map, only each GPU's affinity as OS CPU ids. So the
mapping here rests on what those affinities show, and every step that is an assumption is said:

- **hyperthreads**: Linux on x86 numbers each core's first thread 0..C-1 and the siblings C..2C-1.
  Where every GPU's affinity is that shape over the CPUs seen (CPU c with c + C), or every one is two
  equal runs the same distance apart (``0-19,40-59``, one socket of a two-socket box), the upper run
  is the siblings and is dropped (an interleaved box without hyperthreads and an even number of
  cores a socket has the same affinities: read as hyperthreads, the more common setting);
- **sockets numbered in blocks** (``0-19`` on socket 0, ``20-39`` on socket 1): a core's index is
  its first thread's CPU id;
- **sockets interleaved** (even CPUs on socket 0, odd on socket 1, some BIOSes): where the GPUs'
  affinities cover every core, each affinity is taken as one socket's cores, sockets in the order of
  their lowest CPU, and a core's index is its place in that order;
- one affinity that is every CPU seen (a one-socket box, or a source that gives all CPUs): no
  ``Cores=`` at all, as gres.conf(5) advises where any core can be used with the GPU.

Check the result against ``slurmd -C`` and ``lstopo -l`` on the node.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from gputopo.model import Gpu
from gputopo.notation import parse_cpu_list

CHECK = "check against `slurmd -C` / `lstopo -l` on the node"


@dataclass
class CoreMap:
    """Slurm core indices per GPU index (a GPU missing: no ``Cores=`` for it) and how they were made."""

    cores: dict[int, list[int]] = field(default_factory=dict)
    basis: str = ""  # one sentence: the mapping used, or why there is none
    hyperthread_shift: int | None = None  # the distance from a core's first thread to its sibling


def _runs(cpus: list[int]) -> list[tuple[int, int]]:
    runs: list[tuple[int, int]] = []
    for cpu in cpus:
        if runs and cpu == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], cpu)
        else:
            runs.append((cpu, cpu))
    return runs


def _global_shift(sets: list[frozenset[int]]) -> int | None:
    """C where the CPUs seen are 0..2C-1 and every affinity holds CPU c exactly with c + C."""
    seen = frozenset().union(*sets)
    total = max(seen) + 1
    if total % 2 or seen != frozenset(range(total)) or len(sets) < 2:
        return None
    half = total // 2
    for cpus in sets:
        low = {c for c in cpus if c < half}
        if not low or frozenset(low | {c + half for c in low}) != cpus:
            return None
    return half


def _pair_shift(sets: list[frozenset[int]]) -> int | None:
    """k where every affinity is two runs of one length, the second k after the first (k > length)."""
    shifts = set()
    for cpus in sets:
        runs = _runs(sorted(cpus))
        if len(runs) != 2:
            return None
        (a0, a1), (b0, b1) = runs
        if a1 - a0 != b1 - b0 or b0 - a0 <= a1 - a0:
            return None
        shifts.add(b0 - a0)
    return shifts.pop() if len(shifts) == 1 else None


def slurm_cores(gpus: list[Gpu]) -> CoreMap:
    """Each GPU's ``Cores=`` as Slurm numbers cores, from its ``cpu_affinity`` (module docstring)."""
    affinity = {}
    for gpu in gpus:
        try:
            cpus = parse_cpu_list(gpu.cpu_affinity)
        except ValueError:
            cpus = None
        if cpus:
            affinity[gpu.index] = frozenset(cpus)
    if not affinity:
        return CoreMap(basis="the source gives no GPU's CPU affinity: no Cores= (any core may be used with each GPU)")
    sets = sorted(set(affinity.values()), key=min)
    seen = frozenset().union(*sets)
    if any(a & b for i, a in enumerate(sets) for b in sets[i + 1:]):
        return CoreMap(basis="the GPUs' CPU affinities overlap without being equal: no Cores= (no socket map to "
                             "read from them)")
    if len(sets) == 1 and sets[0] == frozenset(range(max(seen) + 1)):
        return CoreMap(basis="every GPU is near every CPU the source shows: no Cores= (any core may be used with "
                             "each GPU, as gres.conf(5) advises)")
    shift = _global_shift(sets) or _pair_shift(sets)
    first = {cpus: frozenset(c for c in cpus if shift is None or c < min(cpus) + shift) for cpus in sets}
    thread_words = (f"hyperthread siblings taken as CPU c and c+{shift} (Linux's x86 numbering) and dropped"
                    if shift else "no hyperthread siblings seen in the affinities")
    if all(len(_runs(sorted(first[cpus]))) == 1 for cpus in sets):
        cores = {index: sorted(first[cpus]) for index, cpus in affinity.items()}
        return CoreMap(cores, f"Cores= are Slurm's logical core indices (core 0 = the first core of the first "
                              f"socket); taken as the OS CPU id of each core's first thread, sockets numbered in "
                              f"blocks; {thread_words}; {CHECK}", shift)
    firsts = sorted(frozenset().union(*first.values()))
    if firsts != list(range(len(firsts))):
        return CoreMap(basis="the GPUs' CPU affinities are interleaved and do not cover every core: no Cores= (the "
                             "socket order of the other cores is not in the source)")
    rank: dict[int, int] = {}
    for cpus in sets:  # one socket per affinity, in the order of their lowest CPU
        for cpu in sorted(first[cpus]):
            rank[cpu] = len(rank)
    cores = {index: sorted(rank[c] for c in first[cpus]) for index, cpus in affinity.items()}
    return CoreMap(cores, f"Cores= are Slurm's logical core indices (core 0 = the first core of the first socket); "
                          f"the affinities interleave sockets, so each is taken as one socket's cores, numbered "
                          f"socket by socket; {thread_words}; {CHECK}", shift)
