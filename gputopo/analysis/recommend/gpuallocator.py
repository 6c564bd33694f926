"""NVIDIA go-gpuallocator's best-effort policy, re-implemented for comparison only.

go-gpuallocator (used by NVIDIA's Kubernetes device plugin) scores a pair of GPUs by its links —
SYS 10, NODE 20, PHB 30, PXB 40, PIX 50, same board 60, plus 100 per NVLink, up to eighteen links
since November 2023 (commit b7e889c "Extend policy to 18 NVLinks"; before it the table stopped at
twelve) — and a set by the sum over its pairs. Its link counter (``internal/links/device.go``
``GetNVLink``) stops at eighteen and NVML lists at most ``NVLINK_MAX_LINKS`` = 18 links per GPU, so a
pair said to have more counts as eighteen.

It then looks at every way of partitioning *all* free GPUs into sets of the requested size
(padding with empty slots when the count does not divide), keeps the partition with the highest
total score that has a full set holding every required GPU, and returns that partition's best set.

We keep this only to compare against ``analysis.recommend``: a sum of link scores can prefer a
group with one slow hop (which a ring all-reduce must cross) over a group whose every hop is fast.
The search is exhaustive and grows factorially, so it refuses more than ``MAX_GPUS`` GPUs.
"""

from __future__ import annotations

import itertools
from typing import Callable, Iterable, Iterator, Sequence

from gputopo.errors import InputError
from gputopo.model import Link, Topology

PCIE_SCORE = {"SYS": 10, "NODE": 20, "PHB": 30, "PXB": 40, "PIX": 50}
SAME_BOARD_SCORE = 60  # NVML's "internal" level (two GPUs on one board); nvidia-smi text cannot show it
NVLINK_SCORE_PER_LINK = 100
NVLINK_MAX_SCORED_LINKS = 18  # the Go switch scores one to eighteen NVLinks; its counter stops at 18
MAX_GPUS = 12  # partitions of 12 GPUs into pairs: 10395; into triples with padding: fine; 16 is not

Slot = int | None  # a GPU index, or None for padding


def pair_score(link: Link | None) -> int:
    """go-gpuallocator's score for one pair: its PCIe path word plus 100 per NVLink (at most 18 counted)."""
    if link is None:
        return 0
    word = link.pcie_path or (link.type if link.type in PCIE_SCORE else None)
    score = PCIE_SCORE.get(word or "", 0)
    if link.nvlink_count >= 1:
        score += NVLINK_SCORE_PER_LINK * min(link.nvlink_count, NVLINK_MAX_SCORED_LINKS)
    return score


def set_score(topology: Topology, gpus: Iterable[int]) -> int:
    """Sum of pair scores over a set of GPUs."""
    links = topology.link_map()
    return _set_score(list(gpus), lambda a, b: pair_score(links.get((a, b))))


def _set_score(slots: Sequence[Slot], score_of: Callable[[int, int], int]) -> int:
    total = 0
    for a, b in itertools.combinations(slots, 2):
        if a is not None and b is not None:
            total += score_of(a, b)
    return total


def iterate_partitions(devices: Sequence[int], size: int) -> Iterator[list[tuple[Slot, ...]]]:
    """Every partition of ``devices`` (padded with ``None`` to a multiple of ``size``) into sets of
    ``size``; each set's first slot is the lowest remaining one, so no partition repeats. A set holds
    either all the padding or none of it, as in the Go code."""
    if size <= 0 or size > len(devices):
        return
    if size == 1:
        for device in devices:
            yield [(device,)]
        return
    slots: list[Slot] = list(devices)
    while len(slots) % size:
        slots.append(None)
    padding = slots.count(None)

    def walk(remaining: list[Slot], accum: list[tuple[Slot, ...]]) -> Iterator[list[tuple[Slot, ...]]]:
        if len(remaining) == size:
            yield accum + [tuple(remaining)]
            return
        head, rest = remaining[0], remaining[1:]
        for others in itertools.combinations(range(len(rest)), size - 1):
            chosen = (head,) + tuple(rest[i] for i in others)
            pad = sum(1 for s in chosen if s is None)
            if pad not in (0, padding):
                continue
            left = [rest[i] for i in range(len(rest)) if i not in others]
            yield from walk(left, accum + [chosen])

    yield from walk(slots, [])


def allocate(
    topology: Topology, size: int, available: Iterable[int] | None = None, required: Iterable[int] = ()
) -> list[int]:
    """The set go-gpuallocator's best-effort policy would hand out (``[]`` where it gives nothing)."""
    free = sorted(topology.gpu_indices if available is None else available)
    need = set(required)
    if size <= 0 or len(free) < size or len(need) > size:
        return []
    if len(free) > MAX_GPUS:
        raise InputError(f"the go-gpuallocator comparison is exhaustive and limited to {MAX_GPUS} GPUs")
    links = topology.link_map()
    cache: dict[tuple[int, int], int] = {}

    def score_of(a: int, b: int) -> int:
        key = (a, b) if a < b else (b, a)
        if key not in cache:
            cache[key] = pair_score(links.get(key))
        return cache[key]

    best_partition: list[tuple[Slot, ...]] | None = None
    best_score = 0
    for partition in iterate_partitions(free, size):
        if not any(need <= set(s) and None not in s for s in partition):
            continue
        score = sum(_set_score(s, score_of) for s in partition)
        if best_partition is None or score > best_score:
            best_partition, best_score = partition, score
    if best_partition is None:
        return []
    candidates = [s for s in best_partition if need <= set(s)]
    best_set = candidates[0]
    best_set_score = _set_score(best_set, score_of)
    for s in candidates[1:]:
        score = _set_score(s, score_of)
        if score > best_set_score:
            best_set, best_set_score = s, score
    return sorted(g for g in best_set if g is not None)
