"""diagnose(): plain-language findings on the reference machines (what each one is known to show) and
on link tables (tests/linktable.py) and their hand-made variants."""

from __future__ import annotations

import copy
import importlib.util
import json

import pytest
from conftest import SHARED_FIXTURES
from fake_nvml import FakeNvml
from linktable import cube_mesh_8, pcie_8, phb_pair, table_machine, two_socket_4

from gputopo.analysis.causes import diagnose as diagnose_module
from gputopo.analysis.causes.diagnose import diagnose
from gputopo.analysis.place.locality import SYS_MEANING
from gputopo.model import Topology
from gputopo.sources.host.nvml import probe
from gputopo.sources.reference import MACHINES, load_reference

EXPECTED_CODES = {
    "dgx1": {"cross-socket", "p2p-tns", "nvlink-summary"},
    "dgx2": {"cross-socket", "nvswitch-fabric"},
    "dgx-a100": {"cross-socket", "nvswitch-fabric"},
    "dgx-h100": {"cross-socket", "nvswitch-fabric"},
    "hgx-b200": {"cross-socket", "nvswitch-fabric"},
    "gb200-nvl72": {"cross-socket", "nvswitch-fabric"},
    "pcie-8gpu": {"cross-socket", "p2p-tns", "no-nvlink"},
    "two-socket-4gpu": {"cross-socket", "p2p-tns", "no-nvlink"},
    "workstation-2x4090": {"p2p-gns", "no-nvlink"},
}


def _by_code(topo: Topology) -> dict:
    findings = diagnose(topo)
    codes = [f.code for f in findings]
    assert len(codes) == len(set(codes)), codes  # grouped: one finding per code
    return {f.code: f for f in findings}


def test_every_machine_is_covered() -> None:
    assert set(EXPECTED_CODES) == set(MACHINES)


@pytest.mark.parametrize("machine", list(MACHINES))
def test_reference_machine_codes(machine: str) -> None:
    topo = load_reference(machine)
    before = json.dumps(topo.to_dict(), sort_keys=True)
    findings = _by_code(topo)
    assert set(findings) == EXPECTED_CODES[machine]
    assert json.dumps(topo.to_dict(), sort_keys=True) == before  # pure: the topology is untouched
    for f in findings.values():
        assert f.severity in ("info", "warning", "error") and f.message and f.gpus


def test_classic_two_socket_box_explains_the_tf_log() -> None:
    f = _by_code(two_socket_4())
    cross = f["cross-socket"]
    assert cross.severity == "warning" and cross.gpus == [0, 1, 2, 3]
    assert cross.message.startswith("GPUs 0,1 and 2,3 are on different CPU sockets (NUMA nodes 0 and 1)")
    assert "cross QPI through host memory" in cross.message
    assert "recommend" in cross.fix
    tns = f["p2p-tns"]
    assert "0-2, 0-3, 1-2, 1-3" in tns.message and "topology not supported" in tns.message
    assert tns.gpus == [0, 1, 2, 3]


def test_dgx1_nvlink_summary_and_cross_socket_pairs() -> None:
    f = _by_code(cube_mesh_8())
    summary = f["nvlink-summary"].message
    # The DGX-1 hybrid cube-mesh: 8 NV2 pairs, 8 NV1 pairs, 12 pairs over PCIe across sockets.
    assert summary == "NVLink 2.0, 6 links per GPU: 8 pairs NV2, 8 pairs NV1; the other 12 pairs use PCIe (SYS)"
    cross = f["cross-socket"].message
    assert "GPUs 0,1,2,3 and 4,5,6,7" in cross and "pairs without NVLink (0-5, 0-6" in cross and "and 4 more" in cross


@pytest.mark.parametrize(("machine", "word"), [("nvswitch-8-nv12", "NV12"), ("nvswitch-8-nv18", "NV18"), ("nvswitch-16-nv6", "NV6")])
def test_nvswitch_fabric(machine: str, word: str) -> None:
    f = _by_code(table_machine(machine))
    assert f["nvswitch-fabric"].message.startswith(f"NVSwitch fabric: every pair is {word} (NVLink ")
    # NVLink carries GPU-to-GPU traffic across sockets: only a hint about CPU locality.
    assert f["cross-socket"].severity == "info" and "numactl" in f["cross-socket"].fix


