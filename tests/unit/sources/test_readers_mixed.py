"""Real captures as users paste them: several outputs in one paste, split and read by the kinds that
match; several --from of one machine merged; recommend ranks by the measured figures and says so."""

import json

import pytest

from conftest import OWN_FIXTURES
from gputopo.sources.registry import READERS, read_text
from unit.sources.readers_corpus import CORPUS, text_of

PAIRS = OWN_FIXTURES / "corpus" / "pairs"
ONE_KIND_DIRS = ("p2pbw", "nvbandwidth", "nccl_log", "nccl_xml", "nccl_tests", "nvlink", "topo_p2p")


def _kinds(text):
    return [reader.kind for reader in READERS if reader.sniff(text)]


@pytest.mark.parametrize("path", sorted(p for d in ONE_KIND_DIRS for p in (CORPUS / d).iterdir()
                                        if p.suffix in (".txt", ".log", ".xml", ".json") and p.name != "EXPECTED.json"), ids=lambda p: p.name)
def test_every_capture_is_read_through_the_one_door(path):
    text = path.read_text(encoding="utf-8")
    assert _kinds(text)  # recognised by content
    topology = read_text(text, path.name)
    topology.validate()


def test_a_session_of_bandwidthtest_then_p2pbandwidthlatencytest_is_read_as_one_kind():
    text = text_of("p2pbw", "asus_esc8000a_bandwidthtest_then_p2pbw_session.txt")
    assert _kinds(text) == ["p2pBandwidthLatencyTest"]


def test_topo_m_then_nvlink_status_in_one_paste_is_split_and_merged():
    text = text_of("nvlink", "nccl1608_3x_h100nvl_topo_then_status_six_inactive_cut.txt")
    assert _kinds(text) == ["nvidia-smi topo -m", "nvidia-smi nvlink"]
    topology = read_text(text, "paste")
    assert topology.link(0, 1).type == "NV12" and topology.link(0, 2).type == "SYS"
    assert sum(1 for s in topology.nvlinks if s.gpu == 0 and s.active is False) == 6


def test_topo_m_and_p2pbw_of_one_machine_pasted_together_give_links_with_measurements():
    text = text_of("pairs", "asus_esc8000a_4x_rtx6000ada_topo.txt") + "\n" + text_of("pairs", "asus_esc8000a_4x_rtx6000ada_p2pbw.txt")
    assert _kinds(text) == ["nvidia-smi topo -m", "p2pBandwidthLatencyTest"]
    topology = read_text(text, "paste")
    assert topology.link(0, 1).type == "NODE" and topology.link(0, 2).type == "SYS"
    assert topology.link(0, 2).measured.a_to_b_gbps == pytest.approx(26.32)
    assert topology.gpu(2).pci_bus_id == "0000:c1:00.0" and topology.gpu(2).numa_node == 1


def _recommend(cli, *files, k="2"):
    args = ["recommend", "-n", k, "--json"]
    for f in files:
        args += ["--from", str(f)]
    result = cli(*args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_recommend_from_topo_and_p2pbw_ranks_by_the_measured_figures_and_says_so(cli):
    data = _recommend(cli, PAIRS / "asus_esc8000a_4x_rtx6000ada_topo.txt", PAIRS / "asus_esc8000a_4x_rtx6000ada_p2pbw.txt")
    hops = [hop for group in data["groups"] for hop in group["hops"]]
    # NODE and SYS pairs: beyond NCCL's default P2P level (PXB), so NCCL's SHM, which the tool's staged
    # (P2P=Disabled) copies measure (~22 GB/s), not its P2P copies (26.3 GB/s every pair)
    assert hops and all(hop["basis"] == "measured" and hop["transport"] == "SHM" and 22 < hop["gbps"] < 22.5
                        for hop in hops)
    assert any("Ranked by measured GB/s" in note and "p2pBandwidthLatencyTest" in note for note in data["notes"])
    alone = _recommend(cli, PAIRS / "asus_esc8000a_4x_rtx6000ada_topo.txt")
    # estimated from the link words alone; "assumed": the text gives no PCIe generation (a range's low end)
    assert all(hop["basis"] == "assumed" for group in alone["groups"] for hop in group["hops"])
    # the estimate calls SYS slower than NODE; the measurement shows every pair's staged copies at ~22 GB/s
    assert alone["groups"][0]["bottleneck_gbps"] < 22 and data["groups"][0]["bottleneck_gbps"] == pytest.approx(22.23)


def test_recommend_on_the_titan_rtx_measurement_avoids_the_slow_neighbour_pairs(cli):
    data = _recommend(cli, CORPUS / "p2pbw" / "lambda_8x_titanrtx_no_peer_p2p_reads_modified_sample.txt")
    best = data["groups"][0]["gpus"]
    assert sorted(best) not in ([0, 1], [2, 3], [4, 5], [6, 7])  # those pairs measured ~9.9, others ~11.4
    assert data["groups"][0]["bottleneck_gbps"] > 11


@pytest.mark.parametrize("text", [
    "Device: 99999999999, X, pciBusID: 1, pciDeviceID: 0, pciDomainID:0\nUnidirectional P2P=Enabled Bandwidth Matrix (GB/s)\n"
    "   D\\D     0 99999999\n     0 1e400 nan\n",
    "x NCCL INFO Channel 00/0 : 999999999999 -> 1[1] via P2P/IPC\nx NCCL INFO comm 0x1 rank 99999999 nranks 99999999999 cudaDev 0 busId 1b000\n",
    "memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)\n 0 99999\n 0 N/A inf\n",
    "GPU 99999: X\n\t Link 99999: 25 GB/s\n",
    '<system version="1"><cpu numaid="99999999999999"><pci busid="zz"><gpu dev="9999999"/></pci></cpu></system>',
])
def test_absurd_numbers_are_refused_in_one_line_or_ignored_never_a_traceback(text):
    try:
        topology = read_text(text, "absurd")
    except Exception as exc:  # noqa: BLE001 - only InputError is allowed
        from gputopo.errors import InputError

        assert isinstance(exc, InputError) and "\n" not in str(exc)
    else:
        topology.validate()
        assert all(g.index < 1024 for g in topology.gpus)
