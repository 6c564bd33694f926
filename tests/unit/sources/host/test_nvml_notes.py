"""The NVML probe's failures as reading notes: facts only, grouped per query kind (their words:
tests/unit/analysis/notes/test_reading_notes.py; the probe end to end: test_nvml.py)."""

from __future__ import annotations

from gputopo.model import ReadingNote
from gputopo.sources.host.nvml_notes import (
    GPU_LOST,
    MULTI_GPU_BOARD,
    NVML_QUERY_FAILED,
    failure_notes,
)


def test_lost_gpus_first_then_boards_then_one_note_per_query_kind():
    failures = {
        "cpu-affinity": {0: "not supported", 1: "not supported"},
        "_board": {(2, 3): "INTERNAL", (0, 1): "INTERNAL"},
        "p2p": {(0, 3): "unknown status 42"},
    }
    notes = failure_notes(failures, {5: "0000:3a:00.0", 4: "?"})
    assert notes == [
        ReadingNote(GPU_LOST, {"bus_id": None}, [4]),  # "?": the probe could not read it
        ReadingNote(GPU_LOST, {"bus_id": "0000:3a:00.0"}, [5]),
        ReadingNote(MULTI_GPU_BOARD, {"pairs": [[0, 1], [2, 3]]}, [0, 1, 2, 3]),
        ReadingNote(NVML_QUERY_FAILED, {"query": "cpu-affinity", "failed": [{"gpu": 0, "reason": "not supported"},
                                                                            {"gpu": 1, "reason": "not supported"}]}, [0, 1]),
        ReadingNote(NVML_QUERY_FAILED, {"query": "p2p", "failed": [{"pair": [0, 3], "reason": "unknown status 42"}]}, [0, 3]),
    ]
    assert failures["_board"]  # the caller's failures are not changed


def test_a_lost_gpus_failed_queries_are_its_lost_note_only():
    failures = {"name": {2: "GPU is lost"}, "topology": {(1, 2): "GPU is lost", (0, 1): "no permission"}, "mig": {}}
    notes = failure_notes(failures, {2: "0000:3a:00.0"})
    assert [(n.code, n.facts.get("query"), n.gpus) for n in notes] == [
        (GPU_LOST, None, [2]), (NVML_QUERY_FAILED, "topology", [0, 1])]
    assert notes[1].facts["failed"] == [{"pair": [0, 1], "reason": "no permission"}]


def test_no_failures_no_notes():
    assert failure_notes({}, {}) == [] and failure_notes({"numa": {}}, {}) == []