def test_nps4_groups_are_numa_nodes() -> None:
    cross = _by_code(load_reference("dgx-a100"))["cross-socket"]
    assert cross.message.startswith("GPU groups 0,1 | 2,3 | 4,5 | 6,7 are on different NUMA nodes (3, 1, 7 and 5)")
    assert "Infinity Fabric" in cross.message


def test_multi_host_rack_describes_one_host() -> None:
    cross = _by_code(load_reference("gb200-nvl72"))["cross-socket"]
    assert cross.message.startswith("On host tray00, GPUs 0,1 and 2,3 are on different CPU sockets")
    assert "other 17 hosts" in cross.message


def test_nvlinked_pairs_from_nvidia_smi_text_group_by_numa_node_or_cpus() -> None:
    """nvidia-smi shows only NV<n> for NVLinked pairs (no PCIe path): the NUMA sides come from the
    NUMA Affinity column, or from CPU Affinity where the capture has no NUMA column (DGX-1). Text
    never says sockets: SYS is "between NUMA nodes", which may be within one socket."""
    from gputopo.sources.smi.smi_text import parse_topo_matrix

    power9 = SHARED_FIXTURES / "topo" / "power9_4gpu_nv3_pairs_tabs.txt"
    cross = _by_code(parse_topo_matrix(power9.read_text(), power9.name))["cross-socket"]
    assert cross.message.startswith(f"GPUs 0,1 and 2,3 are on different NUMA nodes (0 and 8; {SYS_MEANING}; ")
    assert "different CPU sockets" not in cross.message and "QPI" not in cross.message
    dgx1 = SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"
    cross = _by_code(parse_topo_matrix(dgx1.read_text(), dgx1.name))["cross-socket"]
    assert cross.message.startswith(f"GPUs 0,1,2,3 and 4,5,6,7 are on different NUMA nodes ({SYS_MEANING}; ")
    # The text does not say whether they can peer: host memory only where they cannot.
    assert "(through host memory where they cannot peer)" in cross.message
    # 0-4, 1-5, 2-6, 3-7 cross the sockets over NVLink: only the other pairs go through the CPUs.
    assert "copies between the pairs without NVLink (0-5, 0-6" in cross.message


def test_nvlink_summary_counts_one_pcie_pair_in_the_singular_and_leaves_unknown_pairs_out() -> None:
    from gputopo.model import Gpu, make_link

    topo = Topology(
        gpus=[Gpu(index=i) for i in range(4)],
        links=[make_link(0, 1, "NV2"), make_link(0, 2, "NV2"), make_link(1, 2, "PHB"),
               make_link(0, 3, "UNKNOWN"), make_link(1, 3, "UNKNOWN"), make_link(2, 3, "UNKNOWN")],
    )
    assert _by_code(topo)["nvlink-summary"].message == "NVLink: 2 pairs NV2; the other pair uses PCIe (PHB)"


def test_all_nvlinked_capture_still_tells_the_numa_nodes_apart() -> None:
    """nvidia-smi text of an NVLink-everywhere box shows no SYS: the NUMA column alone says which
    GPUs share a NUMA node, which matters for the input pipeline (sockets: not known)."""
    from conftest import OWN_FIXTURES

    from gputopo.sources.smi.smi_text import parse_topo_matrix

    path = OWN_FIXTURES / "topo" / "spaces_nicn_legend_gpu_numa_id.txt"
    cross = _by_code(parse_topo_matrix(path.read_text(), path.name))["cross-socket"]
    assert cross.severity == "info"
    assert cross.message.startswith(f"GPUs 0,1 and 2,3 are on different NUMA nodes (0 and 1; {SYS_MEANING}; ")
    assert "use NVLink" in cross.message and "numactl" in cross.fix


def test_unknown_p2p_status_is_not_reported_as_no_p2p() -> None:
    topo = pcie_8()
    for link in topo.links:
        if (link.a, link.b) == (0, 1):
            link.p2p_read = link.p2p_write = "U"
    f = _by_code(topo)["p2p-u"]
    assert f.severity == "info"
    assert f.message.startswith("P2P status unknown between GPU pairs 0-1: U = unknown")
    assert "No P2P" not in f.message


