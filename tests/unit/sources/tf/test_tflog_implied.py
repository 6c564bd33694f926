"""Issue 18, TensorFlow logs: the GPU count is what the log implies, kept apart from the ordinals it
names; the default start-up is the one that says most about peers. Each on a real log, or on lines
deleted from one (a log as it is pasted: cut)."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES

from gputopo.errors import InputError
from gputopo.sources.tf.tflog import ERA_TF15, parse_tf_log, peer_state

CORPUS = OWN_FIXTURES / "corpus" / "tf_logs"


def _lines(name: str) -> list[str]:
    return (CORPUS / name).read_text().splitlines()


def test_created_gpu7_alone_implies_at_least_eight_gpus():
    last = [line for line in _lines("tf15_edge_matrix_two_islands_8gpu_1080ti.log") if "device:GPU:7" in line]
    view = parse_tf_log("\n".join(last), "cut.log")
    assert [d.ordinal for d in view.devices] == [7]  # the ordinals named ...
    assert (view.gpu_count, view.gpu_count_at_least) == (8, True)  # ... apart from what they imply
    (note,) = [n for n in view.reading_notes if n.code == "tf-gpus-implied"]
    assert note.facts == {"count": 8, "named": [7]}  # at least 8 GPUs; it names GPU 7


def test_a_whole_log_says_its_count_exactly():
    view = parse_tf_log((CORPUS / "tf15_edge_matrix_two_islands_8gpu_1080ti.log").read_text(), "log")
    assert (view.gpu_count, view.gpu_count_at_least) == (8, False)
    assert not [n for n in view.reading_notes if n.code == "tf-gpus-implied"]


def test_a_peer_matrix_cut_after_three_rows_still_says_eight():
    lines = _lines("tf15_edge_matrix_two_islands_8gpu_1080ti.log")[2:7]  # title, header, rows 0-2
    view = parse_tf_log("\n".join(lines), "cut.log")
    assert view.gpu_count == 8 and view.gpu_count_at_least


def test_too_many_peers_naming_9_implies_at_least_ten():
    view = parse_tf_log((CORPUS / "cuda_too_many_peers_only_10gpu.log").read_text(), "log")
    assert (view.gpu_count, view.gpu_count_at_least) == (10, True)
    assert len(view.devices) < 10


def test_xla_device_lines_name_gpus_and_the_era():
    xla = [line for line in _lines("tf15_two_workers_one_log_6gpu_power9.log") if "StreamExecutor device (" in line]
    view = parse_tf_log("\n".join(xla[-3:]), "xla.log")  # the excerpt starts inside XLA's list
    assert view.era == ERA_TF15 and view.gpu_count_at_least
    assert view.gpu_count == max(d.ordinal for d in view.devices) + 1
    assert {d.name for d in view.devices} == {"Tesla V100-SXM2-16GB"}
    assert {d.compute_capability for d in view.devices} == {"7.0"}


def test_default_startup_is_the_one_that_says_most_about_peers():
    """A job that printed its peer matrix, was cut before creating its devices, and restarted with
    the edge matrix left out of the excerpt: the restart is complete, but says nothing about peers."""
    lines = _lines("tf15_edge_matrix_two_islands_8gpu_1080ti.log")
    first = lines[:11]  # visible list, matrix: cut before the Created lines
    restart = [lines[0]] + lines[11:]  # visible list and Created lines, no matrix
    view = parse_tf_log("\n".join(first + restart), "job.log")
    assert (view.startup, view.startups) == (1, 2)
    assert peer_state(view, 0, 1) is True and peer_state(view, 0, 4) is False
    (note,) = [n for n in view.reading_notes if n.code == "tf-log-startups"]
    assert (note.facts["chosen"], note.facts["how"]) == (1, "most-peers")  # says most about which GPUs can peer
    assert note.facts["others"] == [{"number": 2, "first_line": 12, "gpus": [0, 1, 2, 3, 4, 5, 6, 7], "gpu_count": 8,
                                     "peer_entries": 0, "complete": True}]  # nothing about peers
    assert parse_tf_log("\n".join(first + restart), "job.log", run=2).startup == 2  # --tf-run still picks


def test_two_mpi_ranks_writing_one_file_are_told_apart_by_their_prefix():
    """Both ranks print the same lines at the same time: only mpirun's [1,N] prefix tells them apart."""
    lines = _lines("tf15_edge_matrix_two_islands_8gpu_1080ti.log")
    merged = [f"[1,{rank}]<stderr>:{line}" for line in lines for rank in (0, 1)]
    view = parse_tf_log("\n".join(merged), "mpi.log")
    assert view.startups == 2 and len(view.devices) == 8 and view.gpu_count == 8
    assert peer_state(view, 0, 1) is True and peer_state(view, 0, 4) is False


