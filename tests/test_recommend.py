"""recommend(): the picks the issue asks for, the errors, the TF advice, and exactness against brute force."""

import itertools
import subprocess
import sys

import pytest
from conftest import REPO, SHARED_FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputopo.analysis.recommend import (
    EXACT_LIMIT,
    _Problem,
    best_ring,
    brute_force_best_key,
    brute_force_keys,
    recommend,
)
from gputopo.errors import InputError
from gputopo.model import Gpu, Measurement, Topology, make_link
from gputopo.sources import load_topology
from gputopo.sources.reference import load_reference

DGX1_TEXT = SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"
PCIE_TEXT = SHARED_FIXTURES / "topo" / "pcie_8gpu_dual_socket_pix_node_sys.txt"
POWER9_TEXT = SHARED_FIXTURES / "topo" / "power9_4gpu_nv3_pairs_tabs.txt"
TF0_LOG = SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log"
FULLY_NVLINKED_QUADS = ({0, 1, 2, 3}, {4, 5, 6, 7})


# --- the "done means" picks ----------------------------------------------------------------------


@pytest.mark.parametrize("source", ["reference", "fixture"])
def test_dgx1_four_gpus_is_a_fully_nvlinked_quad(source):
    topo = load_reference("dgx1") if source == "reference" else load_topology(from_file=str(DGX1_TEXT))
    rec = recommend(topo, 4)
    best = rec.best
    assert set(best.gpus) in FULLY_NVLINKED_QUADS
    assert all(topo.link(a, b).is_nvlink for a, b in itertools.combinations(best.gpus, 2))
    assert best.bottleneck_gbps == pytest.approx(20.0)  # NV1 is the slowest hop of any ring in a quad
    assert best.bottleneck.startswith("NV1")
    assert best.same_socket and rec.proven_optimal
    # The other quad ties; a cross-socket quad with the same ring is ranked below both.
    assert set(rec.groups[1].gpus) in FULLY_NVLINKED_QUADS
    assert not rec.groups[2].same_socket
    assert "NUMA node" in rec.groups[1].reason


@pytest.mark.parametrize(
    ("machine", "k", "beats"),
    [("dgx1", 4, "better than {0,3,4,7}: same slowest hop, but on one NUMA node instead of 2"),
     ("two-socket-4gpu", 2, "better than {0,2}: its slowest ring hop is ~12 GB/s (PIX) against ~6.2 GB/s (SYS)")],
)
def test_a_best_group_that_ties_also_says_what_it_beats(machine, k, beats):
    """'as good as the runner-up' alone does not say why the pick is good."""
    reason = recommend(load_reference(machine), k).best.reason
    assert reason.startswith("as good as ") and "lower GPU numbers" in reason
    assert beats in reason


def test_dual_socket_pcie_fixture_keeps_the_group_on_one_socket():
    topo = load_topology(from_file=str(PCIE_TEXT))
    for k in (2, 3, 4):
        best = recommend(topo, k).best
        assert best.same_socket
        assert len({topo.gpu(g).numa_node for g in best.gpus}) == 1
        assert best.numactl == f"numactl --cpunodebind={best.numa_node} --membind={best.numa_node}"
    best4 = recommend(topo, 4).best
    assert set(best4.gpus) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    assert "SYS" not in best4.bottleneck


def test_two_socket_tf_log_two_gpus_picks_a_peering_pair():
    topo = load_topology(tf_log=str(TF0_LOG))
    rec = recommend(topo, 2)
    assert set(rec.best.gpus) in ({0, 1}, {2, 3})
    assert set(rec.groups[1].gpus) in ({0, 1}, {2, 3})
    assert rec.groups[2].bottleneck_gbps < rec.best.bottleneck_gbps
    assert rec.best.cross_device_ops == "NcclAllReduce"
    assert any("TensorFlow's ordinals" in note for note in rec.notes)


