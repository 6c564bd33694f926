"""Several hosts side by side: --host, snapshots per host, the cluster model and its JSON, the
mismatch findings, `scan --from a --from b` and its one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, SHARED_FIXTURES, assert_one_error_line
from linktable import CUBE_MESH_8_NICS, NVSWITCH_8_NICS, cube_mesh_8, nvswitch, pcie_8, two_socket_4

from gputopo.analysis.cluster import cluster_findings, cluster_with_findings, host_summary, link_shape
from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.model.cluster import CLUSTER_SCHEMA, Cluster
from gputopo.sources import TopologyRequest, checked_host_name, resolve, resolve_hosts

CORPUS = OWN_FIXTURES / "corpus" / "topo"
H100_9NIC = str(CORPUS / "h100_8gpu_nv18_9nic_bond_ansi_escape_stripped.txt")
H100_12NIC = str(CORPUS / "dgx_h100_8gpu_nv18_12nic_truncated_after_nic5.txt")
DGX1_TEXT = str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt")


def h100_like(host: str) -> Topology:
    """Eight H100s on NVSwitch with a NIC each, as host ``host``."""
    return nvswitch(8, name="NVIDIA H100 80GB HBM3", nics=NVSWITCH_8_NICS, host=host)

def save_host(cli, tmp_path: Path, name: str, *source: str) -> str:
    """``gputopo scan SOURCE --host NAME --save tmp/NAME.json``; returns the path."""
    path = str(tmp_path / f"{name}.json")
    result = cli("scan", *source, "--host", name, "--save", path, "--json")
    assert result.exit_code == 0, result.output
    return path


def codes(findings) -> list[str]:
    return [f.code for f in findings]


# --- --host and snapshots that know their host --------------------------------------------------


@pytest.mark.parametrize("source", [["--from", DGX1_TEXT], ["--machine", "dgx1"]], ids=["text", "reference"])
def test_host_names_text_and_reference_sources_and_the_snapshot_keeps_it(cli, tmp_path, source):
    path = save_host(cli, tmp_path, "node1", *source)
    saved = json.loads(Path(path).read_text())
    assert saved["host"] == "node1"
    assert resolve(TopologyRequest(from_files=(path,))).host == "node1"


def test_host_from_a_tf_log_source():
    log = next((SHARED_FIXTURES / "tf_logs").glob("*.log"))
    topo = resolve(TopologyRequest(from_files=(DGX1_TEXT,), tf_log=str(log), host="gpu-07.cluster"))
    assert topo.host == "gpu-07.cluster"


@pytest.mark.parametrize("name", ["a b", "node\x1b[31m", "tab\there", "", "x" * 254, "new\nline"])
def test_bad_host_names_are_refused(name):
    with pytest.raises(InputError) as info:
        checked_host_name(name)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ["node1", "gpu-07.cluster.example.org", "10.0.0.7"])
def test_good_host_names_pass(name):
    assert checked_host_name(name) == name


def test_scan_refuses_a_bad_host_in_one_line(cli):
    line = assert_one_error_line(cli("scan", "--machine", "dgx1", "--host", "node 1"))
    assert "--host" in line


def test_recommend_and_report_take_host(cli, tmp_path):
    result = cli("recommend", "--machine", "dgx1", "--host", "node1", "--gpus", "2", "--format", "env")
    assert result.exit_code == 0, result.output
    result = cli("report", "--machine", "dgx1", "--host", "node1", "-o", str(tmp_path / "r.html"))
    assert result.exit_code == 0, result.output


# --- loading one snapshot per host ----------------------------------------------------------------


def test_the_same_host_twice_is_one_host_merged(cli, tmp_path):
    a = save_host(cli, tmp_path, "node1", "--machine", "dgx1")
    b = str(tmp_path / "copy.json")
    Path(b).write_text(Path(a).read_text())
    result = cli("scan", "--from", a, "--from", b, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["schema"] == "gputopo.topology/1" and data["host"] == "node1" and len(data["gpus"]) == 8
    assert data["disagreements"] == [] and "sources-disagree" not in {f["code"] for f in data["diagnostics"]}
    assert data["source_detail"] == f"{a} + {b}"


def test_a_file_without_a_host_among_several_hosts_is_refused_with_the_way_out(cli, tmp_path):
    a = save_host(cli, tmp_path, "node1", "--machine", "dgx1")
    b = save_host(cli, tmp_path, "node2", "--machine", "dgx1")
    line = assert_one_error_line(cli("scan", "--from", a, "--from", b, "--from", DGX1_TEXT))
    assert "does not name its host" in line and "--host NAME --save" in line


def test_a_file_without_a_host_joins_the_one_named_host(cli, tmp_path):
    """A host's snapshot and a text of the same box: one host; where they differ it is said."""
    a = save_host(cli, tmp_path, "node1", "--machine", "dgx1")
    data = json.loads(cli("scan", "--from", a, "--from", DGX1_TEXT, "--json").stdout)
    assert data["host"] == "node1" and len(data["gpus"]) == 8
    # the reference DGX-1 and the real capture disagree on nothing about GPU-GPU links
    assert not [d for d in data["disagreements"] if d["subject"].endswith(" type")]


