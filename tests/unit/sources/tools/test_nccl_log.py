"""NCCL_DEBUG=INFO logs on real (cut) captures: transports per connection, bus ids, settings, P2P
NCCL was refused, GDR, prefixes of log collectors, several hosts."""

import pytest

from gputopo.analysis.causes.observed_findings import observed_findings
from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import InputError
from gputopo.sources.tools import nccl_log
from unit.sources.readers_corpus import DRESSINGS, cases, dressed_cases, pair, reading, text_of


def _transports(topo):
    return {f"{t.src_rank}->{t.dst_rank}": t.transport for t in topo.nccl.transports}


@pytest.mark.parametrize(("name", "want"), cases("nccl_log"))
def test_real_logs_read_as_the_expert_reads_them(name, want):
    text = text_of("nccl_log", name)
    assert nccl_log.sniff(text)
    topo = nccl_log.read(text, name)
    got = _transports(topo)
    for key, word in want.get("transports", {}).items():
        assert got[key] == word
    if want.get("transports") == {}:
        assert got == {}
    if "bus_ids" in want:
        assert sorted(g.pci_bus_id for g in topo.gpus) == want["bus_ids"]
    for rank, facts in want.get("ranks", {}).items():
        entry = next(r for r in topo.nccl.ranks if r.rank == int(rank))
        assert (entry.cuda_device, entry.pci_bus_id) == (facts["cuda_device"], facts["bus_id"])
    for key in ("nranks", "version", "gdr"):
        if key in want:
            assert getattr(topo.nccl, key) == want[key]
    assert topo.nccl.settings == want.get("settings", {})
    assert topo.nccl.p2p_disabled_pairs == want.get("p2p_disabled_pairs", [])
    if "hosts" in want:
        assert {g.host for g in topo.gpus} - {None} == set(want["hosts"])
    if "rings" in want:
        assert len(topo.nccl.rings) == want["rings"]
    if "gpu_indices" in want:
        assert [g.index for g in topo.gpus] == want["gpu_indices"]
    if "one_host" in want:  # one host's GPUs have every pair linked; ranks of several hosts have none
        assert bool(topo.links) is want["one_host"]
    if "label" in want:
        assert want["label"] in topo.label
    for rank, host in want.get("rank_hosts", {}).items():
        assert next(r for r in topo.nccl.ranks if r.rank == int(rank)).host == host
    for rank, bus in want.get("rank_bus_ids", {}).items():
        assert next(r for r in topo.nccl.ranks if r.rank == int(rank)).pci_bus_id == bus
    for key, word in want.get("p2p", {}).items():
        assert topo.link(*pair(key, "-")).p2p_read == word
    if "reading_notes" in want:
        assert sorted(n.code for n in topo.reading_notes) == want["reading_notes"]


def test_pairs_nccl_moved_data_over_p2p_can_peer_and_refused_pairs_cannot():
    topo = nccl_log.read(text_of("nccl_log", "nccl1773_8gpu_p2p_direct_pointer_single_process_cut.log"), "x")
    assert topo.link(0, 6).can_peer is True and topo.link(0, 5).can_peer is None
    refused = nccl_log.read(text_of("nccl_log", "nccl833_4gpu_could_not_enable_p2p_cut.log"), "y")
    assert refused.link(0, 2).can_peer is False and refused.link(0, 1).can_peer is None


def test_two_processes_are_numbered_by_bus_id_and_say_so():
    topo = nccl_log.read(text_of("nccl_log", "nccl1190_2x2080ti_direct_shared_memory_cut.log"), "z")
    assert [g.pci_bus_id for g in topo.gpus] == ["0000:3d:00.0", "0000:89:00.0"]
    transport = topo.nccl.transports[0]
    assert (transport.a, transport.b, transport.channels) == (1, 0, [0, 1])
    assert [(n.code, n.facts) for n in topo.reading_notes] == [("nccl-gpus-by-bus-id", {"source": "z"})]


def test_lines_of_other_programs_and_damaged_lines_are_skipped():
    text = ("Traceback (most recent call last):\n  File x\nhost:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/IPC\n"
            "NCCL INFO Channel 99999999999 : x -> y via\n" + "NCCL INFO " + "A" * 5000 + "\n")
    topo = nccl_log.read(text, "mixed")
    assert [(t.src_rank, t.dst_rank, t.transport) for t in topo.nccl.transports] == [(0, 1, "P2P")]