@pytest.mark.parametrize("machine, k", [("dgx-h100", 4), ("dgx-a100", 3), ("hgx-b200", 5), ("dgx2", 8)])
def test_nvswitch_machines_say_any_group_is_as_good(machine, k):
    rec = recommend(load_reference(machine), k)
    assert rec.interchangeable
    assert any("NVSwitch" in note and "as good" in note for note in rec.notes)
    assert len({g.bottleneck_gbps for g in rec.groups}) == 1
    assert rec.proven_optimal


def test_a_tf_log_without_peer_lines_says_it_cannot_tell_groups_apart():
    topo = load_topology(tf_log=str(SHARED_FIXTURES / "tf_logs" / "tf2_created_device_4gpu_3090.log"))
    rec = recommend(topo, 2)
    assert any("does not tell the links apart" in note for note in rec.notes)
    assert not any("NVSwitch" in note for note in rec.notes)


def test_tf_log_in_fastest_first_order_launches_the_pair_by_pci_bus_order():
    """TF's GPU:0 is 0000:82 and GPU:1 is 0000:02 in this log: the peering pair TF calls 0,2 is
    nvidia-smi's 1,2, which CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES must name."""
    topo = load_topology(tf_log=str(REPO / "tests" / "fixtures" / "tf_logs" / "tf15_edge_matrix_visible_order_differs.log"))
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
    pci_ordered = recommend(load_topology(tf_log=str(TF0_LOG)), 2).best
    assert pci_ordered.cuda_visible_devices == ",".join(map(str, pci_ordered.gpus))


def test_pairs_a_tf_log_says_nothing_about_are_not_called_non_peering():
    topo = load_topology(tf_log=str(SHARED_FIXTURES / "tf_logs" / "tf2_created_device_4gpu_3090.log"))
    best = recommend(topo, 2).best
    assert best.cross_device_ops == "NcclAllReduce"
    assert "cannot peer" not in best.cross_device_ops_reason.split(";")[0]
    assert "does not say whether pairs 0-1 can peer" in best.cross_device_ops_reason


def test_power9_pairs_pick_an_nvlink_pair_on_one_numa_node():
    topo = load_topology(from_file=str(POWER9_TEXT))
    best = recommend(topo, 2).best
    assert set(best.gpus) in ({0, 1}, {2, 3}) and best.bottleneck.startswith("NV3")
    assert best.numa_node in (0, 8)


# --- larger domains ------------------------------------------------------------------------------


def test_nvl72_groups_of_four_stay_in_one_tray_and_are_proven():
    topo = load_reference("gb200-nvl72")
    rec = recommend(topo, 4)
    assert rec.proven_optimal and rec.interchangeable
    best = rec.best
    assert best.same_host and len({topo.gpu(g).host for g in best.gpus}) == 1
    assert best.cuda_visible_devices == ",".join(map(str, best.gpus))


def test_nvl72_groups_spanning_trays_use_as_few_as_possible_and_multiworker():
    topo = load_reference("gb200-nvl72")
    rec = recommend(topo, 12)
    best = rec.best
    assert len(best.hosts) == 3  # 4 GPUs per tray
    assert not best.same_host and best.cuda_visible_devices_by_host
    assert all(v == "0,1,2,3" for v in best.cuda_visible_devices_by_host.values())
    assert best.strategy == "MultiWorkerMirroredStrategy" and best.cross_device_ops is None
    assert "CommunicationImplementation.NCCL" in best.cross_device_ops_code
    assert rec.proven_optimal


def test_search_beyond_the_exact_limit_says_when_it_is_not_proven(monkeypatch):
    import gputopo.analysis.recommend as module

    monkeypatch.setattr(module, "NODE_BUDGET", 3)
    topo = _random_topology(EXACT_LIMIT + 4, seed=7)
    rec = recommend(topo, 5)
    assert not rec.proven_optimal
    assert "not proven optimal" in rec.search


# --- require / exclude / errors ------------------------------------------------------------------


