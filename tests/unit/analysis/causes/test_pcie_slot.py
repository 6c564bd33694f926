"""The slot's own limit (gputopo/analysis/causes/pcie_slot.py): a link trains to the lesser of its two ends'
capabilities, so a GPU's link at the top of the port above it is the board's design (``pcie-slot-limited``),
not a link trained down; where the source does not show the port, the narrow link says what would tell.

The hosts are the fake sysfs trees of ``doctor_trees`` (no real capture of an x8/x8 split with both ends'
LnkCap was found); their link values are the ones such a board gives: two x16 GPUs below ports that can
do x8."""

from __future__ import annotations

from doctor_trees import two_gpus_under_root_ports
from linktable import GEN4_X16, link_table

from gputopo.analysis.causes.doctor import doctor
from gputopo.analysis.causes.finding_kinds import kind_of
from gputopo.analysis.causes.pcie_findings import pcie_degraded
from gputopo.model.fabric import GPU, ROOT_PORT, Fabric, FabricNode
from gputopo.sources.doctor_input import evidence_of_host
from gputopo.sources.evidence.health import HealthEvidence
from gputopo.sources.evidence.pasted_health import parse_pasted
from gputopo.sources.host.pcie_health import LinkState

GPU_X8_OF_X16 = LinkState(16.0, 16.0, 8, 16)  # a Gen4 x16 card's link at x8
PORT_X8 = LinkState(16.0, 16.0, 8, 8)  # a port (slot) that can do x8 at most, at its best
PORT_X16_AT_X8 = LinkState(16.0, 16.0, 8, 16)


def _codes(report) -> list[str]:
    return sorted(f.code for f in report.findings if f.code.startswith("pcie-"))


def test_two_cards_in_slots_split_x8_x8_are_the_boards_design_not_links_trained_down(tmp_path):
    two_gpus_under_root_ports(tmp_path, 0, gpu_link=GPU_X8_OF_X16, bridge_link=PORT_X8)
    report = doctor(evidence_of_host(str(tmp_path), {}))
    assert _codes(report) == ["pcie-slot-limited", "pcie-slot-limited"]
    first = report.findings[0]
    assert first.severity == "info" and kind_of(first) == "design"
    assert ("runs at x8 of the GPU's x16, and the port above it (0000:40:01.1) can do x8 at most (its LnkCap): a link "
            "trains to the lesser of its two ends, so this one is at its best") in first.message
    assert "the board splits its lanes between slots" in first.message and first.fix.startswith("nothing is broken")
    assert report.gpu_problems == {} and report.pair_problems == {}
    assert next(c for c in report.checks if c.name == "pcie-links").status == "ok"


def test_an_x8_card_in_an_x16_slot_is_at_its_best_and_says_nothing(tmp_path):
    two_gpus_under_root_ports(tmp_path, 0, gpu_link=LinkState(16.0, 16.0, 8, 8), bridge_link=PORT_X16_AT_X8)
    assert _codes(doctor(evidence_of_host(str(tmp_path), {}))) == []


def test_a_gen4_gpu_below_a_gen3_port_runs_at_the_ports_generation_by_design(tmp_path):
    two_gpus_under_root_ports(tmp_path, 0, gpu_link=LinkState(8.0, 16.0, 16, 16), bridge_link=LinkState(8.0, 8.0, 16, 16))
    report = doctor(evidence_of_host(str(tmp_path), {}))
    assert _codes(report) == ["pcie-slot-limited", "pcie-slot-limited"]
    assert "runs at Gen3 of the GPU's Gen4" in report.findings[0].message and "older PCIe generation" in report.findings[0].message


def test_a_port_that_can_do_x16_makes_the_narrow_link_trained_down(tmp_path):
    two_gpus_under_root_ports(tmp_path, 0, gpu_link=GPU_X8_OF_X16, bridge_link=PORT_X16_AT_X8)
    report = doctor(evidence_of_host(str(tmp_path), {}))
    narrow = [f for f in report.findings if f.code == "pcie-link-narrow" and "(the GPU)" in f.message]
    assert len(narrow) == 2 and all("can do x16 (its LnkCap): the slot is not what holds the link back" in f.message for f in narrow)
    assert "pcie-slot-limited" not in _codes(report)


_PORT = ("00:01.1 PCI bridge: Advanced Micro Devices, Inc. [AMD] GPP Bridge\n"
         "\tBus: primary=00, secondary=01, subordinate=01, sec-latency=0\n"
         "\tCapabilities: [58] Express (v2) Root Port (Slot+), MSI 00\n"
         "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x{port}, ASPM L1, Exit Latency L1 <64us\n"
         "\t\tLnkSta:\tSpeed 16GT/s, Width x8\n")
_GPU = ("01:00.0 VGA compatible controller: NVIDIA Corporation AD102 [GeForce RTX 4090]\n"
        "\tCapabilities: [68] Express (v2) Legacy Endpoint, MSI 00\n"
        "\t\tLnkCap:\tPort #0, Speed 16GT/s, Width x16, ASPM L0s L1, Exit Latency L0s <1us, L1 <4us\n"
        "\t\tLnkSta:\tSpeed 16GT/s, Width x8 (downgraded)\n")


def _paste(text: str):
    return doctor(HealthEvidence(source="paste", pasted=[("lspci.txt", parse_pasted(text))]), {"0000:01:00.0": 0})


def test_a_pasted_lspci_with_the_ports_block_decides_by_both_ends_and_without_it_says_what_would_tell():
    split = _paste(_PORT.format(port=8) + _GPU)
    assert _codes(split) == ["pcie-slot-limited"] and "(0000:00:01.1) can do x8 at most" in split.findings[0].message
    down = _paste(_PORT.format(port=16) + _GPU)
    assert _codes(down) == ["pcie-link-narrow"] and "(0000:00:01.1) can do x16 (its LnkCap)" in down.findings[0].message
    (alone,) = _paste(_GPU).findings
    assert alone.code == "pcie-link-narrow" and "`sudo lspci -vvv -s <port> | grep LnkCap`" in alone.message


def _topology_with_ports(port_width: int | None):
    topo = link_table([["X", "PHB"], ["PHB", "X"]], numa=[0, 0],
                      gpu={**GEN4_X16, "pci_bus_id": ["0000:01:00.0", "0000:02:00.0"], "pcie_width_current": 8})
    fabric = Fabric()
    for index, bus in ((0, "01"), (1, "02")):
        port = f"0000:00:0{index + 1}.1"
        fabric.add(FabricNode(f"pci:{port}", ROOT_PORT, bdf=port, link_width_current=8, link_width_max=port_width))
        fabric.add(FabricNode(f"pci:0000:{bus}:00.0", GPU, parent=f"pci:{port}", bdf=f"0000:{bus}:00.0", gpu=index,
                              link_width_current=8, link_width_max=16))
    topo.fabric = fabric
    return topo


def test_scan_reads_the_ports_capability_from_the_fabric_graph():
    split = pcie_degraded(_topology_with_ports(8))
    assert [f.code for f in split] == ["pcie-slot-limited", "pcie-slot-limited"] and split[0].gpus == [0]
    (down,) = pcie_degraded(_topology_with_ports(16))
    assert down.code == "pcie-link-narrow" and "The port above each GPU can do x16 (its LnkCap)" in down.message
    topo = _topology_with_ports(None)
    topo.fabric = None
    (unknown,) = pcie_degraded(topo)
    assert unknown.code == "pcie-link-narrow" and "Whether the slot itself gives only x8" in unknown.message