def test_a_new_process_is_told_by_the_line_it_prints_before_looking_for_gpus():
    """Lines deleted from a real README: run 1 cut after finding GPU 0, run 2's excerpt starting at
    its 'Found device 1'. No GPU line repeats, so only the driver-library line tells the runs apart."""
    lines = _lines("tf12_readme_two_startups_4gpu.log")
    text = "\n".join(lines[:12] + lines[23:28] + lines[36:])
    view = parse_tf_log(text, "readme")
    assert view.startups == 2
    assert [d.ordinal for d in parse_tf_log(text, "readme", run=1).devices] == [0]
    assert view.gpu_count == 4 and sorted(d.ordinal for d in view.devices) == [0, 1, 2, 3]


# Issue 31: any ordinal a line names proves at least that many plus one GPUs, and the count never
# says fewer GPUs than the view lists. Each case is a real log cut to the lines named.


def _only(name: str, *needles: str) -> str:
    return "\n".join(line for line in _lines(name) if any(needle in line for needle in needles))


def test_a_created_line_for_gpu3_alone_implies_at_least_four():
    view = parse_tf_log(_only("tf25_created_device_4gpu_a100_pcie.log", "device:GPU:3"), "cut.log")
    assert (view.gpu_count, view.gpu_count_at_least) == (4, True)
    assert [d.ordinal for d in view.devices] == [3]


def test_a_cannot_peer_line_from_3_to_1_alone_implies_at_least_four():
    text = _only("tf0_cannot_enable_peer_only_4gpu.log", "ordinal 3 to device ordinal 1")
    assert text.count("\n") == 0  # one line
    view = parse_tf_log(text, "cut.log")
    assert (view.gpu_count, view.gpu_count_at_least) == (4, True)


def test_a_dma_header_or_an_edge_matrix_header_alone_says_how_many_at_least():
    dma = parse_tf_log(_only("tf0_gpu_init_dma_8x8_all_y_no_timestamps.log", "DMA:"), "cut.log")
    assert (dma.gpu_count, dma.gpu_count_at_least) == (8, True)  # its rows are not there
    edge = parse_tf_log("\n".join(_lines("tf15_edge_matrix_two_islands_8gpu_1080ti.log")[2:4]), "cut.log")
    assert "edge matrix" in _lines("tf15_edge_matrix_two_islands_8gpu_1080ti.log")[2]
    assert (edge.gpu_count, edge.gpu_count_at_least) == (8, True)


def test_tfs_own_gpu0_and_an_ignored_device_1_imply_at_least_two():
    """The second run of a README: '/gpu:0' created and CUDA device 1 ignored. TF's own numbers
    counted alone said 1 GPU while the view listed 2."""
    lines = _lines("tf0_readme_two_runs_dma_2gpu.log")
    text = "\n".join(line for line in lines[40:] if "Creating TensorFlow device" in line or "Ignoring" in line)
    view = parse_tf_log(text, "cut.log")
    assert [d.ordinal for d in view.devices] == [0, 1] and view.devices[1].ignored
    assert view.gpu_count == 2


def test_a_one_gpu_process_matrix_of_ordinal_7_has_one_gpu_not_eight():
    """PocketFlow#86 cut after its first 1x1 matrix (ordinal 7): a process TF gave one GPU
    (gpu_options.visible_device_list), as its 'GPU:0 ... device: 7' line says once it is there."""
    view = parse_tf_log("\n".join(_lines("pocketflow86_tf112_one_gpu_per_process_edge_matrix_device7_then_4_cut.log")[:3]),
                        "cut.log")
    assert (view.gpu_count, view.gpu_count_at_least) == (1, False)


def _cuts(lines: list[str]):
    yield from (lines[:k] for k in range(1, len(lines)))
    yield from (lines[k:] for k in range(1, len(lines)))
    yield from (lines[:k] + lines[k + 1 :] for k in range(len(lines)))


@pytest.mark.parametrize("path", sorted(CORPUS.glob("*.log")), ids=lambda p: p.name)
def test_every_cut_of_a_corpus_log_counts_at_least_what_it_names(path):
    """Every head, tail and one-line-less cut of every corpus log: the count covers every GPU the
    view lists, a lower bound every ordinal named (unless TF numbers the process's GPUs apart from
    CUDA's: ``GPU:0 ... device: 7``; a whole 1x1 matrix of ordinal 7 is one GPU, exactly), and it
    says "at least" where it is more than the GPUs the view lists."""
    for lines in _cuts(path.read_text().split("\n")):
        try:
            view = parse_tf_log("\n".join(lines), "cut.log")
        except InputError:
            continue  # no GPU line left
        remapped = any(d.tf_id is not None and d.tf_id != d.ordinal for d in view.devices)
        largest = max((d.ordinal for d in view.devices), default=-1)
        if not remapped:
            assert view.gpu_count >= len(view.devices), lines
        if not remapped and view.gpu_count_at_least:
            assert view.gpu_count >= largest + 1, lines
        if view.gpu_count > len(view.devices):
            assert view.gpu_count_at_least, lines
