"""``tools/nccl_log.py``: an NCCL log names at least the GPUs its ranks prove. A ring lists every rank of its
communicator (each rank a GPU); ``nranks`` beyond the ranks named is said as a lower bound. On the real
excerpts of MirroredStrategy's NCCL lines (the TF corpus), under every dressing of a paste, cut and mangled."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES

from gputopo.errors import NothingToRead
from gputopo.sources.registry import read_text
from gputopo.sources.tools import nccl_log
from unit.sources.readers_corpus import DRESSINGS, reading

TF_LOGS = OWN_FIXTURES / "corpus" / "tf_logs"
CHANNELS = "tf212_mirrored_nccl_channels_4gpu_docker_socket_cut.log"  # threads [0]-[3], Trees, rings: no Init line
INIT = "tf219_mirrored_nccl_init_complete_4gpu_a16_cut.log"  # Init COMPLETE of ranks 1-3, nranks 4
TF24 = "tf24_mirrored_nccl_gpus_4_to_7_as_0_to_3_docker_cut.log"  # NCCL 2.7.6: rings of 4, threadThresholds lines


def _text(name: str) -> str:
    return (TF_LOGS / name).read_text()


@pytest.mark.parametrize("name", [CHANNELS, TF24])
def test_the_ranks_a_ring_lists_are_the_gpus_of_the_log(name):
    topo = nccl_log.read(_text(name), name)
    assert [g.index for g in topo.gpus] == [0, 1, 2, 3] and topo.label.startswith("4 GPUs in")
    assert len(topo.links) == 6 and all(k.p2p_read is None for k in topo.links)  # nothing said of peer access
    assert [r.rank for r in topo.nccl.ranks] == [0, 1, 2, 3]


def test_the_rings_are_kept_as_nccl_prints_them():
    topo = nccl_log.read(_text(CHANNELS), CHANNELS)
    assert topo.nccl.rings[:2] == ["Channel 00/08 : 0 1 2 3", "Channel 01/08 : 0 3 2 1"]


def test_nranks_beyond_the_ranks_named_is_a_lower_bound_in_the_label():
    topo = nccl_log.read(_text(INIT), INIT)
    assert [(g.index, g.pci_bus_id) for g in topo.gpus] == [(1, "0000:0c:00.0"), (2, "0000:0e:00.0"), (3, "0000:10:00.0")]
    assert topo.label.startswith("at least 4 GPUs (3 named) in an NCCL_DEBUG=INFO log")
    several = ("a:1:2 [0] NCCL INFO comm 0x1 rank 0 nRanks 16 nNodes 2 localRanks 8\n"
               "a:1:2 [0] NCCL INFO Channel 00/0 : 0[1000] -> 1[2000] via P2P/IPC\n")
    assert nccl_log.read(several, "s").label.startswith("2 of 16 ranks on 2 hosts (1 named)")


def test_a_ring_alone_names_its_ranks_and_a_comm_line_its_threads_rank():
    topo = nccl_log.read("h:1:2 [0] NCCL INFO Channel 00/02 :    0   1   2\n", "ring")
    assert [g.index for g in topo.gpus] == [0, 1, 2]
    comm = nccl_log.read("h:1:2 [3] NCCL INFO comm 0x1 rank 0 nranks 2\n", "n")  # printed by the rank's own thread
    assert [(r.rank, r.cuda_device) for r in comm.nccl.ranks] == [(0, 3)] and comm.label.startswith("at least 2 GPUs (1 named)")


def test_lines_that_name_no_rank_are_still_nothing_to_read():
    with pytest.raises(NothingToRead):
        nccl_log.read("h:1:2 [0] NCCL INFO NET/IB : No device found.\nh:1:2 [0] NCCL INFO Using network Socket\n", "x")


@pytest.mark.parametrize("dressing", sorted(DRESSINGS))
@pytest.mark.parametrize("name", [CHANNELS, INIT, TF24])
def test_every_dressing_of_the_excerpts_reads_the_same(name, dressing):
    text = _text(name)
    dressed = nccl_log.read(DRESSINGS[dressing](text), name)
    assert reading(dressed) == reading(nccl_log.read(text, name)) and dressed.label == nccl_log.read(text, name).label


def test_an_mpirun_rank_tag_before_the_prefix_keeps_each_threads_host_and_device():
    tagged = "\n".join("[1,0]<stderr>:" + line for line in _text(CHANNELS).splitlines())
    assert reading(nccl_log.read(tagged, "t")) == reading(nccl_log.read(_text(CHANNELS), "t"))


def test_scan_reads_the_excerpts_through_the_registry():
    for name in (CHANNELS, INIT, TF24):
        topo = read_text(_text(name), name)
        assert topo.source == "nccl-log" and len(topo.gpus) in (3, 4)
