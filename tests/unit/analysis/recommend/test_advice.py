"""recommend.advice: checking the ask, CUDA numbering, sockets and NUMA nodes, MirroredStrategy's
devices and cross-device ops."""

import pytest
from conftest import REPO, SHARED_FIXTURES
from linktable import cube_mesh_8, nvl72, two_socket_4

from gputopo.analysis.recommend import recommend
from gputopo.errors import InputError
from gputopo.sources import TopologyRequest, resolve

TF0_LOG = SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log"

# --- the ask ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(gpus=0), "at least 1"),
        (dict(gpus=9), "only 8"),
        (dict(gpus=2, jobs=0), "--jobs"),
        (dict(gpus=2, require=[3], exclude=[3]), "both required and excluded"),
        (dict(gpus=2, require=[8]), "does not exist"),
        (dict(gpus=2, exclude=[42]), "does not exist"),
        (dict(gpus=4, jobs=2, exclude=[0]), "only 7 GPUs are available after --exclude"),
        (dict(gpus=3, jobs=3), "3 jobs x 3 GPUs"),
        (dict(gpus=2, require=[0, 1, 2]), "3 GPUs are required but a group has only 2"),
        (dict(gpus=2, jobs=2, require=[0, 1, 2, 3, 4]), "5 GPUs are required but 2 jobs of 2 use only 4"),
    ],
)
def test_impossible_asks_raise_input_error(kwargs, message):
    with pytest.raises(InputError, match=message):
        recommend(cube_mesh_8(), **kwargs)


@pytest.mark.parametrize("gpus", [1, 2])
def test_a_source_with_gpus_and_no_pair_says_what_to_add(gpus):
    """An nccl-tests output names its GPUs and measures a collective, no pair: recommend says so and
    what to paste with it, instead of naming one missing pair as if the file were damaged."""
    topo = resolve(TopologyRequest(from_files=[str(REPO / "tests/fixtures/corpus/nccl_tests/blog_8x_rtx4090_no_p2p_all_reduce_14gbps.txt")]))
    assert len(topo.gpus) == 8 and not topo.links
    with pytest.raises(InputError, match=r"lists 8 GPUs but says nothing of how any two are linked.*nvidia-smi topo -m"):
        recommend(topo, gpus)


# --- CUDA numbering ---------------------------------------------------------------------------------


def test_tf_log_in_fastest_first_order_launches_the_pair_by_pci_bus_order():
    """TF's GPU:0 is 0000:82 and GPU:1 is 0000:02 in this log: the peering pair TF calls 0,2 is
    nvidia-smi's 1,2, which CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES must name."""
    topo = resolve(TopologyRequest(tf_log=str(REPO / "tests" / "fixtures" / "tf_logs" / "tf15_edge_matrix_visible_order_differs.log")))
    best = recommend(topo, 2).best
    assert best.gpus == [0, 2]  # TensorFlow's ordinals, as its log and findings say
    assert best.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1,2"}
    assert best.mirrored_strategy_devices == ["/gpu:0", "/gpu:1"]
    assert best.mirrored_strategy_devices_all_visible == ["/gpu:1", "/gpu:2"]
    assert any("PCI bus order" in note and "GPU:0 is 1" in note for note in recommend(topo, 2).notes)
    # The shell lines say so too: the comment's "GPUs 0,2" are TF's, the export is PCI order.
    from gputopo.views.recommend import format_env

    env_text = format_env(recommend(topo, 2))
    assert "export CUDA_VISIBLE_DEVICES=1,2" in env_text
    assert "in PCI bus order" in env_text and "they are 1,2" in env_text
    # A log in PCI bus order keeps its numbers.
    pci_ordered = recommend(resolve(TopologyRequest(tf_log=str(TF0_LOG))), 2).best
    assert pci_ordered.cuda_visible_devices == ",".join(map(str, pci_ordered.gpus))


