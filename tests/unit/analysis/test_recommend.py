"""recommend() end to end: the picks the issues ask for, larger domains, require/exclude, the JSON
contract, and that it never imports TensorFlow. The parts have their own files in
tests/unit/analysis/recommend/: test_ring, _search, _jobs, _problem, _advice, _explain."""

import itertools
import subprocess
import sys

import pytest
from conftest import REPO, SHARED_FIXTURES
from linktable import cube_mesh_8, nvl72, table_machine
from recommend_oracles import brute_force_best_key

from gputopo.analysis.recommend import recommend
from gputopo.sources import TopologyRequest, resolve

DGX1_TEXT = SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"
PCIE_TEXT = SHARED_FIXTURES / "topo" / "pcie_8gpu_dual_socket_pix_node_sys.txt"
POWER9_TEXT = SHARED_FIXTURES / "topo" / "power9_4gpu_nv3_pairs_tabs.txt"
TF0_LOG = SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log"
FULLY_NVLINKED_QUADS = ({0, 1, 2, 3}, {4, 5, 6, 7})

# --- the "done means" picks -------------------------------------------------------------------------


@pytest.mark.parametrize("source", ["table", "fixture"])
def test_dgx1_four_gpus_is_a_fully_nvlinked_quad(source):
    topo = cube_mesh_8() if source == "table" else resolve(TopologyRequest(from_files=(str(DGX1_TEXT),)))
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


def test_dual_socket_pcie_fixture_keeps_the_group_on_one_socket():
    topo = resolve(TopologyRequest(from_files=(str(PCIE_TEXT),)))
    for k in (2, 3, 4):
        best = recommend(topo, k).best
        assert best.same_socket
        assert len({topo.gpu(g).numa_node for g in best.gpus}) == 1
        assert best.numactl == f"numactl --cpunodebind={best.numa_node} --membind={best.numa_node}"
    best4 = recommend(topo, 4).best
    assert set(best4.gpus) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    assert "SYS" not in best4.bottleneck


def test_two_socket_tf_log_two_gpus_picks_a_peering_pair():
    topo = resolve(TopologyRequest(tf_log=str(TF0_LOG)))
    rec = recommend(topo, 2)
    assert set(rec.best.gpus) in ({0, 1}, {2, 3})
    assert set(rec.groups[1].gpus) in ({0, 1}, {2, 3})
    assert rec.groups[2].bottleneck_gbps < rec.best.bottleneck_gbps
    assert rec.best.cross_device_ops == "NcclAllReduce"
    assert any("TensorFlow's ordinals" in note for note in rec.notes)


@pytest.mark.parametrize("machine, k", [("nvswitch-8-nv18", 4), ("nvswitch-8-nv12", 3), ("nvswitch-8-nv18", 5), ("nvswitch-16-nv6", 8)])
def test_nvswitch_machines_say_any_group_is_as_good(machine, k):
    rec = recommend(table_machine(machine), k)
    assert rec.interchangeable
    assert any("NVSwitch" in note and "as good" in note for note in rec.notes)
    assert len({g.bottleneck_gbps for g in rec.groups}) == 1
    assert rec.proven_optimal


def test_a_tf_log_without_peer_lines_says_it_cannot_tell_groups_apart():
    topo = resolve(TopologyRequest(tf_log=str(SHARED_FIXTURES / "tf_logs" / "tf2_created_device_4gpu_3090.log")))
    rec = recommend(topo, 2)
    assert any("does not tell the links apart" in note for note in rec.notes)
    assert not any("NVSwitch" in note for note in rec.notes)


def test_power9_pairs_pick_an_nvlink_pair_on_one_numa_node():
    topo = resolve(TopologyRequest(from_files=(str(POWER9_TEXT),)))
    best = recommend(topo, 2).best
    assert set(best.gpus) in ({0, 1}, {2, 3}) and best.bottleneck.startswith("NV3")
    assert best.numa_node in (0, 8)


# --- larger domains ---------------------------------------------------------------------------------


def test_nvl72_groups_of_four_stay_in_one_tray_and_are_proven():
    topo = nvl72()
    rec = recommend(topo, 4)
    assert rec.proven_optimal and rec.interchangeable
    best = rec.best
    assert best.same_host and len({topo.gpu(g).host for g in best.gpus}) == 1
    assert best.cuda_visible_devices == ",".join(map(str, best.gpus))


def test_nvl72_groups_spanning_trays_use_as_few_as_possible_and_multiworker():
    topo = nvl72()
    rec = recommend(topo, 12)
    best = rec.best
    assert len(best.hosts) == 3  # 4 GPUs per tray
    assert not best.same_host and best.cuda_visible_devices_by_host
    assert all(v == "0,1,2,3" for v in best.cuda_visible_devices_by_host.values())
    assert best.strategy == "MultiWorkerMirroredStrategy" and best.cross_device_ops is None
    assert "CommunicationImplementation.NCCL" in best.cross_device_ops_code
    assert rec.proven_optimal


# --- require / exclude ------------------------------------------------------------------------------


def test_require_and_exclude_are_honoured():
    topo = cube_mesh_8()
    rec = recommend(topo, 4, require=[5], exclude=[4])
    for group in rec.groups:
        assert 5 in group.gpus and 4 not in group.gpus
    assert rec.best.key == brute_force_best_key(topo, 4, require=[5], exclude=[4])


# --- JSON -------------------------------------------------------------------------------------------


def test_to_dict_follows_the_json_contract():
    data = recommend(cube_mesh_8(), 4, alternatives=2).to_dict()
    assert len(data["groups"]) == 3 and data["proven_optimal"] is True and data["search"]
    for group in data["groups"]:
        assert {"gpus", "cuda_visible_devices", "mirrored_strategy_devices", "cross_device_ops", "reason",
                "ring", "bottleneck_gbps", "allreduce_gbps", "bottleneck", "same_socket", "numa_node",
                "numactl", "cross_device_ops_reason", "mirrored_strategy_devices_all_visible"} <= set(group)
    assert data["jobs"][0]["gpus"] == data["groups"][0]["gpus"]


# --- purity -----------------------------------------------------------------------------------------


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