def test_a_snapshot_host_with_control_characters_is_refused(cli, tmp_path):
    a = save_host(cli, tmp_path, "node1", "--machine", "dgx1")
    data = json.loads(Path(a).read_text())
    data["host"] = "evil\x1b]0;title\x07"
    b = tmp_path / "b.json"
    b.write_text(json.dumps(data))
    line = assert_one_error_line(cli("scan", "--from", a, "--from", str(b)))
    assert "host" in line and "\x1b" not in line


@pytest.mark.parametrize("extra", [["--host", "x"], ["--machine", "dgx1"], ["--save", "out.json"], ["--svg", "o.svg"],
                                   ["--tf-log", "x.log"]])
def test_one_topology_options_are_refused_with_several_from(cli, tmp_path, extra):
    a = save_host(cli, tmp_path, "node1", "--machine", "dgx1")
    b = save_host(cli, tmp_path, "node2", "--machine", "dgx1")
    line = assert_one_error_line(cli("scan", "--from", a, "--from", b, *extra))
    assert extra[0] in line


def test_standard_input_is_not_one_of_several_hosts(cli, tmp_path):
    a = save_host(cli, tmp_path, "node1", "--machine", "dgx1")
    b = save_host(cli, tmp_path, "node2", "--machine", "dgx1")
    line = assert_one_error_line(cli("scan", "--from", "-", "--from", b, input=Path(a).read_text()))
    assert "standard input" in line


# --- what each host is in a few words -------------------------------------------------------------


def test_host_summaries():
    h100 = resolve(TopologyRequest(from_files=(H100_9NIC,), host="node1"))
    summary = host_summary(h100, "node1")
    assert summary.links == "NV18 all-to-all, 2 NUMA nodes"
    assert summary.gpus == "8 GPUs (model ?)" and summary.versions == "?"
    assert summary.nics == "one NIC per GPU at PXB (NIC0 (mlx5_10) ... NIC7 (mlx5_17))"
    dgx1 = cube_mesh_8(nics=CUBE_MESH_8_NICS)
    assert link_shape(dgx1) == "NVLink NV1/NV2 on 16 of 28 pairs, else SYS, 2 NUMA nodes"
    assert host_summary(dgx1, "n").gpus.startswith("8x ")
    assert host_summary(dgx1, "n").nics == "mlx5_0 PIX: GPUs 0,1; mlx5_1 PIX: GPUs 2,3; mlx5_2 PIX: GPUs 4,5; mlx5_3 PIX: GPUs 6,7"
    text = resolve(TopologyRequest(from_files=(DGX1_TEXT,)))
    assert host_summary(text, "n").nics == "mlx5_0 NODE: GPUs 0,1; mlx5_0 PIX: GPUs 2,3; mlx5_0 SYS: GPUs 4,5,6,7"
    assert link_shape(pcie_8()).startswith("PCIe (PIX/")


# --- findings about the hosts together -----------------------------------------------------------


def test_identical_hosts_have_no_cluster_findings():
    hosts = [h100_like(f"node{k}") for k in (1, 2)]
    assert cluster_findings(Cluster(hosts)) == []