def test_interconnect_named_or_generic() -> None:
    topo = pcie_8()
    assert "cross UPI" in _by_code(topo)["cross-socket"].message
    topo.socket_interconnect = None  # the live probe's case: sockets from sysfs, their link not named
    message = _by_code(topo)["cross-socket"].message
    assert "cross the link between CPU sockets (QPI/UPI on Intel, Infinity Fabric on AMD)" in message


def test_cross_socket_with_working_p2p_is_not_staged_through_host() -> None:
    topo = pcie_8()
    for link in topo.links:
        link.p2p_read = link.p2p_write = "ok"
    f = _by_code(topo)
    assert "p2p-tns" not in f
    assert "cross UPI, which" in f["cross-socket"].message and "host memory" not in f["cross-socket"].message


def test_pcie_width_and_generation_below_max() -> None:
    topo = pcie_8()
    topo.gpu(3).pcie_width_current = 8
    topo.gpu(2).pcie_gen_current = 1
    f = _by_code(topo)
    width = f["pcie-link-narrow"]
    assert (width.severity, width.gpus) == ("warning", [3])
    assert width.message.startswith("GPU 3 runs at PCIe x8 (max x16)")
    gen = f["pcie-link-slow-maybe-idle"]
    assert (gen.severity, gen.gpus) == ("info", [2])
    assert "GPU 2 runs at PCIe Gen1 (max Gen4)" in gen.message and "idle" in gen.message and "under load" in gen.message


def test_p2p_grouped_by_reason_word_with_dr_fix() -> None:
    topo = pcie_8()
    topo.link(0, 1).p2p_read = topo.link(0, 1).p2p_write = "DR"
    topo.link(2, 3).p2p_write = "CNS"
    f = _by_code(topo)
    dr = f["p2p-dr"]
    assert dr.gpus == [0, 1] and "0-1" in dr.message and "disabled by registry key" in dr.message
    assert "NVreg_RegistryDwords" in dr.fix
    assert f["p2p-cns"].gpus == [2, 3] and "chipset not supported" in f["p2p-cns"].message
    assert "0-1" not in f["p2p-tns"].message


def test_mig_on() -> None:
    topo = table_machine("nvswitch-8-nv12")
    topo.gpu(0).mig_mode = topo.gpu(1).mig_mode = True
    mig = _by_code(topo)["mig-enabled"]
    assert mig.gpus == [0, 1] and "no P2P or NCCL between MIG instances" in mig.message
    assert "nvidia-smi -i 0 -mig 0" in mig.fix


def test_mixed_models() -> None:
    topo = phb_pair()
    topo.gpu(1).name = "NVIDIA GeForce RTX 3090"
    mixed = _by_code(topo)["mixed-gpu-models"]
    assert "0: NVIDIA GeForce RTX 4090; 1: NVIDIA GeForce RTX 3090" in mixed.message
    assert "slowest" in mixed.message and mixed.gpus == [0, 1]


def test_fewer_active_nvlinks_found_through_the_probe() -> None:
    """A DGX H100 whose GPU 5 has two NVLinks down, seen through NVML (the fake) and diagnosed."""
    f = _by_code(probe(FakeNvml(table_machine("nvswitch-8-nv18"), inactive_links={5: 2})))
    down = f["nvlink-links-down"]
    assert down.gpus == [5] and "GPU 5 has 16" in down.message and "(the others 18)" in down.message
    assert "nvidia-smi nvlink --status -i 5" in down.fix
    fabric = f["nvswitch-fabric"].message
    assert fabric.startswith("NVSwitch fabric: every pair is NV18 except 0-5, 1-5, 2-5, 3-5, 4-5, 5-6, 5-7")
    assert "pairs with fewer links are slower" in fabric and "same bandwidth" not in fabric


def test_fewer_nvlinks_compares_within_one_model() -> None:
    topo = cube_mesh_8()
    for g in topo.gpus[4:]:
        g.name, g.nvlink_active_links = "Tesla P100-SXM2-16GB", 4
    f = _by_code(topo)
    assert "nvlink-links-down" not in f
    assert "mixed-gpu-models" in f


def test_small_and_empty_topologies() -> None:
    assert diagnose(Topology()) == []
    one = phb_pair()
    one.gpus, one.links = one.gpus[:1], []
    assert diagnose(one) == []