def test_one_host_groups_of_a_multi_host_domain_use_that_hosts_cuda_numbers():
    """CUDA on each NVL72 tray numbers its own GPUs 0-3, whatever their rack-wide index."""
    topo = nvl72()
    rec = recommend(topo, gpus=4, jobs=3)
    for group in rec.jobs:
        assert group.same_host
        (host,) = group.hosts
        assert group.cuda_visible_devices == "0,1,2,3"
        assert group.cuda_visible_devices_by_host == {host: "0,1,2,3"}
    spanning = recommend(topo, gpus=8).best
    assert not spanning.same_host
    assert set(spanning.cuda_visible_devices_by_host.values()) == {"0,1,2,3"}


# --- sockets ----------------------------------------------------------------------------------------


def test_a_tf_log_alone_does_not_claim_a_cpu_socket():
    from gputopo.sources.tf.tflog import read_tf_log, topology_from_tf_view

    log = SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log"
    topo = topology_from_tf_view(read_tf_log(str(log)))
    rec = recommend(topo, gpus=2)
    assert set(rec.best.gpus) in ({0, 1}, {2, 3})
    assert rec.best.same_socket is None  # they can peer; where they sit is not in the log
    cross = [g for g in rec.groups if set(g.gpus) == {0, 2}]
    # TF could not peer them: most often different sockets, but GNS/DR say the same, so not claimed
    assert cross and cross[0].same_socket is None


def test_nvlinked_gpus_on_two_numa_nodes_are_not_called_one_socket():
    """nvidia-smi text shows only NV18 between H100s, no PCIe path: the NUMA column decides, as in
    diagnose. Two NUMA nodes may be one socket (EPYC NPS2/4, Intel SNC, Grace): text cannot tell."""
    topo = resolve(TopologyRequest(from_files=(str(REPO / "tests" / "fixtures" / "topo" / "h100_nv18_empty_cpu_affinity_cells.txt"),)))
    assert recommend(topo, 8).best.same_socket is None
    assert recommend(topo, 4).best.same_socket is True  # one NUMA node: one socket


# --- TF advice --------------------------------------------------------------------------------------


def test_cross_device_ops_choices_and_device_lists():
    dgx1 = cube_mesh_8()
    full = recommend(dgx1, 8).best
    # The mesh HierarchicalCopyAllReduce was written for, but its best ring is NVLink on every hop:
    # NCCL runs over that ring (issue 24).
    assert full.cross_device_ops == "NcclAllReduce"
    assert "cannot peer" in full.cross_device_ops_reason and "NVLink on every hop" in full.cross_device_ops_reason
    quad = recommend(dgx1, 4, require=[4]).best
    assert quad.cross_device_ops == "NcclAllReduce" and quad.gpus == [4, 5, 6, 7]
    assert quad.mirrored_strategy_devices == ["/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3"]
    assert quad.mirrored_strategy_devices_all_visible == ["/gpu:4", "/gpu:5", "/gpu:6", "/gpu:7"]
    assert quad.cuda_visible_devices == "4,5,6,7" and quad.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    two_socket = recommend(two_socket_4(), 4).best
    assert two_socket.cross_device_ops == "NcclAllReduce"
    assert "host memory" in two_socket.cross_device_ops_reason and "ReductionToOneDevice" in two_socket.cross_device_ops_reason
    single = recommend(dgx1, 1).best
    assert single.cross_device_ops is None and single.bottleneck_gbps is None
    assert single.strategy == "OneDeviceStrategy"
    # Every name given is a tf.distribute class the train command can instantiate by name.
    assert {full.cross_device_ops, quad.cross_device_ops} <= {"NcclAllReduce", "HierarchicalCopyAllReduce",
                                                              "ReductionToOneDevice"}


def test_pairs_a_tf_log_says_nothing_about_are_not_called_non_peering():
    topo = resolve(TopologyRequest(tf_log=str(SHARED_FIXTURES / "tf_logs" / "tf2_created_device_4gpu_3090.log")))
    best = recommend(topo, 2).best
    assert best.cross_device_ops == "NcclAllReduce"
    assert "cannot peer" not in best.cross_device_ops_reason.split(";")[0]
    assert "does not say whether pairs 0-1 can peer" in best.cross_device_ops_reason


