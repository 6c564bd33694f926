"""TensorFlow's view against the topology: join by PCI bus id, order, why pairs cannot peer, groups."""

from __future__ import annotations

import io
import re

from conftest import OWN_FIXTURES, SHARED_FIXTURES, TF_LOG_FIXTURES
from linktable import cube_mesh_8, two_socket_4
from rich.console import Console

from gputopo.analysis.causes.tf_crosscheck import peer_group_summary, peer_groups, tf_findings
from gputopo.model import TfView
from gputopo.sources.smi.smi_text import parse_topo_matrix
from gputopo.sources.tf.tflog import ERA_NO_GPU, parse_tf_log, topology_from_tf_view
from gputopo.views.tfview import render_tf_view

SUMMARY_4GPU = "GPUs 0,1 and 2,3 can peer; the cross pairs cannot; keep work that needs fast exchange within {0,1} or {2,3}"


def _shared_log(prefix: str) -> str:
    return next(p for p in TF_LOG_FIXTURES if p.name.startswith(prefix)).read_text()


def _created(ordinal: int, bus_id: str, name: str = "Tesla V100-SXM2-16GB") -> str:
    return (
        f"2024-01-01 00:00:00.000000: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1616] Created device "
        f"/job:localhost/replica:0/task:0/device:GPU:{ordinal} with 15000 MB memory:  -> device: {ordinal}, "
        f"name: {name}, pci bus id: {bus_id}, compute capability: 7.0\n"
    )


def _by_code(findings):
    return {f.code: f for f in findings}


def test_the_classic_4gpu_log_alone_says_it_in_one_glance():
    topology = topology_from_tf_view(parse_tf_log(_shared_log("tf0_"), "train.log"))
    findings = _by_code(tf_findings(topology))
    assert SUMMARY_4GPU in findings["tf-peer-groups"].message
    assert findings["tf-peer-groups"].gpus == [0, 1, 2, 3]
    assert "different CPU sockets" in findings["tf-peer-groups"].fix


def test_peer_groups_are_connected_cliques():
    view = parse_tf_log(_shared_log("tf0_"), "log")
    groups = peer_groups(view)
    assert groups.groups == [[0, 1], [2, 3]] and groups.partial == []
    assert groups.cross_denied == [(0, 2), (0, 3), (1, 2), (1, 3)] and groups.unknown == []
    # A chain 0-1-2 where 0 and 2 cannot peer is one component but not a clique.
    chain = TfView(peer=[[True, True, False], [True, True, True], [False, True, True]])
    assert peer_groups(chain).partial == [[0, 1, 2]]
    assert "not every pair within {0,1,2} can peer: 0-2 cannot" in peer_group_summary(chain)
    everyone = TfView(peer=[[True, True], [True, True]])
    assert peer_group_summary(everyone) == "both GPUs (0,1) can peer with each other"  # never "all 2"
    assert peer_group_summary(TfView(peer=[[True, None], [None, True]])) is None


def test_cut_log_summary_names_the_pairs_it_cannot_tell():
    summary = peer_group_summary(parse_tf_log(_shared_log("tf1_"), "log"))
    assert summary.startswith("GPUs 0,1 can peer; the cross pairs cannot")
    assert "(the log does not say for 2-3)" in summary


def test_cannot_peer_across_sockets_is_explained_by_the_topology():
    topology = two_socket_4()
    topology.tf = parse_tf_log(_shared_log("tf0_"), "train.log")
    findings = _by_code(tf_findings(topology))
    cross = findings["tf-cannot-peer-cross-socket"]
    assert cross.gpus == [0, 1, 2, 3] and "0-2, 0-3, 1-2, 1-3" in cross.message
    assert "QPI/UPI" in cross.message and "TNS" in cross.message
    assert "tf-join-assumed" in findings  # the old log has no PCI bus ids
    assert "Created device ... pci bus id" in findings["tf-join-assumed"].fix
    assert "tf-peers-across-sockets" not in findings