def test_a_four_digit_tag_is_a_bus_id_on_bus_01_not_device_1000():
    """NCCL 2.5-2.18.1 print busId in hex without leading zeros: 0000:01:00.0 is ``1000`` (the first
    GPU of many workstations, as the 8x RTX 4090 of the nccl-tests corpus)."""
    topo = nccl_log.read("h:1:1 [0] NCCL INFO Channel 00 : 0[1000] -> 1[2000] via SHM/direct/direct\n", "bus01")
    assert [g.pci_bus_id for g in topo.gpus] == ["0000:01:00.0", "0000:02:00.0"]
    assert [r.cuda_device for r in topo.nccl.ranks] == [0, None]  # the thread's [0] only, no device 1000


def test_nccl_lines_naming_nothing_are_one_input_error():
    with pytest.raises(InputError, match="none that names"):
        nccl_log.read("x NCCL INFO Bootstrap : Using eth0\n", "b")


def test_a_log_tail_naming_some_ranks_of_a_job_is_not_renumbered_from_gpu_0():
    """nccl#1817: Destroy lines of ranks 4-7 of 8 (bus 91, 92, c4, c5) were called GPUs 0-3 by bus
    order; the nccl-tests device list before a log (ranks 0-3, bus 12-48) names the others."""
    tail = "".join(f"h:1:1 [7] NCCL INFO comm 0x5{r} rank {r} nranks 8 cudaDev {r} busId {b} - Destroy COMPLETE\n"
                   for r, b in ((4, "91000"), (5, "92000"), (6, "c4000"), (7, "c5000")))
    topo = nccl_log.read(tail, "tail")
    assert [(g.index, g.pci_bus_id) for g in topo.gpus][0] == (4, "0000:91:00.0")
    devices = "".join(f"#  Rank  {r} Group  0 Pid 3 on h device  {r} [0000:{b}:00] NVIDIA L20\n"
                      for r, b in ((0, "12"), (1, "13"), (2, "47"), (3, "48")))
    topo = nccl_log.read("# Using devices\n" + devices + tail, "both")
    assert [g.pci_bus_id[5:7] for g in topo.gpus] == ["12", "13", "47", "48", "91", "92", "c4", "c5"]
    assert [r.cuda_device for r in topo.nccl.ranks] == list(range(8))
    assert [g.name for g in topo.gpus] == ["NVIDIA L20"] * 4 + [None] * 4


def test_nvml_dev_numbers_the_gpus_as_nvidia_smi_does_and_places_refused_pairs():
    """A job on nvidia-smi's GPUs 1 and 2 of a 4-GPU box: NCCL names each rank's nvmlDev, and its
    "P2P is disabled between connected GPUs 1 and 2" numbers GPUs by NVML index too (NCCL's
    ncclTopoCheckP2p prints gpu.dev). Merged with that box's topo -m, the refusal lands on 1-2."""
    from gputopo.model import Gpu, Topology, make_link
    from gputopo.sources.merge import merge_views
    from gputopo.sources.tools.nccl_log import read

    log = (
        "box:11:11 [0] NCCL INFO ncclCommInitRank comm 0x55aa rank 0 nranks 2 cudaDev 0 nvmlDev 1 busId 41000 commId 0x1 - Init START\n"
        "box:12:12 [1] NCCL INFO ncclCommInitRank comm 0x55bb rank 1 nranks 2 cudaDev 1 nvmlDev 2 busId 81000 commId 0x1 - Init START\n"
        "box:11:11 [0] NCCL INFO P2P is disabled between connected GPUs 1 and 2. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.\n"
    )
    nccl = read(log, "nccl.log")
    assert [g.index for g in nccl.gpus] == [1, 2] and nccl.gpu_numbering == "nvml"
    assert nccl.link(1, 2).p2p_read == "NS"
    words = {(0, 1): "NODE", (0, 2): "SYS", (0, 3): "SYS", (1, 2): "SYS", (1, 3): "SYS", (2, 3): "NODE"}
    topo = Topology(gpus=[Gpu(index=k) for k in range(4)], links=[make_link(a, b, w) for (a, b), w in words.items()],
                    source="nvidia-smi", source_detail="topo.txt")
    merged = merge_views([topo, nccl])
    assert merged.link(1, 2).p2p_read == "NS" and merged.link(0, 1).p2p_read is None
    assert merged.gpu(1).pci_bus_id == "0000:41:00.0" and merged.disagreements == []


