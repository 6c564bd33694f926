"""One ``ScanResult``, three renderings: the scan screen, ``scan --json`` and the report page say the
same thing of it: every finding, every measured direction's verdict (and whether its share of the
expectation is known), every GPU's NUMA node and what the source does not say."""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from conftest import OWN_FIXTURES
from linktable import CUBE_MESH_8_NICS, cube_mesh_8
from rich.console import Console

from gputopo.analysis import topology_for, with_findings
from gputopo.analysis.expect.measured import expectation
from gputopo.analysis.scan_result import ScanResult, scan_result
from gputopo.model import Measurement, Topology
from gputopo.sources import TopologyRequest
from gputopo.views.observed import MAX_PAIR_ROWS
from gputopo.views.report import render_report
from gputopo.views.report_tables import _tint
from gputopo.views.svg_links import VERDICT_HEX
from gputopo.views.topology import render_scan

BROKEN = OWN_FIXTURES / "doctor" / "constructed"
P2PBW = OWN_FIXTURES / "corpus" / "p2pbw"


def _measured_cube_mesh() -> Topology:
    """Every link measured against its known expectation: ok, low, far below, above the line rate."""
    topo = cube_mesh_8(nics=CUBE_MESH_8_NICS)
    for k, link in enumerate(topo.links):
        exp = expectation(topo, link)
        assert exp is not None and exp.line_rate_gbps
        shares = (0.9, 0.6, 0.2, 1.5 * exp.line_rate_gbps / exp.gbps)
        link.measured = Measurement(a_to_b_gbps=shares[k % 4] * exp.gbps, b_to_a_gbps=shares[(k + 1) % 4] * exp.gbps)
    return with_findings(topo)


def _of(request: TopologyRequest):
    return lambda: topology_for(request)


TOPOLOGIES = {
    "broken box, measured": _of(TopologyRequest(from_files=(str(BROKEN / "topo_m.txt"),
                                                            str(BROKEN / "p2pBandwidthLatencyTest.txt")))),
    "p2pBandwidthLatencyTest alone": _of(TopologyRequest(from_files=(str(P2PBW / "asus_esc8000a_bandwidthtest_then_p2pbw_session.txt"),))),
    "dgx1": _of(TopologyRequest(machine="dgx1")),
    "pcie-8gpu": _of(TopologyRequest(machine="pcie-8gpu")),
    "cube mesh, every verdict": _measured_cube_mesh,
}


def _three(result: ScanResult) -> tuple[str, dict, ET.Element]:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    render_scan(result, console)
    data = json.loads("".join(result.json_parts()))
    page = render_report(result.topology, scan=result)
    return console.file.getvalue(), data, ET.fromstring(page.replace("<!DOCTYPE html>", "", 1))  # type: ignore[attr-defined]


def _section(root: ET.Element, name: str) -> ET.Element:
    return next(e for e in root.iter("section") if e.attrib.get("id") == name)


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_text_json_and_report_say_the_same_findings(name):
    text, data, page = _three(scan_result(TOPOLOGIES[name]()))
    codes = [f["code"] for f in data["findings"]]
    assert codes == [f.code for f in TOPOLOGIES[name]().diagnostics]
    listed = [e.text for e in _section(page, "findings").iter("code") if e.text in set(codes)]
    assert sorted(set(listed)) == sorted(set(codes))
    for code in codes:
        assert code in text, code


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_text_json_and_report_give_each_measured_direction_the_same_verdict(name):
    text, data, page = _three(scan_result(TOPOLOGIES[name]()))
    directions = [d for m in data["link_figures"]["measured"] for d in m["directions"]]
    cells = {(int(td.attrib["data-a"]), int(td.attrib["data-b"])): td for table in page.iter("table")
             if table.attrib.get("data-heatmap") == "measured-vs-expected" for td in table.iter("td") if "data-a" in td.attrib}
    assert bool(directions) == bool(cells)
    rows = {}
    for line in text.splitlines():
        found = re.match(r"[│|]\s*(\d+) \u2192 (\d+)\s*[│|]", line)
        if found:
            rows[(int(found[1]), int(found[2]))] = line
    for d in directions:
        pair = (d["src"], d["dst"])
        cell = cells[pair]
        assert cell.attrib["style"] == f"background:{_tint(VERDICT_HEX[d['verdict']])}"
        assert (cell.text == "?") == (d["ratio"] is None)
        if len(rows) < MAX_PAIR_ROWS:  # (beyond that the screen says how many more are in --json)
            cols = [c.strip() for c in re.split(r"[│|]", rows[pair])]
            assert d["verdict"] in cols
            assert ("?" in cols) == (d["ratio"] is None)
    if name.startswith("broken"):
        assert {d["verdict"] for d in directions} >= {"far-below"}
    if name.startswith("cube mesh"):
        assert {d["verdict"] for d in directions} == {"ok", "low", "far-below", "above-line-rate"}
        assert all(d["ratio"] is not None for d in directions)


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_text_json_and_report_place_the_gpus_alike_and_say_what_is_not_known(name):
    text, data, page = _three(scan_result(TOPOLOGIES[name]()))
    for place in data["gpu_places"]:
        if place["numa_node"] is not None:
            assert f"NUMA node {place['numa_node']}" in text
        if place["cpu_affinity"]:
            assert place["cpu_affinity"] in text
    rows = {int(tr[0].text): [td.text for td in tr] for tr in _section(page, "gpus").iter("tr") if tr[0].tag == "td"}
    for place in data["gpu_places"]:
        row = rows[place["gpu"]]
        for fact in ("pci_bus_id", "numa_node", "cpu_affinity"):
            assert (str(place[fact]) if place[fact] is not None else "?") in row, fact
        if place["nic_path"]:
            near = f"{', '.join(place['nearest_nics'])} ({place['nic_path']})"
            assert near in row and f"{near} for GPU" in text
    if name.startswith("cube mesh"):
        assert data["gpu_places"][0]["nearest_nics"] == ["mlx5_0"]
    unknown = "".join(_section(page, "unknown").itertext())
    said = data["unknowns"]
    assert ("P2P support is not in the source" in unknown) == said["p2p_not_in_source"]
    assert ("No link is known between" in unknown) == bool(said["missing_pairs"])
    assert ("NUMA node and CPU affinity are not known" in unknown) == bool(said["unplaced_gpus"])