def test_reasons_from_p2p_words_and_pcie_switches():
    # PIX pairs 0-1 and 2-3, SYS across (SOC), no P2P words: TF failing on a PIX pair points at ACS.
    topology = parse_topo_matrix((OWN_FIXTURES / "topo" / "old_soc_legend_4gpu.txt").read_text(), "topo.txt")
    topology.tf = TfView(
        peer=[[True, False, True, None], [False, True, None, None], [True, None, True, None], [None, None, None, True]]
    )
    findings = _by_code(tf_findings(topology))
    assert "ACS" in findings["tf-cannot-peer-acs"].message and "ACSCtl" in findings["tf-cannot-peer-acs"].fix
    assert findings["tf-cannot-peer-acs"].gpus == [0, 1]
    assert findings["tf-peers-across-sockets"].gpus == [0, 2]
    # With the -p2p matrix, 2-3 is DR: disabled by the driver.
    with_p2p = parse_topo_matrix((OWN_FIXTURES / "topo" / "with_p2p_matrices.txt").read_text(), "p2p.txt")
    with_p2p.tf = TfView(peer=[[True, True, None, None], [True, True, None, None], [None, None, True, False],
                               [None, None, False, True]])
    findings = _by_code(tf_findings(with_p2p))
    assert "disabled by a driver setting" in findings["tf-cannot-peer-disabled"].message
    assert "DR" in findings["tf-cannot-peer-disabled"].message
    assert findings["tf-cannot-peer-disabled"].gpus == [2, 3]


# The PCI bus ids of a DGX-1's GPUs, in nvidia-smi order.
DGX1_BUS_IDS = ["0000:06:00.0", "0000:07:00.0", "0000:0a:00.0", "0000:0b:00.0",
                "0000:85:00.0", "0000:86:00.0", "0000:89:00.0", "0000:8a:00.0"]  # fmt: skip


def test_join_by_pci_bus_id_detects_a_different_order():
    topology = cube_mesh_8(gpu={"pci_bus_id": DGX1_BUS_IDS})
    log = _created(0, "0000:85:00.0") + _created(1, "0000:06:00.0") + _created(2, "0000:07:00.0")
    topology.tf = parse_tf_log(log, "train.log")
    findings = _by_code(tf_findings(topology))
    assert [d.nvml_index for d in topology.tf.devices] == [4, 0, 1]
    order = findings["tf-order-differs"]
    assert "TF GPU:0 = GPU 4" in order.message and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in order.fix
    assert order.gpus == [0, 1, 4]


def test_join_with_cuda_visible_devices_subset_is_renumbered_not_reordered():
    topology = cube_mesh_8(gpu={"pci_bus_id": DGX1_BUS_IDS})
    topology.tf = parse_tf_log(_created(0, "0000:0a:00.0") + _created(1, "0000:0b:00.0"), "train.log")
    findings = _by_code(tf_findings(topology))
    assert "tf-order-differs" not in findings
    assert "TF GPU:0 = GPU 2" in findings["tf-ordinals-renumbered"].message
    assert "tf-no-peer-matrix" in findings  # TF >= 2.5 log without the matrix


def test_peer_pairs_are_reported_in_both_numberings_when_they_differ():
    topology = cube_mesh_8(gpu={"pci_bus_id": DGX1_BUS_IDS})
    log = (
        _created(0, "0000:86:00.0") + _created(1, "0000:06:00.0")
        + "Device interconnect StreamExecutor with strength 1 edge matrix:\n     0 1 \n0:   N N \n1:   N N \n"
    )
    topology.tf = parse_tf_log(log, "train.log")
    finding = _by_code(tf_findings(topology))["tf-cannot-peer-cross-socket"]
    assert "TF GPU:0-GPU:1 (nvidia-smi 5-0)" in finding.message and finding.gpus == [0, 5]


def test_log_from_another_machine_is_flagged():
    topology = two_socket_4()
    topology.tf = parse_tf_log(_shared_log("tf2_"), "train.log")
    findings = _by_code(tf_findings(topology))
    assert "another machine" in findings["tf-gpu-not-in-topology"].message
    assert all(d.nvml_index is None for d in topology.tf.devices)


def test_tf2_log_without_matrix_says_how_to_get_it():
    topology = topology_from_tf_view(parse_tf_log(_shared_log("tf2_"), "train.log"))
    finding = _by_code(tf_findings(topology))["tf-no-peer-matrix"]
    assert "TF_CPP_MAX_VLOG_LEVEL=1" in finding.fix and "2.5" in finding.message
    assert "tf-order-differs" not in _by_code(tf_findings(topology))  # its bus ids are in order


def test_log_alone_with_bus_ids_out_of_pci_order():
    log = (OWN_FIXTURES / "tf_logs" / "tf15_edge_matrix_visible_order_differs.log").read_text()
    findings = _by_code(tf_findings(topology_from_tf_view(parse_tf_log(log, "log"))))
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID" in findings["tf-order-differs"].fix
    assert "GPU 1 cannot peer with any other" in findings["tf-peer-groups"].message


