"""``scan --json``'s ``link_figures``: every link's expected figure (and measured with its verdict),
the same as the one rule of ``analysis.expect.measured`` gives, written once per class of pair."""

from __future__ import annotations

import json

import pytest
from conftest import OWN_FIXTURES

from gputopo.analysis.expect.link_figures import link_figures
from gputopo.analysis.expect.measured import expectation, measured_gbps, verdict
from gputopo.sources.reference import load_reference, machine_names


@pytest.mark.parametrize("name", machine_names())
def test_every_link_gets_the_expectation_every_view_uses(name):
    topo = load_reference(name)
    figures = link_figures(topo)
    classes = {c["class"]: c for c in figures["classes"]}
    assert len(figures["class_of_link"]) == len(topo.links) and figures["measured"] == []
    for k, link in zip(figures["class_of_link"][:4000], topo.links[:4000]):  # (a domain: the first links suffice)
        expected = expectation(topo, link)
        assert classes[k]["expected_gbps"] == (None if expected is None else round(expected.gbps, 2))
    assert "verdict" in figures["rule"]


def test_measured_links_carry_their_figure_and_the_one_verdict(cli):
    box = OWN_FIXTURES / "doctor" / "constructed"
    data = json.loads(cli("scan", "--from", str(box / "topo_m.txt"), "--from",
                          str(box / "p2pBandwidthLatencyTest.txt"), "--json").output)
    rows = {(m["a"], m["b"]): (m["measured_gbps"], m["verdict"]) for m in data["link_figures"]["measured"]}
    assert rows[(0, 1)] == (2.37, "far-below")  # P2P broken on GPU 0's pairs (ACS)
    assert rows[(1, 2)][1] in ("ok", "low")
    from gputopo.sources.registry import read_file

    topo = read_file(str(box / "topo_m.txt"))
    assert all(v is None or v in ("ok", "low", "far-below", "above-line-rate") for _, v in rows.values())
    assert verdict(2.37, expectation(topo, topo.link(0, 1)).gbps) == "far-below"
    assert measured_gbps(topo.link(0, 1)) is None  # (the text alone measures nothing)


def test_the_json_with_its_figures_still_reads_back_as_a_snapshot(cli, tmp_path):
    out = tmp_path / "scan.json"
    out.write_text(cli("scan", "--machine", "dgx1", "--json").output)
    again = json.loads(cli("scan", "--from", str(out), "--json").output)
    assert len(again["gpus"]) == 8 and len(again["link_figures"]["class_of_link"]) == len(again["links"])