def test_a_p2p_connection_cuda_refused_is_not_called_peer_access_that_works():
    """ray_lightning#24: 0 -> 1 via P2P/IPC, then that thread's 'failed to open CUDA IPC handle : 217
    peer access is not supported': the pair cannot peer (NS), whatever the 'via P2P' line said."""
    topo = nccl_log.read(text_of("nccl_log", "raylightning24_2gpu_ray_pid_prefix_p2p_ipc_open_failed_217_cut.log"), "r")
    assert topo.link(0, 1).p2p_read == "NS" and topo.link(0, 1).can_peer is False
    # Horovod (NCCL 2.3): each process's WARN is matched to its own thread's Ring line, wherever it is.
    old = nccl_log.read(text_of("nccl_log", "horovod785_nccl23_two_processes_ring_p2p_ipc_open_failed.log"), "h")
    assert old.link(0, 1).p2p_read == "NS" and old.nccl.nranks == 2


def test_an_ipc_failure_of_a_thread_with_several_p2p_pairs_calls_none_of_them_ns():
    """nccl#1773's first line as P2P/IPC plus a second ring of that thread to another GPU (7 -> 0 and
    7 -> 6), then its WARN 217: the WARN names no peer, so which pair CUDA refused is not known."""
    first = text_of("nccl_log", "nccl1773_8gpu_p2p_direct_pointer_single_process_cut.log").splitlines()[0]
    text = (first.replace("P2P/direct pointer", "P2P/IPC") + "\n"
            "CDS-10-4-3-1:77122:77215 [7] NCCL INFO Channel 01/0 : 7[7] -> 6[6] via P2P/IPC\n"
            "CDS-10-4-3-1:77122:77215 [7] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 217 peer "
            "access is not supported between these two devices\n")
    topo = nccl_log.read(text, "x")
    assert topo.link(0, 7).p2p_read is None and topo.link(6, 7).p2p_read is None
    (failed,) = [f for f in observed_findings(topo) if f.code == "nccl-p2p-ipc-failed"]
    assert "and CUDA refused one of them" in failed.message and failed.gpus == [0, 6, 7]


def test_an_ipc_failure_for_another_reason_leaves_the_pair_unknown_and_other_threads_alone():
    text = ("h:1:2 [0] NCCL INFO Channel 00 : 0[1000] -> 1[2000] via P2P/IPC\n"
            "h:3:4 [1] NCCL INFO Channel 00 : 1[2000] -> 2[3000] via P2P/IPC\n"
            "h:1:2 [0] transport/p2p.cc:238 NCCL WARN failed to open CUDA IPC handle : 1 invalid argument\n")
    topo = nccl_log.read(text, "x")
    assert topo.link(0, 1).p2p_read is None and topo.link(1, 2).p2p_read == "ok"


def test_the_threads_cuda_device_and_affinity_line_number_each_ranks_gpu():
    """nccl#606 (CUDA_VISIBLE_DEVICES=2,3): thread [1] logs rank 1's connection and 'Setting affinity
    for GPU 3': not its CUDA device 1, so NCCL's NVML index; thread [0] logs rank 0's tree, GPU 2."""
    topo = nccl_log.read(text_of("nccl_log", "nccl606_2x_a6000_nccltests_header_socket_p2p_direct_hang_cut.log"), "x")
    assert {g.pci_bus_id: g.index for g in topo.gpus} == {"0000:c1:00.0": 2, "0000:c2:00.0": 3}
    assert topo.gpu_numbering == "nvml" and not any(n.code == "nccl-gpus-by-bus-id" for n in topo.reading_notes)
    assert [(r.rank, r.cuda_device, r.host) for r in topo.nccl.ranks] == [(0, 0, "nccl-tests"), (1, 1, "nccl-tests")]
    (t,) = topo.nccl.transports
    assert (t.a, t.b, t.transport) == (3, 2, "P2P")


def test_an_affinity_line_that_names_the_cuda_device_says_nothing_of_nvml():
    log = ("h:1:2 [0] NCCL INFO Setting affinity for GPU 0 to ff\n"
           "h:1:2 [0] NCCL INFO Channel 00 : 0[1b000] -> 1[1c000] via P2P/IPC\n"
           "h:1:3 [1] NCCL INFO Channel 00 : 1[1c000] -> 0[1b000] via P2P/IPC\n")
    topo = nccl_log.read(log, "same")
    assert topo.gpu_numbering is None and [r.cuda_device for r in topo.nccl.ranks] == [0, 1]