def test_require_and_exclude_are_honoured():
    topo = load_reference("dgx1")
    rec = recommend(topo, 4, require=[5], exclude=[4])
    for group in rec.groups:
        assert 5 in group.gpus and 4 not in group.gpus
    assert rec.best.key == brute_force_best_key(topo, 4, require=[5], exclude=[4])


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
        recommend(load_reference("dgx1"), **kwargs)


# --- TF advice -----------------------------------------------------------------------------------


def test_cross_device_ops_choices_and_device_lists():
    dgx1 = load_reference("dgx1")
    full = recommend(dgx1, 8).best
    assert full.cross_device_ops == "HierarchicalCopyAllReduce"  # the mesh it was written for
    assert "cannot peer" in full.cross_device_ops_reason
    quad = recommend(dgx1, 4, require=[4]).best
    assert quad.cross_device_ops == "NcclAllReduce" and quad.gpus == [4, 5, 6, 7]
    assert quad.mirrored_strategy_devices == ["/gpu:0", "/gpu:1", "/gpu:2", "/gpu:3"]
    assert quad.mirrored_strategy_devices_all_visible == ["/gpu:4", "/gpu:5", "/gpu:6", "/gpu:7"]
    assert quad.cuda_visible_devices == "4,5,6,7" and quad.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    two_socket = recommend(load_reference("two-socket-4gpu"), 4).best
    assert two_socket.cross_device_ops == "NcclAllReduce"
    assert "host memory" in two_socket.cross_device_ops_reason and "ReductionToOneDevice" in two_socket.cross_device_ops_reason
    single = recommend(dgx1, 1).best
    assert single.cross_device_ops is None and single.bottleneck_gbps is None
    assert single.strategy == "OneDeviceStrategy"
    # Every name given is a tf.distribute class the train command can instantiate by name.
    assert {full.cross_device_ops, quad.cross_device_ops} <= {"NcclAllReduce", "HierarchicalCopyAllReduce",
                                                              "ReductionToOneDevice"}


def test_to_dict_follows_the_json_contract():
    data = recommend(load_reference("dgx1"), 4, alternatives=2).to_dict()
    assert len(data["groups"]) == 3 and data["proven_optimal"] is True and data["search"]
    for group in data["groups"]:
        assert {"gpus", "cuda_visible_devices", "mirrored_strategy_devices", "cross_device_ops", "reason",
                "ring", "bottleneck_gbps", "allreduce_gbps", "bottleneck", "same_socket", "numa_node",
                "numactl", "cross_device_ops_reason", "mirrored_strategy_devices_all_visible"} <= set(group)
    assert data["jobs"][0]["gpus"] == data["groups"][0]["gpus"]


# --- measurements change the answer --------------------------------------------------------------


def test_a_measured_slow_pair_moves_the_pick():
    topo = load_reference("two-socket-4gpu")
    assert recommend(topo, 2).best.gpus == [0, 1]
    topo.link(0, 1).measured = Measurement(a_to_b_gbps=3.0, b_to_a_gbps=3.1)
    rec = recommend(topo, 2)
    assert rec.best.gpus == [2, 3]
    assert any("measurements" in note for note in rec.notes)


def test_tf_peer_view_fills_in_unknown_p2p_and_moves_the_pick():
    from gputopo.model import TfDevice, TfView

    topo = load_reference("pcie-8gpu")
    for link in topo.links:
        link.p2p_read = link.p2p_write = link.p2p_atomics = None  # as from pasted nvidia-smi text
    assert recommend(topo, 2).best.gpus == [0, 1]
    # TF numbered the GPUs in reverse (FASTEST_FIRST); the join is by PCI bus id.
    devices = [TfDevice(ordinal=o, pci_bus_id=topo.gpu(7 - o).pci_bus_id) for o in range(8)]
    peer = [[True] * 8 for _ in range(8)]
    peer[7][6] = peer[6][7] = False  # TF ordinals 7 and 6 are GPUs 0 and 1
    topo.tf = TfView(devices=devices, peer=peer)
    rec = recommend(topo, 2)
    assert rec.best.gpus == [2, 3]
    assert topo.link(0, 1).p2p_read is None  # the topology itself is left alone
    assert any("TensorFlow's peer view" in note for note in rec.notes)


