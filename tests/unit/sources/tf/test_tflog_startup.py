"""Several TensorFlow start-ups in one log: split, the last complete one read by default, any by number."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES

from gputopo.errors import InputError
from gputopo.sources.tf.tflog import parse_tf_log, peer_state, read_tf_log

CORPUS = OWN_FIXTURES / "corpus" / "tf_logs"


def _log(name: str) -> str:
    return (CORPUS / name).read_text()


def test_two_machines_in_one_readme_are_not_merged():
    text = _log("tf15_readme_two_machines_2gpu_then_4gpu.log")
    last = parse_tf_log(text, "readme")
    assert (last.startup, last.startups) == (2, 2)
    assert [d.name for d in last.devices] == ["Tesla M40 24GB"] * 4 and peer_state(last, 0, 1) is True
    first = parse_tf_log(text, "readme", run=1)
    assert (first.startup, len(first.devices)) == (1, 2)
    assert {d.name for d in first.devices} == {"GeForce RTX 2080 Ti"} and peer_state(first, 0, 1) is False
    (note,) = [n for n in last.reading_notes if n.code == "tf-log-startups"]
    assert (note.facts["startups"], note.facts["chosen"], note.facts["how"]) == (2, 2, "last-complete")
    assert [other["number"] for other in note.facts["others"]] == [1]  # the one --tf-run N picks instead
    assert [(n.facts["chosen"], n.facts["how"]) for n in first.reading_notes if n.code == "tf-log-startups"] == [(1, "asked")]


def test_readme_first_run_with_one_gpu_then_four():
    text = _log("tf12_readme_two_startups_4gpu.log")
    assert len(parse_tf_log(text, "r").devices) == 4
    assert [d.ordinal for d in parse_tf_log(text, "r", run=1).devices] == [0]


def test_interleaved_ranks_use_the_last_complete_one():
    view = parse_tf_log(_log("tf15_horovod_ranks_interleaved_cut_2gpu.log"), "horovod")
    assert (view.startup, view.startups) == (2, 3)
    assert [(d.ordinal, d.pci_bus_id) for d in view.devices] == [(0, "0000:1b:00.0")]
    note = [n for n in view.reading_notes if n.code == "tf-log-startups"][0].facts
    assert (note["chosen"], note["how"], note["startups"]) == (2, "last-complete", 3)  # the one after it is incomplete
    assert [(other["number"], other["complete"]) for other in note["others"]] == [(1, True), (3, False)]


def test_eight_mpi_ranks_each_creating_gpu0():
    text = _log("tf25_eight_ranks_one_gpu_each_a100.log")
    view = parse_tf_log(text, "ranks")
    assert view.startups == 8 and [(d.ordinal, d.tf_id) for d in view.devices] == [(3, 0)]
    assert [parse_tf_log(text, "ranks", run=n).devices[0].ordinal for n in range(1, 9)] == [0, 0, 1, 1, 2, 2, 3, 3]


def test_restarted_job_whose_last_run_is_cut_reads_the_complete_one():
    text = _log("tf15_edge_matrix_two_islands_8gpu_1080ti.log")
    cut_restart = text + "\n".join(text.splitlines()[:8])  # restarted, cut in its matrix
    view = parse_tf_log(cut_restart, "job.log")
    assert (view.startup, view.startups) == (1, 2) and len(view.devices) == 8 and not view.reading_notes[1:]


@pytest.mark.parametrize("run", [0, 3, -1, 99])
def test_run_out_of_range_is_one_line(run):
    with pytest.raises(InputError) as info:
        parse_tf_log(_log("tf0_readme_two_runs_dma_2gpu.log"), "readme.log", run=run)
    assert str(info.value) == f"--tf-run {run}: readme.log holds 2 TensorFlow start-ups (1-2)"


def test_read_tf_log_takes_the_run():
    view = read_tf_log(str(CORPUS / "tf15_two_workers_one_log_6gpu_power9.log"), run=1)
    assert view.startup == 1 and len(view.devices) == 6
    with pytest.raises(InputError, match="holds one TensorFlow start-up"):
        read_tf_log(str(CORPUS / "tf0_cannot_enable_peer_only_4gpu.log"), run=2)


def test_a_single_startup_has_no_startup_note():
    view = parse_tf_log(_log("tf25_created_device_4gpu_a100_pcie.log"), "log")
    assert (view.startup, view.startups) == (1, 1) and view.reading_notes == []


EMPTY = "tf2x_two_processes_empty_edge_matrices_xla_8gpu_v100_sxm2_cut.log"  # two processes, each an edge matrix over no GPU


def test_an_edge_matrix_over_no_gpu_is_tensorflow_using_none_and_xla_devices_are_not_its_gpus():
    view = parse_tf_log(_log(EMPTY), EMPTY)
    assert (view.startups, view.startup, view.devices, view.visible_ordinals, view.gpu_count) == (2, 2, [], [], 0)
    (note,) = [n for n in view.reading_notes if n.code == "tf-no-visible-gpu"]
    assert note.facts == {"xla": [0, 1]}
    first = parse_tf_log(_log(EMPTY), EMPTY, run=1)
    assert first.devices == [] and [n.facts for n in first.reading_notes if n.code == "tf-no-visible-gpu"] == [{"xla": [6, 7]}]


def test_a_device_another_line_names_stays_beside_an_empty_matrix():
    """Only XLA's platform devices leave: a Created line is TF's own GPU whatever the matrix header says."""
    text = ("I gpu_device.cc:1180] Device interconnect StreamExecutor with strength 1 edge matrix:\n"
            "I gpu_device.cc:1186]      \n"
            "I service.cc:176]   StreamExecutor device (0): Tesla T4, Compute Capability 7.5\n"
            "I service.cc:176]   StreamExecutor device (1): Tesla T4, Compute Capability 7.5\n"
            "I gpu_device.cc:1325] Created TensorFlow device (/job:localhost/replica:0/task:0/device:GPU:0 with 14 MB "
            "memory) -> physical GPU (device: 1, name: Tesla T4, pci bus id: 0000:00:05.0, compute capability: 7.5)\n")
    view = parse_tf_log(text, "x")
    assert [d.ordinal for d in view.devices] == [1]
    assert [n.facts for n in view.reading_notes if n.code == "tf-no-visible-gpu"] == [{"xla": [0]}]


def test_an_empty_line_after_a_matrix_title_from_another_file_is_no_header():
    text = ("I gpu_device.cc:1180] Device interconnect StreamExecutor with strength 1 edge matrix:\n"
            "I other.cc:12]      \n"
            "I gpu_device.cc:1186]      0 1\nI gpu_device.cc:1199] 0:   N Y\nI gpu_device.cc:1199] 1:   Y N\n")
    view = parse_tf_log(text, "x")
    assert view.visible_ordinals is None and peer_state(view, 0, 1) is True
