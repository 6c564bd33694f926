"""Each reference machine agrees with the real capture of the same model in the corpus (issue 24):
the words nvidia-smi prints between GPUs, between GPUs and NICs, and the NUMA split."""

from __future__ import annotations

import pytest
from conftest import OWN_FIXTURES, SHARED_FIXTURES

from gputopo.sources import TopologyRequest, resolve

CORPUS = OWN_FIXTURES / "corpus" / "topo"


def _words(topology):
    links = {(link.a, link.b): link.type.replace("SOC", "SYS") for link in topology.links}
    names = [nic.name for nic in topology.nics]
    nics = {(nl.gpu, names.index(nl.nic)): nl.type.replace("SOC", "SYS") for nl in topology.nic_links}
    return links, nics


def _nic_words_by_name(topology):
    return {(nl.gpu, nl.nic): nl.type.replace("SOC", "SYS") for nl in topology.nic_links}


def test_dgx1_nics_are_phb_to_the_other_switch_of_their_socket_as_on_a_real_dgx1():
    # ShARC's DGX-1 (P100: its NVLink counts differ from V100's, its PCIe tree and NICs are the same
    # chassis'): PIX to the GPU pair on the NIC's switch, PHB to the socket's other pair, SYS across.
    real = load_topology(from_file=str(CORPUS / "dgx1_p100_8gpu_nv1_mangled_header_soc.txt"))
    reference = load_topology(machine="dgx1")
    assert _nic_words_by_name(reference) == _nic_words_by_name(real)


def test_dgx1_gpu_links_are_the_hybrid_cube_mesh_of_a_real_v100_capture():
    # An 8x V100 SXM2 server (12-core CPUs, so not a DGX-1 itself: its NIC paths are NODE, each switch on
    # its own host bridge), with the same NVLink wiring as DGX-1 V100.
    real = load_topology(from_file=str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"))
    assert _words(load_topology(machine="dgx1"))[0] == _words(real)[0]


def test_dgx_h100_matches_the_real_dgx_h100_capture():
    real = load_topology(from_file=str(CORPUS / "dgx_h100_8gpu_nv18_12nic_truncated_after_nic5.txt"))
    reference = load_topology(machine="dgx-h100")
    assert _words(reference) == _words(real)
    assert [g.numa_node for g in reference.gpus] == [g.numa_node for g in real.gpus]
    assert [g.cpu_affinity for g in reference.gpus] == [g.cpu_affinity for g in real.gpus]


@pytest.mark.parametrize("machine", ["dgx2", "hgx-b200", "dgx-h100", "dgx-a100", "dgx1"])
def test_the_dgx_class_machines_have_a_nic_near_every_gpu(machine):
    topology = load_topology(machine=machine)
    for gpu in topology.gpus:
        near = [nl for nl in topology.nic_links if nl.gpu == gpu.index and nl.type in ("PIX", "PXB")]
        assert near, f"{machine}: GPU {gpu.index} has no NIC behind its PCIe switch"


def test_nvl72_group_over_two_trays_is_not_said_to_stay_near_one_cpu(cli):
    result = cli("recommend", "--machine", "nvl72", "-n", "8")
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert "close to one CPU" not in flat
    assert "spread over 2 hosts" in flat


def test_nvl72_report_names_the_strategy_not_none(cli, tmp_path):
    page = tmp_path / "nvl72.html"
    result = cli("report", "--machine", "nvl72", "--gpus", "8", "-o", str(page))
    assert result.exit_code == 0, result.output
    html = page.read_text()
    assert "# None" not in html
    assert "# MultiWorkerMirroredStrategy: the group spans several hosts" in html


def test_dgx1_all_eight_use_nccl_over_its_nvlink_ring():
    from gputopo.analysis.recommend import recommend

    best = recommend(load_topology(machine="dgx1"), 8).best
    hops = list(zip(best.ring, best.ring[1:] + best.ring[:1]))
    links = load_topology(machine="dgx1").link_map()
    assert all(links[tuple(sorted(hop))].is_nvlink for hop in hops)
    assert best.cross_device_ops == "NcclAllReduce"
    assert "NVLink on every hop" in best.cross_device_ops_reason


def load_topology(from_file=None, machine=None):
    return resolve(TopologyRequest(from_files=(from_file,) if from_file else (), machine=machine))