def test_hierarchical_copy_where_the_halves_peer_over_pcie_and_no_ring_is_all_nvlink():
    from gputopo.model import Gpu, Topology, make_link

    ok = {"p2p_read": "ok", "p2p_write": "ok"}
    no = {"p2p_read": "TNS", "p2p_write": "TNS"}
    topology = Topology(
        gpus=[Gpu(index=i) for i in range(4)],
        links=[make_link(0, 1, "PIX", **ok), make_link(2, 3, "PIX", **ok), make_link(0, 2, "NV1", **ok),
               make_link(1, 3, "NV1", **ok), make_link(0, 3, "SYS", **no), make_link(1, 2, "SYS", **no)],
    )
    best = recommend(topology, 4).best
    assert best.cross_device_ops == "HierarchicalCopyAllReduce", best.cross_device_ops_reason


def test_p2p_inferred_from_path_words_is_said_to_be_inferred():
    """Review 2: a PHB text with no P2P status got "every pair can copy directly (P2P)" as a fact."""
    from linktable import link_table

    from gputopo.analysis.recommend import recommend

    guessed = link_table("""
        X    PHB
        PHB  X
    """, p2p=None)
    reason = recommend(guessed, 2).best.cross_device_ops_reason
    assert "inferred from the path words" in reason and "can copy directly" not in reason
    known = link_table("""
        X    PHB
        PHB  X
    """)
    assert "every pair can copy directly (P2P)" in recommend(known, 2).best.cross_device_ops_reason


def test_a_hop_whose_figure_rests_on_an_assumption_says_at_least():
    """Review 2: NV18 of unknown generation printed as '~371 GB/s' in recommend (the low end of a range)."""
    from linktable import nvswitch

    from gputopo.analysis.recommend import recommend
    from gputopo.views.recommend import ring_summary

    unknown = nvswitch(8, "NV18", version=None)
    best = recommend(unknown, 2).best
    assert best.slowest_hop.basis == "assumed" and ">= ~" in ring_summary(best) and "at least" in best.bottleneck
    known = recommend(nvswitch(8, "NV18", version="4.0"), 2).best
    assert known.slowest_hop.basis == "estimated" and ">=" not in ring_summary(known)


def test_a_hop_known_only_to_peer_names_tf_only_for_a_tf_log():
    """p2pBandwidthLatencyTest's peer lines (aikitoria PR #29) say which pairs can peer, not TF."""
    from gputopo.analysis.recommend.advice import hop_label
    from gputopo.model import make_link
    from gputopo.sources.tools import p2pbw
    from unit.sources.readers_corpus import text_of

    assert hop_label(make_link(0, 1, "UNKNOWN", p2p_read="ok")) == "TF:P2P"
    assert hop_label(make_link(0, 1, "UNKNOWN", p2p_read="NS"), tf=False) == "no-P2P"
    topo = p2pbw.read(text_of("p2pbw", "aikitoria29_9gpu_mixed_blackwell_ampere_ada_peer_lines_cut_before_matrices.txt"), "c")
    best = recommend(topo, gpus=2).best
    assert best.slowest_hop.label == "P2P" and "TF" not in best.reason


# --- NUMA nodes the source does not give ------------------------------------------------------------