def test_one_thread_that_sets_up_two_ranks_in_turn_gives_each_its_own_device():
    """An init loop over devices in one thread (the [cudaDev] changes, the tid does not)."""
    log = ("h:1:1 [0] NCCL INFO Setting affinity for GPU 4 to ff\n"
           "h:1:1 [0] NCCL INFO Trees [0] 1/-1/-1->0->-1\n"
           "h:1:1 [1] NCCL INFO Setting affinity for GPU 5 to ff00\n"
           "h:1:1 [1] NCCL INFO Trees [0] -1/-1/-1->1->0\n"
           "h:1:1 [1] NCCL INFO Channel 00 : 1[1] -> 0[0] via P2P/IPC\n")
    topo = nccl_log.read(log, "loop")
    assert [(r.rank, r.cuda_device) for r in topo.nccl.ranks] == [(0, 0), (1, 1)]
    assert topo.gpu_numbering == "nvml" and [g.index for g in topo.gpus] == [4, 5]


def test_one_hosts_lines_of_a_job_on_three_nodes_are_ranks_not_one_hosts_gpus():
    """NVIDIA/nccl-tests#373: only bigo's lines of a 3-node job (nNodes 3): ranks 0 and 1 are on
    other hosts, so no pair of them is linked as if on bigo, and the missing hosts are said."""
    from gputopo.analysis.notes.reading_notes import note_findings

    name = "nccltests373_p2p_level_loc_3node_ibext_cut.log"
    topo = nccl_log.read(text_of("nccl_log", name), name)
    assert [g.index for g in topo.gpus] == [0, 1, 2] and topo.links == []
    assert "3 ranks on 3 hosts (1 named)" in topo.label
    (finding,) = note_findings(topo.reading_notes)
    assert "3 nodes" in finding.message and "bigo" in finding.message


def _init(host: str, pid: int, rank: int, dev: int, nvml: str, bus: str) -> str:
    return (f"{host}:{pid}:{pid} [{dev}] NCCL INFO ncclCommInitRank comm 0x55aa rank {rank} nranks 2 cudaDev {dev}"
            f"{nvml} busId {bus} commId 0x1 - Init START\n")


DISABLED = "box:11:11 [0] NCCL INFO P2P is disabled between connected GPUs 1 and 2. You can repress this message with NCCL_IGNORE_DISABLED_P2P=1.\n"


def test_p2p_disabled_lands_on_the_ranks_whose_nvml_index_the_affinity_lines_name():
    """Ranks numbered by rank (rank 2 names no NVML index); the threads of ranks 0 and 1 print
    ``Setting affinity for GPU N`` with N not their CUDA device: their NVML index. So "GPUs 1 and 2"
    are ranks 0 and 1."""
    log = ("box:11:11 [0] NCCL INFO Setting affinity for GPU 1 to ff\n"
           "box:11:11 [0] NCCL INFO Channel 00 : 0[0] -> 1[1] via SHM/direct/direct\n"
           "box:12:12 [1] NCCL INFO Setting affinity for GPU 2 to ff\n"
           "box:12:12 [1] NCCL INFO Channel 00 : 1[1] -> 2[2] via SHM/direct/direct\n"
           "box:13:13 [2] NCCL INFO Channel 00 : 2[2] -> 0[0] via SHM/direct/direct\n"
           + DISABLED)
    topo = nccl_log.read(log, "x")
    assert [g.index for g in topo.gpus] == [0, 1, 2]
    assert topo.link(0, 1).p2p_read == "NS" and topo.link(1, 2).p2p_read is None
    assert [n.code for n in topo.reading_notes] == []


def test_p2p_disabled_between_gpus_the_log_cannot_place_is_said_not_dropped():
    log = (_init("box", 11, 0, 0, "", "41000") + _init("other", 12, 1, 0, "", "81000") + DISABLED)
    topo = nccl_log.read(log, "x")  # two hosts: GPUs numbered by rank, NVML's 1 and 2 not named
    assert all(link.p2p_read is None for link in topo.links)
    from gputopo.analysis.notes.reading_notes import note_findings

    (finding,) = [f for f in note_findings(topo.reading_notes) if "P2P is disabled" in f.message]
    assert "1 and 2" in finding.message and "not placed" in finding.message


def test_could_not_enable_p2p_lands_on_the_gpus_with_its_bus_ids():
    log = (_init("box", 11, 0, 0, "", "41000") + _init("box", 12, 1, 1, "", "81000")
           + "box:11:11 [0] NCCL INFO Could not enable P2P between dev 0(=41000) and dev 1(=81000)\n")
    topo = nccl_log.read(log, "x")
    assert topo.link(0, 1).p2p_read == "NS"


@pytest.mark.parametrize(("name", "dressing"), dressed_cases("nccl_log"))
def test_every_real_capture_reads_the_same_under_a_pastes_dressing(name, dressing):
    """The capture as users paste it (CRLF, tabs, a prompt, a fence, a quote, bold, a host prefix, long
    lines cut): the reader makes of it what it makes of the capture itself."""
    text = text_of("nccl_log", name)
    assert reading(nccl_log.read(DRESSINGS[dressing](text), name)) == reading(nccl_log.read(text, name))


