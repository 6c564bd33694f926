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


def _json_expected(data: dict) -> dict[tuple[int, int], dict]:
    """Each link's class of ``scan --json``'s ``link_figures``, by pair."""
    figures = data["link_figures"]
    return {(link["a"], link["b"]): figures["classes"][k] for link, k in zip(data["links"], figures["class_of_link"])}


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_text_json_and_report_colour_each_link_by_the_same_expected_figure(name):
    """The link matrix's colour, ``--json``'s expected figure and the report's kind heatmap say the
    same of each pair (``ScanResult.expected_speed``, made once)."""
    from gputopo.views.svg_links import speed_hex
    from gputopo.views.topology import link_matrices, speed_style

    result = scan_result(TOPOLOGIES[name]())
    _, data, page = _three(result)
    expected = _json_expected(data)
    cells = {(int(td.attrib["data-a"]), int(td.attrib["data-b"])): td for table in page.iter("table")
             if table.attrib.get("data-heatmap") == "kind" for td in table.iter("td") if "data-a" in td.attrib}
    screen = {}
    for block in link_matrices(result):
        table = block.renderables[-1] if hasattr(block, "renderables") else block
        for column in table.columns[1:]:
            for row, cell in zip(table.columns[0].cells, column.cells):
                if str(column.header).isdigit() and str(cell).strip() not in ("X", ""):
                    screen[(int(str(row).removeprefix("GPU")), int(str(column.header)))] = cell
    assert screen
    for (a, b), figures in expected.items():
        gbps = figures["expected_gbps"]
        for pair in ((a, b), (b, a)):
            if pair in cells:
                colour = speed_hex(gbps) if gbps is not None else "#8a8a8a"
                assert cells[pair].attrib["style"] == f"background:{_tint(colour)}"
                assert str(gbps if gbps is None else round(gbps)) in cells[pair].attrib["title"] or gbps is None or "~" in cells[pair].attrib["title"]
            if pair in screen:
                shown = screen[pair]
                if gbps is None or (result.in_vm and not figures["link_type"].startswith("NV")):
                    assert str(shown.style) in ("", "dim")
                else:
                    assert str(shown.style) == speed_style(gbps)


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_text_json_and_report_say_the_same_assumptions_of_each_word(name):
    """What each link word's figures assume: the legend's words on the screen, the classes of ``--json``
    and the report's notes under what is not known (``ScanResult.speed_spans``)."""
    from gputopo.views.topology import link_legend_rows

    result = scan_result(TOPOLOGIES[name]())
    _, data, page = _three(result)
    by_word: dict[str, set[str]] = {}
    for figures in _json_expected(data).values():
        if figures["link_type"] != "UNKNOWN":
            by_word.setdefault(figures["link_type"], set()).update([figures["assumption"]] if figures["assumption"] else [])
    legend = {word: meaning.plain for word, meaning in link_legend_rows(result, speeds=True)}
    unknown = " ".join("".join(li.itertext()) for li in _section(page, "unknown").iter("li"))
    for word, assumed in by_word.items():
        if result.speed_spans.get(word) is None:
            continue
        for assumption in assumed:
            assert assumption in legend[word]
            assert f"rest on an assumption: {assumption}" in unknown and word in unknown
        assert bool(assumed) == ("(" in legend[word].split("per direction", 1)[1])


@pytest.mark.parametrize("name", list(TOPOLOGIES))
def test_json_and_the_drawing_give_each_measured_edge_the_same_verdict(name):
    """A measured NVLink edge of the report's drawing is coloured by the verdict ``--json`` gives its
    link (``ScanResult.link_verdict``: the slower direction's)."""
    result = scan_result(TOPOLOGIES[name]())
    _, data, page = _three(result)
    verdicts = {(m["a"], m["b"]): m["verdict"] for m in data["link_figures"]["measured"]}
    edges = {tuple(map(int, g.attrib["data-link"].split("-"))): g for g in page.iter("g")
             if g.attrib.get("class", "").split()[:1] == ["link"]}
    checked = 0
    for pair, g in edges.items():
        link = result.topology.link(*pair)
        if pair in verdicts and verdicts[pair] is not None and not link.health and result.link_verdict(link) is not None:
            assert g.attrib["data-colour"] == VERDICT_HEX[verdicts[pair]]
            checked += 1
    if name.startswith("cube mesh"):
        assert checked == len([lk for lk in result.topology.links if lk.is_nvlink])