def test_no_gpu_view_and_no_view():
    topology = topology_from_tf_view(TfView(devices=[], peer=[], era=ERA_NO_GPU, visible_ordinals=[]))
    assert [f.code for f in tf_findings(topology)] == ["tf-no-gpu"]
    assert tf_findings(cube_mesh_8(gpu={"pci_bus_id": DGX1_BUS_IDS})) == []


def test_log_notes_become_findings():
    topology = topology_from_tf_view(parse_tf_log(_shared_log("tf1_"), "log"))
    assert "tf-log-cut" in _by_code(tf_findings(topology))


def test_render_tf_view_colours_the_peer_matrix():
    topology = two_socket_4()
    topology.tf = parse_tf_log(_shared_log("tf0_"), "train.log")
    tf_findings(topology)
    console = Console(file=io.StringIO(), record=True, width=140, force_terminal=True, color_system="standard")
    render_tf_view(topology, console)
    text = console.export_text(clear=False)
    assert "GPU:3" in text and SUMMARY_4GPU in " ".join(text.split())
    styled = console.export_text(styles=True)
    assert re.search(r"\x1b\[1;32m\s*Y", styled) and re.search(r"\x1b\[1;31m\s*N", styled)
    assert not re.search(r"\x1b\[1;32m\s*N", styled)  # N is never green
    empty = Console(file=io.StringIO(), record=True, width=100)
    render_tf_view(topology_from_tf_view(TfView(era=ERA_NO_GPU, visible_ordinals=[])), empty)
    assert "sees no GPU" in empty.export_text()


CORPUS = OWN_FIXTURES / "corpus"


def _text_with_log(topo_path, log_text: str):
    topology = parse_topo_matrix(topo_path.read_text(), topo_path.name)
    topology.tf = parse_tf_log(log_text, "train.log")
    return _by_code(tf_findings(topology))


def _without_bus_ids(log_text: str) -> str:
    return "".join(line for line in log_text.splitlines(keepends=True) if not re.search("pciBusID|pci bus id", line))


def test_a_log_with_bus_ids_joins_by_ordinal_where_the_topology_has_none():
    """The log's bus ids cannot decide against nvidia-smi text without them: join by ordinal, never
    silently not at all (the same log without its bus-id lines did join)."""
    shared = SHARED_FIXTURES / "topo"
    log = (CORPUS / "tf_logs" / "tf15_edge_matrix_two_islands_8gpu_1080ti.log").read_text()
    findings = _text_with_log(shared / "pcie_8gpu_dual_socket_pix_node_sys.txt", log)
    assert "the topology has no PCI bus ids" in findings["tf-join-assumed"].message
    fix = findings["tf-join-assumed"].fix  # the input to give again is the topology, not the log
    assert "Created device" not in fix and "the topology with bus ids" in fix
    assert "tf-cannot-peer-cross-socket" in findings and "tf-gpu-not-in-topology" not in findings
    log = (CORPUS / "tf_logs" / "tf12_readme_two_startups_4gpu.log").read_text()
    findings = _text_with_log(shared / "dgx1_v100_8gpu_mlx5.txt", log)
    impossible = findings["tf-join-impossible"]
    assert "TensorFlow's 4 GPUs cannot be matched to the 8 GPUs" in impossible.message
    assert "the topology has no PCI bus ids" in impossible.message and "another machine" in impossible.message


def test_cannot_peer_over_sys_claims_sockets_only_where_the_source_knows_them():
    log = _without_bus_ids((CORPUS / "tf_logs" / "tf12_peer_not_supported_2gpu_1080ti.log").read_text())
    numa = _text_with_log(CORPUS / "topo" / "della_a100_pcie_2gpu_sys_two_numa_mlx5.txt", log)
    cross = numa["tf-cannot-peer-cross-socket"]
    assert "different NUMA nodes (SYS: the link between NUMA nodes" in cross.message
    assert "which it is here, the source does not say" in cross.message
    assert "QPI/UPI" not in cross.message and "CPU sockets (SYS)" not in cross.message
    assert "one socket" not in cross.fix
    # A VM's virtual topology (every GPU on NUMA node 0, SYS everywhere) cannot tell why at all.
    log = _without_bus_ids(_shared_log("tf0_"))
    vm = _text_with_log(CORPUS / "topo" / "vm_4xa10_all_sys_one_cpuset_spaces.txt", log)
    cross, across = vm["tf-cannot-peer-cross-socket"], vm["tf-peers-across-sockets"]
    assert "virtual topology cannot tell" in cross.message and "virtual topology cannot tell" in across.message
    assert not any("QPI/UPI" in f.message or "CPU sockets" in f.message for f in (cross, across))