def test_a_p2p_or_shm_peer_is_on_the_host_of_the_rank_that_logs_it():
    """NVIDIA/nccl#527: each host logs its own ranks' sends; P2P and SHM never leave a host, so the
    receiving rank is on that host too (it logs no line of its own in the cut excerpt)."""
    topo = nccl_log.read(text_of("nccl_log", "nccl527_ec2_p4d_multinode_p2p_ipc_read_bus_device_1c_cut.log"), "x")
    hosts = {r.rank: r.host for r in topo.nccl.ranks}
    assert hosts[24] == hosts[25] == hosts[26] == "ip-10-216-179-119" and hosts[1] == "ip-10-216-179-193"
    net = "a:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0\n"
    assert {r.rank: r.host for r in nccl_log.read(net, "n").nccl.ranks} == {0: "a", 1: None}  # NET says nothing of the peer's host


def test_a_network_connection_between_ranks_of_unnamed_hosts_is_several_hosts_unless_p2p_and_shm_are_off():
    """NVIDIA/nccl#952 redacted every host name to `<cluster_name>`: its `[send] via NET/Socket` between
    ranks 15 and 6 shows two nodes; the ranks are not one host's GPUs (no pair between them). With both
    NCCL_P2P_DISABLE and NCCL_SHM_DISABLE set, NET may join GPUs of one host: one host, as before."""
    topo = nccl_log.read(text_of("nccl_log", "nccl952_2node_16gpu_p2p_ipc_read_net_socket_cut.log"), "x")
    assert topo.links == [] and "at least 2 hosts (0 named)" in topo.label
    lines = ("<h>:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via NET/Socket/0\n"
             "<h>:1:3 [1] NCCL INFO Channel 00/0 : 1[1] -> 0[0] via NET/Socket/0\n")
    assert nccl_log.read(lines, "a").links == []
    forced = ("<h>:1:2 [0] NCCL INFO NCCL_P2P_DISABLE set by environment to 1.\n"
              "<h>:1:2 [0] NCCL INFO NCCL_SHM_DISABLE set by environment to 1.\n") + lines
    assert [(k.a, k.b) for k in nccl_log.read(forced, "b").links] == [(0, 1)]


def test_an_nccl_tests_header_cut_among_the_log_lines_is_said_not_refused():
    """NVIDIA/nccl#1189: the nccl-tests column header is printed between Init lines and the paste ends
    before its first row: the log is read (through the registry, as scan reads it) and the cut said."""
    from gputopo.sources.registry import read_text

    name = "nccl1189_h20_2node_4rank_init_complete_nccltests_header_interleaved_cut.log"
    topo = read_text(text_of("nccl_log", name), name)
    assert topo.source == "nccl-log" and topo.nccl.nranks == 4
    (note,) = note_findings([n for n in topo.reading_notes if n.code == "nccl-tests-no-rows"])
    assert "among its NCCL_DEBUG lines" in note.message and "Using devices" not in note.message


def test_an_init_complete_line_without_bus_id_still_names_its_rank():
    """NCCL 2.4-2.6 end their set-up with ``comm 0x.. rank R nranks N cudaDev D nvmlDev D - Init COMPLETE``
    (busId only from 2.7): a log cut to those lines names every rank's host and CUDA device."""
    topo = nccl_log.read(text_of("nccl_log", "nccltests29_4node_32rank_init_complete_cut.log"), "init")
    assert topo.nccl.nranks == 32 and len(topo.gpus) == 12 and not topo.links
    assert {(r.rank, r.cuda_device, r.pci_bus_id, r.host) for r in topo.nccl.ranks} >= {
        (15, 7, None, "server2"), (4, 4, None, "server1"), (29, 5, None, "server4")}
    # Mangled: a markdown quote on each line, CRLF, and a later release's line with busId beside it.
    mangled = "\r\n".join("> " + line for line in [
        "server3:15217:15314 [1] NCCL INFO comm 0x7fd178001ca0 rank 17 nranks 32 cudaDev 1 - Init COMPLETE",
        "server1:1:2 [0] NCCL INFO comm 0x1 rank 0 nranks 32 cudaDev 0 busId 1b000 - Init COMPLETE"])
    again = nccl_log.read(mangled, "mangled")
    assert sorted((r.rank, r.cuda_device, r.pci_bus_id, r.host) for r in again.nccl.ranks) == [
        (0, 0, "0000:1b:00.0", "server1"), (17, 1, None, "server3")]
