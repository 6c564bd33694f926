"""One rule for unknowns in every view (issue 24): unknown is `?`/null, inferred is marked,
assumed speeds say what they assume or are a range by generation."""

from __future__ import annotations

import json

import pytest
from conftest import OWN_FIXTURES, SHARED_FIXTURES

from gputopo.analysis.expect.bandwidth import estimate_link, pair_estimate
from gputopo.model import Gpu, Topology, make_link
from gputopo.sources import TopologyRequest, resolve

CORPUS = OWN_FIXTURES / "corpus" / "topo"
H100_TEXT = str(CORPUS / "h100_8gpu_nv18_compact_spacing.txt")
VM_TEXT = str(CORPUS / "vm_4xa10_all_sys_one_cpuset_spaces.txt")
TF_LOG = str(SHARED_FIXTURES / "tf_logs" / "tf1_peer_access_not_supported_4gpu.log")


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_nvlink_count_from_text_is_derived_from_nv_words_not_shown_as_none(cli):
    result = cli("scan", "--from", H100_TEXT)
    assert result.exit_code == 0, result.output
    rows = [line for line in result.output.splitlines() if line.strip()[:1].isdigit() and "0-51" in line]
    assert rows and all(line.rstrip().endswith("? x>=18") for line in rows), rows
    assert "counted from the NV# words" in _flat(result.output)


def test_unknown_nvlink_count_prints_a_question_mark(cli):
    result = cli("scan", "--from", str(CORPUS / "rtx_a6000_3gpu_nv4_bridge_pair_plus_node.txt"))
    gpu2 = next(line for line in result.output.splitlines() if line.startswith(" 2 "))
    assert gpu2.rstrip().endswith("?"), gpu2


def test_nv18_of_unknown_generation_is_a_range_not_360(cli):
    out = _flat(cli("scan", "--from", H100_TEXT).output)
    assert "~360" not in out
    assert "~371-722 GB/s per direction (NVLink generation not in the source)" in out


def test_nv18_of_a_known_generation_is_one_figure():
    b200 = load_topology(machine="gb200-nvl72")
    estimate = pair_estimate(b200, 0, 1)
    assert estimate.assumption is None and estimate.span == (estimate.gbps, estimate.gbps)


@pytest.mark.parametrize("name", ["NVIDIA RTX A6000", "NVIDIA GeForce RTX 3090", "NVIDIA A40"])
def test_an_nv4_bridge_on_ga102_is_56_not_80(name):
    gpus = [Gpu(index=i, name=name, nvlink_version="3.0") for i in range(2)]
    estimate = estimate_link(make_link(0, 1, "NV4", p2p_read="ok", p2p_write="ok"), *gpus)
    assert estimate.gbps == pytest.approx(56.25, abs=0.1)


def test_a_vm_gets_no_speed_for_its_hypervisor_words(cli):
    out = _flat(cli("scan", "--from", VM_TEXT).output)
    assert "~6 GB/s" not in out and "GB/s not known (a virtual machine" in out
    assert "colour =" not in out  # nothing is coloured by speed, so the colours are not explained


def test_pcie_words_without_a_generation_are_a_range_that_says_so():
    topology = load_topology(from_file=str(CORPUS / "pcie_8gpu_node_sys_dual_socket_lmdeploy_legend_cut.txt"))
    estimate = pair_estimate(topology, 0, 1)
    assert estimate.assumption and "PCIe generation not in the source" in estimate.assumption
    assert estimate.span[1] > estimate.span[0]


def test_a_tf_log_alone_fills_no_p2p_read_write_tables(cli):
    result = cli("scan", "--tf-log", TF_LOG)
    assert result.exit_code == 0, result.output
    assert "P2P read / write / atomics: not in a TensorFlow log" in _flat(result.output)
    assert "TF allocated (MB)" in result.output
    data = json.loads(cli("scan", "--tf-log", TF_LOG, "--json").output)
    assert all(link["p2p_write"] is None for link in data["links"])
    assert all(gpu["memory_total_bytes"] is None for gpu in data["gpus"])  # TF's pool is not the GPU's memory


def test_the_html_gpu_table_says_unknown_not_blank(tmp_path, cli):
    page = tmp_path / "page.html"
    assert cli("report", "--from", H100_TEXT, "-o", str(page)).exit_code == 0
    html = page.read_text()
    table = html[html.index('<table class="gpus">'):]
    table = table[: table.index("</table>")]
    assert "<td></td>" not in table
    assert '<td title="not in the source">?</td>' in table and "? x&gt;=18" in table


def load_topology(from_file=None, machine=None):
    return resolve(TopologyRequest(from_files=(from_file,) if from_file else (), machine=machine))