# --- jobs ----------------------------------------------------------------------------------------


def test_jobs_split_dgx1_into_fair_disjoint_groups():
    topo = load_reference("dgx1")
    rec = recommend(topo, 4, jobs=2)
    assert [set(g.gpus) for g in rec.jobs] == [{0, 1, 2, 3}, {4, 5, 6, 7}]
    pairs = recommend(topo, 2, jobs=4)
    used = [g for job in pairs.jobs for g in job.gpus]
    assert sorted(used) == list(range(8))
    assert all(job.bottleneck.startswith("NV2") for job in pairs.jobs)  # DGX-1 has a perfect NV2 matching
    assert pairs.jobs_proven_optimal


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), shape=st.sampled_from([(2, 2), (2, 3), (3, 2)]), require_one=st.booleans())
def test_jobs_worst_group_matches_brute_force(seed, shape, require_one):
    k, jobs = shape
    topo = _random_topology(7, seed)
    require = [seed % 7] if require_one else []
    rec = recommend(topo, k, jobs=jobs, require=require)
    problem = _Problem(topo, topo.gpu_indices)
    used = [g for job in rec.jobs for g in job.gpus]
    assert len(set(used)) == k * jobs and set(require) <= set(used)
    got = min(problem.key(tuple(problem.pos[g] for g in job.gpus)) for job in rec.jobs)
    best = None
    for groups in itertools.combinations(itertools.combinations(range(7), k), jobs):
        members = [g for group in groups for g in group]
        if len(set(members)) < len(members) or not set(require) <= set(members):
            continue
        worst = min(problem.key(g) for g in groups)
        best = worst if best is None or worst > best else best
    assert got == best
    assert rec.jobs_proven_optimal


# --- exactness -----------------------------------------------------------------------------------

_LINK_WORDS = ["NV1", "NV2", "NV4", "PIX", "PXB", "PHB", "NODE", "SYS"]


def _random_topology(n: int, seed: int, words: list[str] | None = None, hosts: int = 1) -> Topology:
    import random

    rng = random.Random(seed)
    words = words or _LINK_WORDS
    gpus = [
        Gpu(index=i, numa_node=rng.randrange(2), nvlink_version="2.0", pcie_gen_current=3, pcie_width_current=16,
            host=f"h{rng.randrange(hosts)}" if hosts > 1 else None)
        for i in range(n)
    ]
    links = []
    for a in range(n):
        for b in range(a + 1, n):
            word = rng.choice(words)
            ok = rng.random() > 0.2
            links.append(make_link(a, b, word, p2p_read="ok" if ok else "TNS", p2p_write="ok" if ok else "TNS"))
    return Topology(gpus=gpus, links=links, source="test")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 100_000),
    n=st.integers(2, 12),
    k=st.integers(1, 6),
    few_words=st.booleans(),
    hosts=st.integers(1, 2),
    require_one=st.booleans(),
    seeded=st.booleans(),
)
def test_search_matches_brute_force_on_random_topologies(seed, n, k, few_words, hosts, require_one, seeded):
    import gputopo.analysis.recommend as module

    k = min(k, n)
    # Few distinct link words make many interchangeable GPUs: exercises the twin-class shortcut.
    words = ["NV2", "SYS"] if few_words else None
    topo = _random_topology(n, seed, words, hosts)
    require = [seed % n] if require_one else []
    # Without greedy seeds the branch and bound alone must find the optimum.
    saved = module.MAX_SEEDS
    module.MAX_SEEDS = saved if seeded else 0
    try:
        rec = recommend(topo, k, require=require)
    finally:
        module.MAX_SEEDS = saved
    assert rec.proven_optimal
    every_key = brute_force_keys(topo, k, require=require)
    assert rec.best.key == every_key[0]
    keys = [g.key for g in rec.groups]
    assert keys == sorted(keys, reverse=True)
    assert len({tuple(g.gpus) for g in rec.groups}) == len(rec.groups)
    if f"in {n} classes" in rec.search:  # no interchangeable GPUs: the runners-up are exact too
        assert keys == every_key[: len(keys)]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), k=st.integers(3, 4))
