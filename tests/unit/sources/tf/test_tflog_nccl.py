"""A TensorFlow log of NCCL's lines alone (MirroredStrategy's all-reduce at NCCL_DEBUG=INFO) read as TF's
process and its GPUs: the real excerpts of the corpus, under every dressing a paste gives them, cut and
mangled; several processes; what is still refused."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES

from gputopo.analysis.causes.tf_crosscheck import tf_findings
from gputopo.errors import InputError
from gputopo.sources.tf.tflog import parse_tf_log, topology_from_tf_view
from gputopo.sources.tf.tflog_nccl import nccl_view
from unit.sources.readers_corpus import DRESSINGS

CORPUS = OWN_FIXTURES / "corpus" / "tf_logs"
CHANNELS = "tf212_mirrored_nccl_channels_4gpu_docker_socket_cut.log"  # [0]-[3] threads, rings, no Init line
INIT = "tf219_mirrored_nccl_init_complete_4gpu_a16_cut.log"  # Init COMPLETE of ranks 1-3 (rank 0's cut), nranks 4
TF24 = "tf24_mirrored_nccl_gpus_4_to_7_as_0_to_3_docker_cut.log"  # TF warnings, NCCL 2.7.6, rings of 4
EXCERPTS = [CHANNELS, INIT, TF24]


def _text(name: str) -> str:
    return (CORPUS / name).read_text()


def _seen(view):
    return (view.gpu_count, view.gpu_count_at_least, view.era, view.startups,
            [(d.ordinal, d.pci_bus_id) for d in view.devices], view.peer)


def test_the_threads_cuda_devices_and_the_rings_make_four_gpus():
    view = parse_tf_log(_text(CHANNELS), CHANNELS)
    assert (view.gpu_count, view.gpu_count_at_least, view.era) == (4, True, None)
    assert [d.ordinal for d in view.devices] == [0, 1, 2, 3]
    assert all(view.peer[a][b] is None for a in range(4) for b in range(4) if a != b)  # NCCL's lines say nothing of peers
    (note,) = [n for n in view.reading_notes if n.code == "tf-log-nccl-only"]
    assert note.facts == {"source": CHANNELS, "count": 4, "devices": [0, 1, 2, 3], "nranks": None, "ring": 4}


def test_init_lines_give_each_rank_its_cuda_device_and_bus_id_and_nranks_the_count():
    view = parse_tf_log(_text(INIT), INIT)
    assert (view.gpu_count, view.gpu_count_at_least) == (4, True)
    assert [(d.ordinal, d.pci_bus_id) for d in view.devices] == [(1, "0000:0c:00.0"), (2, "0000:0e:00.0"), (3, "0000:10:00.0")]
    assert [n.code for n in view.reading_notes] == ["tf-log-nccl-only", "tf-gpus-implied"]
    assert view.reading_notes[1].facts == {"count": 4, "named": [1, 2, 3]}


def test_the_findings_say_where_the_gpus_come_from_and_nothing_the_lines_do_not_show():
    topology = topology_from_tf_view(parse_tf_log(_text(INIT), INIT))
    findings = {f.code: f for f in tf_findings(topology)}
    said = findings["tf-log-nccl-only"]
    assert said.severity == "info" and "at least 4 GPUs" in said.message and "CUDA devices 1, 2, 3; nranks 4" in said.message
    assert "--from" in said.fix
    assert not {"tf-peer-groups", "tf-too-many-peers", "tf-log-startups"} & set(findings)
    assert [g.index for g in topology.gpus] == [1, 2, 3]


@pytest.mark.parametrize("dressing", sorted(DRESSINGS))
@pytest.mark.parametrize("name", EXCERPTS)
def test_every_dressing_of_a_paste_reads_the_same(name, dressing):
    text = _text(name)
    assert _seen(parse_tf_log(DRESSINGS[dressing](text), name)) == _seen(parse_tf_log(text, name))


def test_threads_without_a_host_prefix_still_count_by_their_rings():
    """A paste that lost ``host:pid:tid``: no thread names its CUDA device; the ring still lists 4 ranks."""
    text = "\n".join(line.split(" ", 1)[1] for line in _text(CHANNELS).splitlines())
    view = parse_tf_log(text, "bare")
    assert (view.gpu_count, view.devices) == (4, [])
    implied = {f.code: f for f in tf_findings(topology_from_tf_view(view))}["tf-gpus-implied"]
    assert "it names none by number" in implied.message


def test_lines_cut_before_their_rings_count_the_threads_only():
    lines = [line for line in _text(CHANNELS).splitlines() if "Channel" not in line and "[3]" not in line]
    view = parse_tf_log("\n".join(lines), "cut")
    assert view.gpu_count == 3 and [d.ordinal for d in view.devices] == [0, 1, 2]  # Trees of ranks 1, 2 name no more


def test_several_processes_are_several_startups_and_the_one_naming_most_gpus_is_read():
    text = ("h:100:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1\nh:100:2 [1] NCCL INFO Trees [0] -1/-1/-1->1->0\n"
            "h:200:1 [0] NCCL INFO Trees [0] -1/-1/-1->2->-1\nh:100:1 [0] NCCL INFO Channel 00/02 :    0   1   2\n")
    view = parse_tf_log(text, "two")
    assert (view.startups, view.startup, view.gpu_count) == (2, 1, 2)  # nranks of the job is not one process's
    note = view.reading_notes[0]
    assert (note.code, note.facts["how"], note.facts["others"][0]["gpus"]) == ("tf-log-startups", "most-gpus", [0])
    message = {f.code: f for f in tf_findings(topology_from_tf_view(view))}["tf-log-startups"].message
    assert "using #1, the one that names most GPUs" in message
    second = parse_tf_log(text, "two", run=2)
    assert (second.startup, second.gpu_count, second.reading_notes[0].facts["how"]) == (2, 1, "asked")
    with pytest.raises(InputError, match="holds NCCL lines of 2 processes"):
        parse_tf_log(text, "two", run=3)


def test_a_log_with_tensorflow_device_lines_is_read_by_them_not_by_its_nccl_lines():
    created = ("I0000 00:00:1712345678.1  123 gpu_device.cc:2019] Created device /job:localhost/replica:0/task:0/"
               "device:GPU:0 with 14000 MB memory:  -> device: 0, name: Tesla T4, pci bus id: 0000:00:04.0, compute capability: 7.5\n")
    view = parse_tf_log(created + _text(CHANNELS), "both")
    assert view.gpu_count == 1 and not any(n.code == "tf-log-nccl-only" for n in view.reading_notes)


@pytest.mark.parametrize(
    "text",
    [
        "NCCL INFO NET/Socket : Using [0]eth0:172.17.0.2<0>\nNCCL INFO Using network Socket\n",  # no thread, no rank
        "h:1:2 [0] NCCL WARN Cuda failure 'out of memory'\n",  # a WARN line: NCCL's trouble, not its ranks
        "h:1:2 [0] enqueue.cc:12 NCCL WARN Cuda failure 'out of memory'\nNCCL version 2.7.6+cuda11.0\n",
    ],
)
def test_nccl_lines_that_name_no_gpu_and_no_rank_are_still_refused(text):
    assert nccl_view(text, "x") is None
    with pytest.raises(InputError, match="name no GPU and no rank"):
        parse_tf_log(text, "x")


def test_damaged_numbers_and_many_processes_are_bounded():
    misread = "h:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 999999999 cudaDev 0 busId 1000 - Init START\n"
    assert parse_tf_log(misread, "m").gpu_count == 1  # a count past any machine is a misread, as an ordinal is
    many = "".join(f"h:{pid}:1 [{pid % 8}] NCCL INFO Using network Socket\n" for pid in range(1000))
    assert parse_tf_log(many, "many").startups == 256
    assert parse_tf_log("h:1:2 [900] NCCL INFO Using network Socket\nh:1:3 [1] NCCL INFO x\n", "big").gpu_count == 2