def test_unknown_links_are_not_misread() -> None:
    topo = two_socket_4()
    for link in topo.links:
        link.type, link.pcie_path, link.p2p_read, link.p2p_write = "UNKNOWN", None, None, None
    # Unknown link types say nothing about NVLink either way (a TF log alone): no "no-nvlink" claim.
    assert set(_by_code(topo)) == set()


@pytest.mark.skipif(importlib.util.find_spec("gputopo.analysis.causes.tf_crosscheck") is None, reason="tf_crosscheck not there yet")
def test_tf_view_adds_tf_crosscheck_findings() -> None:
    from gputopo.analysis.causes.tf_crosscheck import tf_findings
    from gputopo.sources.tf.tflog import read_tf_log

    topo = two_socket_4()
    topo.tf = read_tf_log(str(SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log"))
    tf_codes = [f.code for f in tf_findings(copy.deepcopy(topo))]
    assert tf_codes  # the log says GPUs 0,1 and 2,3 cannot peer: there is something to say
    codes = [f.code for f in diagnose(topo)]
    assert codes[: len(codes) - len(tf_codes)] == [f.code for f in diagnose(two_socket_4())]
    assert codes[len(codes) - len(tf_codes):] == tf_codes


def test_tf_view_without_tf_crosscheck_module_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    topo = two_socket_4()
    plain = [f.code for f in diagnose(topo)]
    from gputopo.model import TfView

    topo.tf = TfView()
    monkeypatch.setattr(diagnose_module.importlib.util, "find_spec", lambda name: None)
    assert [f.code for f in diagnose(topo)] == plain


def test_scan_json_carries_the_findings(cli) -> None:
    result = cli("scan", "--machine", "two-socket-4gpu", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    codes = {d["code"] for d in data["diagnostics"]}
    assert {"cross-socket", "p2p-tns", "no-nvlink"} <= codes
    assert all({"severity", "code", "message"} <= set(d) for d in data["diagnostics"])


# --- NUMA nodes are not sockets; VMs; NVSwitch from text (issue 10) ------------------------------

CORPUS_TOPO = SHARED_FIXTURES.parent / "corpus" / "topo"


def _corpus_codes(name: str) -> dict:
    from gputopo.sources.smi.smi_text import parse_topo_matrix

    return _by_code(parse_topo_matrix((CORPUS_TOPO / name).read_text(), name))


def test_epyc_nps4_text_says_numa_nodes_not_qpi() -> None:
    """DGX A100 in NPS4: GPU NUMA nodes 3,3,1,1,7,7,5,5. Nodes 1 and 3 are one socket; the text
    cannot tell, so no 'QPI/UPI' and no 'different CPU sockets'."""
    cross = _corpus_codes("dgx_a100_8gpu_nv12_epyc_nps4_12nic_mlx5.txt")["cross-socket"]
    assert cross.message.startswith(
        f"GPU groups 0,1 | 2,3 | 4,5 | 6,7 are on different NUMA nodes (3, 1, 7 and 5; {SYS_MEANING}; "
        "which it is here, the source does not say)")
    rest = cross.message.replace(SYS_MEANING, "")
    assert "QPI" not in rest and "UPI" not in rest and "socket" not in rest


def test_one_gpu_per_numa_node_has_no_group_to_train_within() -> None:
    """8 RTX 4090s on the 8 NUMA nodes of an NPS4 pair of EPYCs: every pair crosses, so no "train
    within one group" where each group is one GPU."""
    cross = _corpus_codes("blog_8x_rtx4090_all_sys_nps4_eight_numa_4nic.txt")["cross-socket"]
    assert cross.message.startswith("GPU groups 0 | 1 | 2 | 3 | 4 | 5 | 6 | 7 are on different NUMA nodes")
    assert "within one group" not in cross.fix and "no two GPUs share a NUMA node" in cross.fix
    assert "train on GPUs within one group" in _by_code(two_socket_4())["cross-socket"].fix


def test_nps4_reference_knows_its_sockets() -> None:
    cross = _by_code(load_reference("dgx-a100"))["cross-socket"]
    assert "different NUMA nodes (3, 1, 7 and 5) on CPU sockets 0, 0, 1 and 1" in cross.message


def test_numa_nodes_of_one_known_socket_are_not_called_sockets() -> None:
    """Intel SNC / EPYC NPS2: two NUMA nodes in one socket, which the source (sysfs) knows."""
    topo = two_socket_4()
    for gpu in topo.gpus:
        gpu.socket = 0
    cross = _by_code(topo)["cross-socket"]
    assert cross.message.startswith("GPUs 0,1 and 2,3 are on different NUMA nodes (0 and 1) of one CPU socket (0): ")
    assert "QPI" in cross.message  # the machine's interconnect, as the source names it
    topo.socket_interconnect = None
    assert "cross the link between NUMA nodes through host memory" in _by_code(topo)["cross-socket"].message


@pytest.mark.parametrize("name", ["vm_4xa10_all_sys_one_cpuset_spaces.txt", "azure_vm_4xm60_all_soc_one_cpuset.txt"])
def test_virtual_machine_is_called_what_it_is(name: str) -> None:
    f = _corpus_codes(name)
    vm = f["virtual-machine"]
    assert vm.message.startswith(
        "this looks like a virtual machine: nvidia-smi shows the hypervisor's virtual PCI topology, not the host's (all 4 GPUs share CPUs ")
    assert "SYS (SOC) between every pair" in vm.message and "bench-p2p" in vm.fix
    assert "cross-socket" not in f  # no "different NUMA nodes" for the flat virtual view


def test_restricted_cpuset_on_real_hardware_is_not_a_vm() -> None:
    """K80 job: every GPU shows the job's CPUs 0-3, yet PIX pairs and SOC between them."""
    f = _corpus_codes("k80_4gpu_soc_header_and_legend_unindented.txt")
    assert "virtual-machine" not in f and f["cross-socket"].message.startswith("GPUs 0,1 and 2,3 are on different CPU sockets")


def test_nvswitch_from_text_is_inferred_and_said() -> None:
    f = _corpus_codes("h100_8gpu_nv18_compact_spacing.txt")
    assert f["nvswitch-fabric"].message.startswith(
        "NVSwitch fabric (inferred: every pair shows NV18, the NVSwitch pattern; the text does not name the switches): "
        "every pair is NV18")
    from gputopo.sources.smi.smi_text import parse_topo_matrix

    gb200 = _corpus_codes("gb200_4gpu_nv18_grace_numa_sets_8nic.txt")  # NV18 to 3 peers: 54 links > 18
    assert gb200["nvswitch-fabric"].message.startswith("NVSwitch fabric (inferred: ")
    nv6 = parse_topo_matrix("\tGPU0\tGPU1\tGPU2\nGPU0\t X \tNV6\tNV6\nGPU1\tNV6\t X \tNV6\nGPU2\tNV6\tNV6\t X \n", "nv6")
    assert "nvswitch-fabric" not in {f.code for f in diagnose(nv6)}  # 12 links each: direct or switched
    assert {f.code: f for f in diagnose(nv6)}["nvlink-summary"].message == (
        "NVLink: 3 pairs NV6; whether through NVSwitch or direct, the source does not say")


def test_a_vm_with_one_gpu_is_not_told_to_measure_gpu_to_gpu_copies():
    """The real one-GPU H200 microVM's archive: its -q says Pass-Through, and there is no pair."""
    from conftest import REPO

    from gputopo.sources.registry import read_file

    topology = read_file(str(REPO / "tests/fixtures/hardware/2026-11-26-h200-firecracker-run2/gather.tar.gz"))
    [vm] = [f for f in diagnose(topology) if f.code == "virtual-machine"]
    assert vm.message.endswith("with one GPU: no GPU-to-GPU path is involved") and vm.fix is None


def test_no_p2p_says_nccl_uses_shm_there_not_that_it_stops():
    """NCCL takes CUDA's "cannot peer" as "use SHM"; the IPC failure is for pairs it does try (issue 32)."""
    tns = _by_code(two_socket_4())["p2p-tns"].message
    assert "NCCL uses its SHM transport there (it does not try P2P where CUDA says a pair cannot peer; SYS is " \
           "also beyond NCCL's default P2P level on most hosts)" in tns
    assert "failed to open CUDA IPC handle" not in tns and "NCCL stops" not in tns
    gns = _by_code(phb_pair())["p2p-gns"].message
    assert "NCCL uses its SHM transport there" in gns and "PHB is also beyond" in gns


def test_unknown_p2p_within_nccls_level_names_the_ipc_failure_only_there():
    from linktable import link_table

    topology = link_table([["X", "PIX", "SYS"], ["PIX", "X", "SYS"], ["SYS", "SYS", "X"]], numa=[0, 0, 1], p2p="U")
    unknown = _by_code(topology)["p2p-u"].message
    assert "where CUDA says such a pair can peer NCCL tries P2P" in unknown
    assert "'failed to open CUDA IPC handle'" in unknown and "over SYS NCCL uses its SHM transport" in unknown
    beyond_only = link_table([["X", "SYS"], ["SYS", "X"]], numa=[0, 1], p2p="U")
    assert "IPC" not in _by_code(beyond_only)["p2p-u"].message


def test_crossing_pairs_joined_by_nvswitch_are_not_said_to_cross_the_numa_link():
    """Newcomer review: on a B200 whose GPU 2 lost its NVLinks, pairs 0-4, 1-5 ... are NV18 through
    NVSwitch: only GPU 2's crossing pairs copy over the link between NUMA nodes."""
    from conftest import OWN_FIXTURES

    from gputopo.analysis import with_findings
    from gputopo.sources.registry import read_file

    path = OWN_FIXTURES / "corpus/topo/vllm16336_8x_b200_gpu2_no_nvlink_rows_only_cut_after_gpu5.txt"
    (finding,) = [f for f in with_findings(read_file(str(path))).diagnostics if f.code == "cross-socket"]
    assert "copies between the pairs without NVLink (2-4, 2-5, 2-6, 2-7)" in finding.message


def test_gpus_a_cut_paste_does_not_place_are_one_group_said_as_unknown_and_mp_hedges_nvlink():
    """DeepEP#60: `topo -mp` cut after row GPU3: 0-3 NODE in NUMA 0, SYS to 4-7, pairs among 4-7 and their
    NUMA unknown. They are not 'on different NUMA nodes' from each other, and `-mp` does not rule out NVLink."""
    from conftest import OWN_FIXTURES

    from gputopo.sources.smi.smi_text import parse_topo_matrix

    name = "deepep60_8gpu_topo_mp_node_sys_14nic_nic11_shift_rows_cut_after_gpu3.txt"
    topology = parse_topo_matrix((OWN_FIXTURES / "corpus" / "topo" / name).read_text(), name)
    (cross,) = [f for f in diagnose(topology) if f.code == "cross-socket"]
    assert cross.message.startswith("GPUs 0,1,2,3 and 4,5,6,7 (whether these share a NUMA node, the source does not say)")
    assert "| 4 | 5" not in cross.message
    assert cross.message.endswith("(unless NVLink joins them: `nvidia-smi topo -mp` does not show NVLink)")


def test_soc_pairs_are_called_different_sockets_not_hedged_numa_nodes() -> None:
    """Review 3: a Minsky's SOC matrix got "different NUMA nodes (...; which it is here, the source does
    not say)" beside the soc-between-sockets note reading the same pairs as on different CPU sockets."""
    f = _corpus_codes("power8_minsky_4gpu_nv2_soc_legend.txt")
    message = f["cross-socket"].message
    assert message.startswith("GPUs 0,1 and 2,3 are on different CPU sockets") and "does not say" not in message
    assert "QPI" not in message  # the text names no interconnect (a POWER8 has X-bus)


def test_a_log_where_nccl_chose_p2p_between_gpus_that_cannot_peer_does_not_say_it_uses_shm() -> None:
    """horovod#785 (NCCL 2.3, two processes): NCCL chose P2P/IPC, CUDA refused (64): p2p-ns must not say
    NCCL 'does not try P2P' there, which the same log shows it did."""
    from gputopo.sources.tools import nccl_log

    path = SHARED_FIXTURES.parent / "corpus" / "nccl_log" / "horovod785_nccl23_two_processes_ring_p2p_ipc_open_failed.log"
    f = _by_code(nccl_log.read(path.read_text(), path.name))
    assert "does not try P2P" not in f["p2p-ns"].message and "NCCL choosing P2P between 0-1" in f["p2p-ns"].message