def test_a_gpu_whose_numa_node_is_not_given_is_named_not_counted_as_a_node():
    """A paste cut after some rows gives the NUMA node of some GPUs only: the group's count is of the
    nodes given, the others are named (not a node of their own), and a fully placed group ranks first."""
    from linktable import link_table

    from gputopo.views.recommend import placement

    topo = link_table("""
        X   NV2 NV2 NV2
        NV2 X   NV2 NV2
        NV2 NV2 X   NV2
        NV2 NV2 NV2 X
    """, numa=[0, 0, 1, None], socket=None, cpus=[None] * 4)
    whole = recommend(topo, gpus=4).groups[0]
    assert (whole.numa_domains, whole.numa_unknown_gpus) == (2, [3])
    assert placement(whole) == "2 NUMA nodes given; the NUMA node of GPU 3 is not in the source"
    pairs = recommend(topo, gpus=2, require=[3]).groups
    assert pairs and all(3 in g.gpus for g in pairs)
    assert all((g.numa_domains, g.numa_unknown_gpus) == (1, [3]) for g in pairs)
    assert recommend(topo, gpus=2).groups[0].gpus == [0, 1]  # placed on one node: first


def test_sys_pairs_without_p2p_status_are_not_said_to_be_unable_to_peer():
    """Review 3: an all-SYS topo -m (no P2P status) got "pairs 0-1, ... cannot peer" as a fact, while
    the report's "Not known" said P2P support is not in the source."""
    from linktable import link_table

    guessed = link_table("""
        X    SYS
        SYS  X
    """, p2p=None)
    reason = recommend(guessed, 2).best.cross_device_ops_reason
    assert "pairs 0-1 (SYS) most likely cannot peer" in reason and "topo -p2p r" in reason
    assert "pairs 0-1 cannot peer" not in reason
    assert "pairs 0-5, 0-6, 0-7, 1-4 ... cannot peer, but" in recommend(cube_mesh_8(), 8).best.cross_device_ops_reason


def test_pcie_pairs_across_a_host_bridge_are_beyond_nccls_default_p2p_level():
    """Review 3: PHB pairs got "NCCL's rings run GPU to GPU", but NCCL's default P2P level (PXB on
    most hosts, its paths.cc) sends them through host memory."""
    from linktable import link_table

    for p2p in (None, "ok"):
        kwargs = {} if p2p else {"p2p": None}
        phb = link_table("""
            X    PHB
            PHB  X
        """, **kwargs)
        reason = recommend(phb, 2).best.cross_device_ops_reason
        assert "between pairs 0-1 (PHB) NCCL copies through host memory (SHM)" in reason, reason
        assert "NCCL_P2P_LEVEL=SYS" in reason
    pix = link_table("""
        X    PIX
        PIX  X
    """)
    assert "NCCL_P2P_LEVEL" not in recommend(pix, 2).best.cross_device_ops_reason


def test_pairs_a_tf_log_says_can_peer_are_not_said_to_run_p2p_in_nccl_as_a_fact():
    """Review 3: a TF log says which GPUs can peer, never their path; "NCCL's rings run GPU to GPU"
    overclaimed, since NCCL's default level (PXB) sends host-bridge and cross-CPU pairs through SHM."""
    from conftest import OWN_FIXTURES

    log = OWN_FIXTURES / "corpus" / "tf_logs" / "tf15_edge_matrix_two_islands_8gpu_1080ti.log"
    reason = recommend(resolve(TopologyRequest(tf_log=str(log))), 4).best.cross_device_ops_reason
    assert "run GPU to GPU where their path is within NCCL's P2P level" in reason, reason
    assert "does not say how pairs 0-1, 0-2, 0-3, 1-2 ... are connected" in reason and "NCCL_P2P_LEVEL=SYS" in reason


def test_a_box_whose_peer_copies_delivered_wrong_data_gets_a_caveat_and_p2p_off():
    """nvbandwidth#34: 8 A100 SXM, the D2D read test stopped at its byte check. The plan must not hand
    out a NCCL-over-P2P command as if nothing were wrong."""
    from conftest import OWN_FIXTURES

    paste = OWN_FIXTURES / "corpus" / "nvbandwidth" / "nvbandwidth34_8x_a100_sxm_read_ce_pattern_assert.txt"
    best = recommend(resolve(TopologyRequest(from_files=(str(paste),))), 4).best
    assert "delivering wrong data" in best.p2p_caveat and best.env.get("NCCL_P2P_DISABLE") == "1"
    assert best.p2p_broken_pairs == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    healthy = recommend(two_socket_4(), 2).best
    assert not healthy.p2p_caveat and "NCCL_P2P_DISABLE" not in healthy.env


