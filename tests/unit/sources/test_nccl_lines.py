"""What an NCCL_DEBUG=INFO line says, shared by the NCCL and TF log readers: the thread's host and CUDA
device from the prefix (under every decoration a paste gives it), the ranks a ring lists."""

from __future__ import annotations

import pytest

from gputopo.sources.nccl_lines import INIT_RE, host_of, ring_ranks, ring_text, thread_device


@pytest.mark.parametrize(
    ("prefix", "host", "device"),
    [
        ("4e409fc75fa0:30:536 [3] ", "4e409fc75fa0", 3),
        ("2024-01-02 10:11:12 volta:1533219:1535130 [1] ", "volta", 1),  # a timestamp before it
        ("node-7: h-1.x:12:34 [0] ", "h-1.x", 0),  # a host label a paste adds
        ("[1,0]<stderr>:h:12:34 [2] ", "h", 2),  # mpirun's rank tag run into the word
        ("<cluster_name>:921:1146 [2] ", "<cluster_name>", 2),  # a redacted host
        ("h:1:2 [5] transport/p2p.cc:238 ", "h", None),  # a WARN line: the source after the device
        ("[0] ", None, None),  # no thread: nothing
        ("h:1 [0] ", None, None),
        ("h:1:2x [0] ", None, None),
        ("", None, None),
    ],
)
def test_the_prefix_names_the_thread_and_its_cuda_device(prefix, host, device):
    assert host_of(prefix)[0] == host
    assert thread_device(prefix) == device


def test_a_thread_is_host_pid_tid_whatever_ran_into_it():
    assert host_of("[1,3]<stdout>:dbe753952c3d:1013:1261 [0] ") == ("dbe753952c3d", "dbe753952c3d:1013:1261")


@pytest.mark.parametrize(
    ("message", "ranks"),
    [
        ("Channel 00/08 :    0   1   2   3", [0, 1, 2, 3]),
        ("Channel 01/08 :    0   3   2   1  ", [0, 3, 2, 1]),
        ("Channel 00/02 :\t0\t1", [0, 1]),  # tabs for spaces
        ("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC", None),  # a connection, not a ring
        ("Channel 00/08 :", None),
        ("Channel 00/08 :    0   1   99999", None),  # a rank no job has: a misread
    ],
)
def test_a_ring_lists_the_ranks_of_its_communicator(message, ranks):
    assert ring_ranks(message) == ranks


def test_a_ring_is_kept_as_nccl_prints_it_without_its_padding():
    assert ring_text("  Channel 00/08 :    0   1   2   3  ") == "Channel 00/08 : 0 1 2 3"
    assert ring_text("Trees [0] 1/-1/-1->2->3") is None


def test_an_init_line_names_rank_nranks_device_and_bus_id():
    line = "ncclCommInitRank comm 0x7d10f405e900 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId c000 commId 0x5d - Init COMPLETE"
    assert INIT_RE.search(line).groups() == ("1", "4", "1", "1", "c000")


def test_a_long_word_of_host_characters_and_colons_is_split_once_from_the_right():
    """(Linear: ``benchmarks/hostile_inputs.py`` prints the seconds per MiB.)"""
    assert host_of("a" * 4000 + ":" * 50 + "b:1:2 [0] ") == ("b", "b:1:2")
    assert host_of("a:" * 2000 + " [0] ") == (None, None)


def test_a_tree_or_connection_line_costs_one_pass_not_one_per_character():
    """``Trees 111...`` (``\\d+`` and ``[-\\d/]*`` sharing the digits) and ``via X<spaces>x`` (``(.+?)\\s*$``
    running over the spaces at each character) were quadratic: 28 ms and 40 ms a 4 KB line, 10 s a MB of them."""
    import time

    from gputopo.sources.nccl_lines import CONN_RE, TREE_RANK_RE

    started = time.perf_counter()
    assert TREE_RANK_RE.match("Trees " + "1" * 50_000) is None
    assert CONN_RE.search("Channel 00 : 0[0] -> 1[1] via P2P" + " " * 50_000 + "x").group(6).endswith("x")
    assert time.perf_counter() - started < 1
    assert TREE_RANK_RE.match("Trees [0] -1/-1/-1->3->2").group(1) == "3"
    assert TREE_RANK_RE.match("Tree 12 : -1->0->1").group(1) == "0"
    assert CONN_RE.search("Channel 00/0 : 0[0] -> 1[1] via P2P/IPC  ").group(6) == "P2P/IPC"
