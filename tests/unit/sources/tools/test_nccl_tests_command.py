"""``tools/nccl_tests.py``: an nccl-tests output without its ``# Using devices`` list still names the GPUs its
command line gives one process (``-g``, ``-t``): NVIDIA/nccl#1435 and its mangled variants."""

from __future__ import annotations

import pytest

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.sources.tools import nccl_tests
from unit.sources.readers_corpus import DRESSINGS, reading, text_of

NAME = "nccl1435_2gpu_visible_0_1_all_gather_bf16_cut.txt"  # `all_gather_perf ... -g 2`, no device list
TABLE = """#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
    16777216       4194304  bfloat16    none      -1    108.8  154.20   77.10      0    98.19  170.86   85.43      0
"""


def test_the_gpus_of_a_command_line_without_a_device_list():
    topo = nccl_tests.read(text_of("nccl_tests", NAME), NAME)
    assert [(g.index, g.pci_bus_id, g.name) for g in topo.gpus] == [(0, None, None), (1, None, None)]
    (run,) = topo.collectives
    assert (run.operation, run.gpus, run.nranks) == ("all_gather", [], None)  # which of them the run had: not in the text
    assert topo.label == "nccl-tests on 2 GPUs (-g 2 on its command line)"
    (note,) = topo.reading_notes
    assert (note.code, note.facts) == ("nccl-tests-gpus-from-command", {"source": NAME, "gpu_count": 2, "options": "-g 2"})
    (finding,) = note_findings([note])
    assert finding.message.startswith(f"{NAME}: no `# Using devices` list") and "CUDA devices 0 and 1" in finding.message


@pytest.mark.parametrize("dressing", sorted(DRESSINGS))
def test_every_dressing_reads_the_same_gpus(dressing):
    text = text_of("nccl_tests", NAME)
    dressed = nccl_tests.read(DRESSINGS[dressing](text), NAME)
    assert reading(dressed) == reading(nccl_tests.read(text, NAME)) and dressed.label == nccl_tests.read(text, NAME).label


@pytest.mark.parametrize(
    ("command", "gpus", "options"),
    [
        ("./build/all_reduce_perf -b 8 -e 128M -f 2 -t 2 -g 2", 4, "-t 2 -g 2"),  # threads x GPUs per thread
        ("all_reduce_perf --ngpus=3 -b 8", 3, "--ngpus 3"),
        ("$ NCCL_DEBUG=WARN ./all_reduce_perf -g 1", 1, "-g 1"),
        ("# ./build/all_reduce_perf -b 8 -g 8", 8, "-g 8"),  # root's prompt
    ],
)
def test_the_options_give_threads_times_gpus(command, gpus, options):
    topo = nccl_tests.read(command + "\n" + TABLE, "x")
    assert [g.index for g in topo.gpus] == list(range(gpus)) and topo.reading_notes[0].facts["options"] == options


@pytest.mark.parametrize(
    "command",
    [
        "mpirun -np 4 ./build/all_reduce_perf -b 8 -g 1",  # how many processes, on which hosts: not the command's to say
        "srun -N 2 all_reduce_perf -g 8",
        "./build/all_reduce_perf -b 8 -e 128M",  # no -g: nothing said
        "./build/all_reduce_perf -g 99999",  # past any machine: a misread
    ],
)
def test_a_launcher_or_no_option_names_no_gpu(command):
    topo = nccl_tests.read(command + "\n" + TABLE, "x")
    assert topo.gpus == [] and topo.reading_notes == [] and topo.label == "nccl-tests on unnamed ranks"


def test_of_several_runs_the_gpus_are_those_of_the_run_that_drove_most():
    text = text_of("nccl_tests", "dgx_a100_2gpu_nv_vs_p2p_disable_sys_tables_no_devices.txt")  # -g 2, then -g 4
    topo = nccl_tests.read(text, "dgx")
    assert [g.index for g in topo.gpus] == [0, 1, 2, 3] and topo.label == "nccl-tests on 4 GPUs (-g 4 on its command line)"
    assert [run.gpus for run in topo.collectives] == [[], []]


def test_a_device_list_wins_over_the_command_line():
    devices = "#  Rank  0 Group  0 Pid   1 on host device  3 [0x1b] NVIDIA A100\n"
    topo = nccl_tests.read("./build/all_gather_perf -g 2\n" + devices + TABLE, "x")
    assert [g.index for g in topo.gpus] == [3] and topo.reading_notes == []
