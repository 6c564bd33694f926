"""The NVML probe's failures as reading notes (facts; ``gputopo.analysis.notes.reading_notes`` words
them): one per GPU that fell off the bus, one for the GPU pairs on multi-GPU boards, one per kind
of query that NVML did not answer (which GPUs or pairs, and NVML's reason for each)."""

from __future__ import annotations

from typing import Any

from gputopo.model import ReadingNote

GPU_LOST = "gpu-lost"  # {"bus_id": the GPU's PCI bus id, or null}
MULTI_GPU_BOARD = "multi-gpu-board"  # {"pairs": [[a, b], ...]}: NVML says INTERNAL (shown as PIX)
# {"query": kind (``nvml._Probe.call``'s), "failed": [{"gpu": g, "reason": r} or {"pair": [a, b], "reason": r}]}
NVML_QUERY_FAILED = "nvml-query-failed"


def failure_notes(failures: dict[str, dict[Any, str]], lost: dict[int, str]) -> list[ReadingNote]:
    """One note per lost GPU, one for multi-GPU boards, one per query kind that failed.

    ``failures`` maps a query kind to ``{gpu or (a, b) pair: reason}`` (kind ``_board``: the pairs
    NVML says share a board); ``lost`` maps a GPU that fell off the bus to its bus id (or "?").
    A lost GPU's failed queries are left out: its ``gpu-lost`` note explains them.
    """
    notes = [ReadingNote(GPU_LOST, {"bus_id": bus_id if bus_id and bus_id != "?" else None}, [gpu])
             for gpu, bus_id in sorted(lost.items())]
    failures = dict(failures)
    boards = failures.pop("_board", {})
    if boards:
        notes.append(ReadingNote(MULTI_GPU_BOARD, {"pairs": [list(pair) for pair in sorted(boards)]},
                                 sorted({g for pair in boards for g in pair})))
    for kind, by_key in failures.items():
        by_key = {k: r for k, r in by_key.items() if not _touches(k, lost)}
        if not by_key:
            continue
        failed = [{"pair": list(k), "reason": r} if isinstance(k, tuple) else {"gpu": k, "reason": r}
                  for k, r in by_key.items()]
        gpus = sorted({g for k in by_key for g in (k if isinstance(k, tuple) else (k,))})
        notes.append(ReadingNote(NVML_QUERY_FAILED, {"query": kind, "failed": failed}, gpus))
    return notes


def _touches(key: Any, lost: dict[int, str]) -> bool:
    gpus = key if isinstance(key, tuple) else (key,)
    return any(g in lost for g in gpus)
