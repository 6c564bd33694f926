"""TensorFlow log readers' notes in words (``analysis/notes/reading_notes_tf.py``), on the logs the readers'
tests read (they check the facts; this file checks the words)."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES, TF_LOG_FIXTURES

from gputopo.analysis.notes.reading_notes import note_finding, note_findings
from gputopo.analysis.notes.reading_notes_tf import tf_cut_words
from gputopo.model import Finding, ReadingNote
from gputopo.sources.tf.tf_init import tf_view_from_init_log
from gputopo.sources.tf.tflog import parse_tf_log, read_tf_log

CORPUS = OWN_FIXTURES / "corpus"
OWN_LOGS = OWN_FIXTURES / "tf_logs"


def _words(notes: list[ReadingNote], code: str) -> Finding:
    (finding,) = [f for f in note_findings(notes) if f.code == code]
    return finding


def test_a_cut_log_says_every_cut_place_in_one_finding():
    view = read_tf_log(str(OWN_LOGS / "broken_cut_lines_missing_rows.log"))
    cut = _words(view.reading_notes, "tf-log-cut")
    assert cut.severity == "info" and cut.message.startswith(f"{view.source} is cut short in 6 places; what is there was read: ")
    for place in ("line 8", "line 9", "line 10", "row for GPU 1", "no rows for GPU 2, 3"):
        assert place in cut.message
    tf1 = next(p for p in TF_LOG_FIXTURES if p.name == "tf1_peer_access_not_supported_4gpu.log")
    assert "no rows for GPU 2, 3" in _words(parse_tf_log(tf1.read_text(), tf1.name).reading_notes, "tf-log-cut").message
    headerless = parse_tf_log("Device interconnect StreamExecutor with strength 1 edge matrix:\n0:   N Y\n1:   Y N\n", "log")
    assert "no header line" in _words(headerless.reading_notes, "tf-log-cut").message
    absurd = parse_tf_log("cannot enable peer access from device ordinal 0 to device ordinal 1\n"
                          "cannot enable peer access from device ordinal 1 to device ordinal 1023\n", "log")
    assert "1023 is not plausible and was ignored" in _words(absurd.reading_notes, "tf-log-cut").message
    name = "tf15_edge_matrix_no_header_4gpu_2080ti_cut.log"
    assert "log ends before it created them" in _words(parse_tf_log((OWN_LOGS / name).read_text(), name).reading_notes,
                                                         "tf-log-cut").message


@pytest.mark.parametrize(
    ("place", "words"),
    [
        ({"cut": "created-line", "line": 4, "before": "details", "tf_id": 3},
         "line 4: the `Created device` line for GPU:3 is cut before its device details"),
        ({"cut": "created-line", "line": 4, "before": "details", "tf_id": None},
         "line 4: a `Created device` line is cut before its device details"),
        ({"cut": "created-line", "line": 4, "before": "number", "tf_id": 0}, "line 4: the `Created device` line for GPU:0 is cut short"),
        ({"cut": "created-line", "line": 4, "before": "number", "tf_id": None},
         "line 4: a `Created device` line is cut before its device number"),
        ({"cut": "bus-id", "line": 8, "gpu": 1, "bus_id": "0000:1b:0"}, "line 8: the PCI bus id of GPU 1 is cut short ('0000:1b:0')"),
        ({"cut": "before-bus-id", "line": 9, "gpu": 2}, "line 9: the `Created device` line for GPU 2 is cut before its PCI bus id"),
        ({"cut": "not-created", "gpus": [3]},
         "TensorFlow listed GPU 3 but the log ends before it created it (PCI bus ids and memory unknown)"),
        ({"cut": "matrix-header", "line": 1, "columns": [0, 0]}, "line 1: the peer matrix has no header line; columns read as ordinals 0"),
        ({"cut": "matrix-row", "gpu": 1, "entries": 2, "of": 4}, "the peer matrix row for GPU 1 is cut short (2 of 4 entries)"),
    ],
)
def test_each_cut_place_in_words(place, words):
    assert tf_cut_words(place) == words


def _log(name: str) -> str:
    return (CORPUS / "tf_logs" / name).read_text()


def test_several_startups_in_words():
    text = _log("tf15_readme_two_machines_2gpu_then_4gpu.log")
    last = _words(parse_tf_log(text, "readme").reading_notes, "tf-log-startups").message
    assert last.startswith("the log holds 2 TensorFlow start-ups; using the last complete one (#2)") and "--tf-run N" in last
    assert "(--tf-run 1)" in _words(parse_tf_log(text, "readme", run=1).reading_notes, "tf-log-startups").message
    horovod = _words(parse_tf_log(_log("tf15_horovod_ranks_interleaved_cut_2gpu.log"), "h").reading_notes, "tf-log-startups")
    assert "(#2; the one after it is incomplete)" in horovod.message
    lines = _log("tf15_edge_matrix_two_islands_8gpu_1080ti.log").splitlines()
    job = parse_tf_log("\n".join(lines[:11] + [lines[0]] + lines[11:]), "job.log")
    message = _words(job.reading_notes, "tf-log-startups").message
    assert "using #1, the one that says most about which GPUs can peer" in message
    assert "the other: #2 from line 12 (GPUs 0,1,2,3,4,5,6,7, nothing about peers)" in message
    none = note_finding(ReadingNote("tf-log-startups", {"startups": 3, "chosen": 3, "how": "none-complete", "first_line": 9,
                                                        "others": [{"number": 1, "first_line": 1, "gpus": list(range(8)),
                                                                    "gpu_count": 9, "peer_entries": 2, "complete": False}]}))
    assert none.message == ("the log holds 3 TensorFlow start-ups; none is complete; using the last (#3), from line 9; the other: "
                            "#1 from line 1 (GPUs 0,1,2,3,4,5,6,7..., 2 peer entries, incomplete); pick another with --tf-run N")


def test_what_else_a_log_reader_notes_in_words():
    cut = [line for line in _log("tf15_edge_matrix_two_islands_8gpu_1080ti.log").splitlines() if "device:GPU:7" in line]
    implied = _words(parse_tf_log("\n".join(cut), "cut.log").reading_notes, "tf-gpus-implied")
    assert implied.message.startswith("the log implies at least 8 GPUs (it names GPU 7)")
    text = ("I gpu_init.cc:59] cannot enable peer access from device ordinal 0 to device ordinal 1\n"
            "I gpu_init.cc:126] DMA: 0 1\nI gpu_init.cc:136] 0:   Y Y\nI gpu_init.cc:136] 1:   Y Y\n")
    contradiction = _words(parse_tf_log(text, "log").reading_notes, "tf-log-contradiction")
    assert (contradiction.severity, contradiction.gpus) == ("warning", [0, 1])
    assert contradiction.message == ("log line 1: TensorFlow could not enable peer access 0->1 although its matrix says Y; "
                                     "taken as no peer access")
    unknown = note_finding(ReadingNote("tf-peer-unknown", {"cut": False, "missing": [3], "pairs": [[0, 3], [1, 3]]}, [0, 1, 3]))
    assert unknown.message == ("TensorFlow logs only the pairs that cannot peer, but GPU 3 is not named on both sides of those "
                               "lines (cut short?), so whether 0-3, 1-3 can peer is unknown")
    many = note_finding(ReadingNote("tf-peer-unknown", {"cut": True, "missing": [], "pairs": [[0, k] for k in range(1, 15)]}))
    assert "but the log looks cut short, so whether 0-1, 0-2" in many.message and "0-12... can peer is unknown" in many.message
    empty = tf_view_from_init_log("E0000 00:00:1 123 cuda_executor.cc:1] failed call to cuInit: CUDA_ERROR_NO_DEVICE\n"
                                  "GPUTOPO_TF_GPUS 0\n")
    said = _words(empty.reading_notes, "tf-no-gpu-reason")
    assert said.message.startswith("TensorFlow said: E0000") and "CUDA_ERROR_NO_DEVICE" in said.message


def test_an_edge_matrix_over_no_gpu_in_words():
    name = "tf2x_two_processes_empty_edge_matrices_xla_8gpu_v100_sxm2_cut.log"
    said = _words(parse_tf_log((CORPUS / "tf_logs" / name).read_text(), name).reading_notes, "tf-no-visible-gpu")
    assert said.severity == "info" and said.message == (
        "TensorFlow's edge matrix lists no GPU: its visible GPU list was empty, so it used none; XLA's device lines "
        "name GPU 0, 1 of the CUDA platform, which TensorFlow did not use")
    assert "CUDA_VISIBLE_DEVICES" in said.fix
    alone = note_finding(ReadingNote("tf-no-visible-gpu", {"xla": []}))
    assert alone.message.endswith("so it used none")


def test_nccl_lines_alone_in_words():
    said = note_finding(ReadingNote("tf-log-nccl-only", {"source": "s", "count": 4, "devices": [0], "nranks": 4, "ring": 4}))
    assert "at least 4 GPUs (its NCCL threads log on CUDA device 0; nranks 4, rings of 4 ranks: one GPU per rank)" in said.message
    bare = note_finding(ReadingNote("tf-log-nccl-only", {"source": "s", "count": 1, "devices": [], "nranks": None, "ring": None}))
    assert "(its NCCL threads log on no CUDA device)" in bare.message
    several = note_finding(ReadingNote("tf-log-startups", {"startups": 2, "chosen": 1, "how": "most-gpus", "first_line": 1,
                                                           "others": [{"number": 2, "first_line": 3, "gpus": [0],
                                                                       "gpu_count": 1, "peer_entries": 0, "complete": False}]}))
    assert "using #1, the one that names most GPUs, from line 1" in several.message
