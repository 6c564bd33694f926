"""Topology.link()/gpu() answer from an index (O(1) in pair loops), and stay right when code
appends to, replaces or edits ``links``/``gpus`` directly."""

from __future__ import annotations

import dataclasses

import pytest

from gputopo.model import Finding, Gpu, Topology, make_link
from gputopo.sources.reference import load_reference


def _small() -> Topology:
    return Topology(gpus=[Gpu(0), Gpu(1), Gpu(2)], links=[make_link(0, 1, "NV2"), make_link(1, 2, "SYS")])


def test_lookups_in_either_order_and_missing_pairs():
    topo = _small()
    assert topo.link(1, 0).type == "NV2" and topo.link(2, 1).type == "SYS"
    with pytest.raises(KeyError):
        topo.link(0, 2)
    with pytest.raises(KeyError):
        topo.link(1, 1)
    assert topo.gpu(2).index == 2
    with pytest.raises(KeyError):
        topo.gpu(7)


def test_appends_replacements_and_in_place_edits_are_seen():
    topo = _small()
    assert topo.link(0, 1).type == "NV2"  # the index is built
    topo.links.append(make_link(0, 2, "PIX"))
    assert topo.link(2, 0).type == "PIX"
    topo.links[0] = make_link(0, 1, "NV4")  # same length: the hit is checked against the item
    assert topo.link(0, 1).type == "NV4"
    topo.links = [make_link(0, 1, "PHB")]
    assert topo.link(0, 1).type == "PHB"
    with pytest.raises(KeyError):
        topo.link(1, 2)
    topo.gpus.append(Gpu(5))
    assert topo.gpu(5).index == 5
    topo.gpus[0] = Gpu(9)
    assert topo.gpu(9).index == 9
    with pytest.raises(KeyError):
        topo.gpu(0)


def test_add_finding_keeps_one_per_code_and_gpus():
    topo = _small()
    topo.add_finding(Finding("info", "x", "one", [0, 1]))
    topo.add_finding(Finding("info", "x", "again", [0, 1]))
    topo.add_finding(Finding("info", "x", "other gpus", [1, 2]))
    topo.diagnostics.append(Finding("info", "y", "appended directly", [0]))
    topo.add_finding(Finding("info", "y", "dup", [0]))
    assert [f.message for f in topo.diagnostics] == ["one", "other gpus", "appended directly"]


def test_to_dict_is_what_dataclasses_asdict_gives():
    topo = load_reference("dgx-h100")
    topo.links[0].measured = __import__("gputopo.model", fromlist=["Measurement"]).Measurement(a_to_b_gbps=1.5)
    expected = dataclasses.asdict(topo)
    # (with ``findings``, the same list as ``diagnostics``, its deprecated alias: docs/json.md)
    assert topo.to_dict() == {"schema": expected.pop("schema"), "source": expected.pop("source"),
                              "findings": expected["diagnostics"], **expected}
    assert list(topo.to_dict())[:2] == ["schema", "source"]