# --- the figures shown where P2P is broken until a fix ---------------------------------------------


def _broken_pix_pair():
    """Four V100 PCIe (Gen3, the card's) on one NUMA node, pairs 0,1 and 2,3 behind PCIe switches,
    NODE between; the benchmark shows pair 0-1 copying slower with P2P (2.4 GB/s) than staged (9.9)."""
    from linktable import link_table

    from gputopo.model import Measurement

    table = [["X", "PIX", "NODE", "NODE"], ["PIX", "X", "NODE", "NODE"], ["NODE", "NODE", "X", "PIX"],
             ["NODE", "NODE", "PIX", "X"]]
    topo = link_table(table, numa=0, name="Tesla V100-PCIE-16GB")
    topo.link(0, 1).measured = Measurement(
        a_to_b_gbps=2.37, b_to_a_gbps=2.41, method="p2pBandwidthLatencyTest", test="P2P=Enabled", p2p_enabled=True,
        p2p_off_a_to_b_gbps=9.88, p2p_off_b_to_a_gbps=9.95)
    return topo


def test_a_broken_pair_shows_what_it_gives_once_fixed_and_today_each_labelled():
    """Ranked on the healthy state, but shown honestly: the hop's figure is its link's estimate once
    P2P is fixed (an estimate, said so), and beside it what the pair carries today with
    NCCL_P2P_DISABLE=1, the staged copies the benchmark measured."""
    best = recommend(_broken_pix_pair(), gpus=2, require=[0, 1]).best
    (hop,) = best.hops
    assert hop.gbps == pytest.approx(12.32) and hop.basis == "estimated" and hop.transport == "P2P"
    assert hop.until_fixed_gbps == pytest.approx(9.88) and hop.until_fixed_basis == "measured"
    assert best.allreduce_busbw_until_fixed_gbps == pytest.approx(9.88)
    data = best.to_dict()
    assert data["hops"][0]["until_fixed_gbps"] == pytest.approx(9.88)
    assert "once P2P is fixed" in best.bottleneck and "today" in best.bottleneck and "9.9" in best.bottleneck


def test_with_p2p_off_every_hop_of_the_group_shows_its_staged_figure_today():
    """NCCL_P2P_DISABLE=1 is for the whole job: the hops the benchmark did not measure are shown at
    the staged estimate today, not at their P2P figure."""
    best = recommend(_broken_pix_pair(), gpus=4).best
    assert best.p2p_broken_pairs == [(0, 1)]
    for hop in best.hops:
        assert hop.until_fixed_gbps is not None and hop.until_fixed_gbps <= hop.gbps + 1e-9
    unmeasured = [h for h in best.hops if {h.a, h.b} != {0, 1}]
    assert all(h.until_fixed_basis == "estimated" for h in unmeasured)
    assert best.allreduce_until_fixed_gbps is not None


def test_a_healthy_group_shows_no_until_fixed_figures():
    best = recommend(two_socket_4(), gpus=2).best
    assert all(h.until_fixed_gbps is None for h in best.hops) and best.allreduce_busbw_until_fixed_gbps is None


def test_a_hop_whose_path_is_unknown_has_no_transport_in_json():
    """Review 4: a TF log says the pairs can peer, not their path, so whether NCCL's P2P level reaches
    them is unknown: ``transport`` is null, not "P2P" (the text already hedges)."""
    from conftest import OWN_FIXTURES

    log = OWN_FIXTURES / "corpus" / "tf_logs" / "tf15_edge_matrix_two_islands_8gpu_1080ti.log"
    rec = recommend(resolve(TopologyRequest(tf_log=str(log))), 4, alternatives=3)
    for group in rec.groups:
        for hop in group.to_dict()["hops"]:
            assert hop["transport"] == (None if hop["label"] == "TF:P2P" else "SHM"), hop