def test_search_matches_brute_force_at_the_exact_limit(seed, k):
    topo = _random_topology(EXACT_LIMIT, seed)
    rec = recommend(topo, k)
    assert rec.proven_optimal and "exact" in rec.search
    assert rec.best.key == brute_force_best_key(topo, k)


def test_best_ring_on_the_dgx1_nv2_cycle():
    problem = _Problem(load_reference("dgx1"), list(range(8)))
    bottleneck, order, complete = best_ring(tuple(range(8)), problem.weight)
    assert complete and bottleneck == 4000  # every DGX-1 GPU has two NV2 links forming one 8-cycle
    assert sorted(order) == list(range(8))
    hops = list(zip(order, order[1:] + order[:1]))
    assert min(problem.weight[a][b] for a, b in hops) == 4000


# --- purity ---------------------------------------------------------------------------------------


def test_recommend_never_imports_tensorflow():
    code = (
        "import sys, runpy\n"
        "sys.argv = ['gputopo', 'recommend', '--machine', 'dgx1', '--gpus', '4', '--format', 'python']\n"
        "try:\n    runpy.run_module('gputopo', run_name='__main__')\n"
        "except SystemExit as exc:\n    assert not exc.code, exc.code\n"
        "bad = [m for m in sys.modules if m == 'tensorflow' or m.startswith('tensorflow.') or m == 'pynvml']\n"
        "assert not bad, bad\n"
        "print('clean')\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("clean")
    assert "MirroredStrategy" in result.stdout


def test_one_host_groups_of_a_multi_host_domain_use_that_hosts_cuda_numbers():
    """CUDA on each NVL72 tray numbers its own GPUs 0-3, whatever their rack-wide index."""
    topo = load_reference("gb200-nvl72")
    rec = recommend(topo, gpus=4, jobs=3)
    for group in rec.jobs:
        assert group.same_host
        (host,) = group.hosts
        assert group.cuda_visible_devices == "0,1,2,3"
        assert group.cuda_visible_devices_by_host == {host: "0,1,2,3"}
    spanning = recommend(topo, gpus=8).best
    assert not spanning.same_host
    assert set(spanning.cuda_visible_devices_by_host.values()) == {"0,1,2,3"}


def test_a_tf_log_alone_does_not_claim_a_cpu_socket():
    from gputopo.sources.tflog import read_tf_log, topology_from_tf_view

    log = SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log"
    topo = topology_from_tf_view(read_tf_log(str(log)))
    rec = recommend(topo, gpus=2)
    assert set(rec.best.gpus) in ({0, 1}, {2, 3})
    assert rec.best.same_socket is None  # they can peer; where they sit is not in the log
    cross = [g for g in rec.groups if set(g.gpus) == {0, 2}]
    assert cross and cross[0].same_socket is False  # TF could not peer them: treated as crossing


def test_nvlinked_gpus_on_two_numa_nodes_are_not_called_one_socket():
    """nvidia-smi text shows only NV18 between H100s, no PCIe path: the NUMA column decides, as in diagnose."""
    topo = load_topology(from_file=str(REPO / "tests" / "fixtures" / "topo" / "h100_nv18_empty_cpu_affinity_cells.txt"))
    assert recommend(topo, 8).best.same_socket is False
    assert recommend(topo, 4).best.same_socket is True