def test_different_gpu_models_counts_and_wiring_are_found():
    cluster = Cluster([cube_mesh_8(nics=CUBE_MESH_8_NICS, name="Tesla V100-SXM2-16GB", host="v100"), h100_like("h100"),
                       two_socket_4(name="GeForce GTX TITAN X", host="small")])
    findings = cluster_findings(cluster)
    assert codes(findings)[:3] == ["cluster-gpu-count", "cluster-gpu-model", "cluster-link-shape"]
    count = findings[0]
    assert count.message == "the hosts have different GPU counts (v100, h100: 8 GPUs; small: 4 GPUs)"
    assert "v100" in findings[1].message and "h100" in findings[1].message
    assert "cluster-no-nic" in codes(findings)  # the 4-GPU box shows no NIC


def test_driver_and_cuda_versions_are_compared_where_known():
    a, b = (h100_like(h) for h in ("a", "b"))
    a.driver_version, a.cuda_driver_version = "535.104.05", "12.2"
    b.driver_version, b.cuda_driver_version = "550.54.15", "12.4"
    found = codes(cluster_findings(Cluster([a, b])))
    assert "cluster-driver" in found and "cluster-cuda" in found
    b.driver_version = b.cuda_driver_version = None  # not shown: nothing to compare
    assert cluster_findings(Cluster([a, b])) == []


def test_hosts_whose_gpus_have_only_far_nics():
    far = resolve(TopologyRequest(from_files=(DGX1_TEXT,), host="far"))
    for nic_link in far.nic_links:
        nic_link.type = "SYS"
    near = resolve(TopologyRequest(from_files=(DGX1_TEXT,), host="near"))
    findings = cluster_findings(Cluster([near, far]))
    assert codes(findings) == ["cluster-nic-far"] and findings[0].message.startswith("every GPU on far ")
    far.nic_links = []
    assert codes(cluster_findings(Cluster([near, far]))) == ["cluster-nic-paths-unknown"]


# --- the cluster JSON and `scan --from a --from b` -------------------------------------------------


def test_cluster_json_round_trip():
    cluster = cluster_with_findings([cube_mesh_8(nics=CUBE_MESH_8_NICS, host="a"), two_socket_4(host="b")])
    data = json.loads(json.dumps(cluster.to_dict()))
    assert data["schema"] == CLUSTER_SCHEMA == "gputopo.cluster/1"
    assert [h["host"] for h in data["hosts"]] == ["a", "b"] and data["diagnostics"]
    again = Cluster.from_dict(data)
    assert again.to_dict() == cluster.to_dict()
    with pytest.raises(ValueError, match="schema"):
        Cluster.from_dict({"schema": "nope"})
    with pytest.raises(ValueError, match=r"hosts\[0\]"):
        Cluster.from_dict({"schema": CLUSTER_SCHEMA, "hosts": [{"schema": "x"}]})


def test_scan_several_from_shows_the_hosts_side_by_side(cli, tmp_path):
    a = save_host(cli, tmp_path, "node1", "--from", H100_9NIC)
    b = save_host(cli, tmp_path, "node2", "--machine", "dgx1")
    result = cli("scan", "--from", a, "--from", b)
    assert result.exit_code == 0, result.output
    assert "2 hosts side by side" in result.output
    assert "node1" in result.output and "node2" in result.output and "NV18 all-to-all" in result.output
    assert "different GPU wiring" in result.output

    data = json.loads(cli("scan", "--from", a, "--from", b, "--json").output)
    assert data["schema"] == "gputopo.cluster/1"
    assert [h["host"] for h in data["hosts"]] == ["node1", "node2"]
    assert "cluster-link-shape" in [d["code"] for d in data["diagnostics"]]
    assert Topology.from_dict(data["hosts"][0]).host == "node1"


def test_scan_several_from_fail_on(cli, tmp_path):
    a = save_host(cli, tmp_path, "node1", "--machine", "dgx-h100")
    b = save_host(cli, tmp_path, "node2", "--machine", "two-socket-4gpu")
    # the hosts differ in GPUs and wiring, and node2 is two-socket: design findings, no fault
    assert cli("scan", "--from", a, "--from", b, "--fail-on", "warning").exit_code == 0
    result = cli("scan", "--from", a, "--from", b, "--fail-on", "warning", "--fail-on-design")
    assert result.exit_code == 1
    assert "design findings at or above warning (cluster-gpu-count" in result.output


def test_one_from_keeps_the_single_host_output(cli):
    one = cli("scan", "--from", DGX1_TEXT, "--json")
    assert json.loads(one.output)["schema"] == "gputopo.topology/1"
