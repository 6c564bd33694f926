"""Snapshots at scale: absurd sizes refused before anything is parsed or built, the fast checks
name the same field as the careful ones, and large documents are written one item per line."""

from __future__ import annotations

import json

import pytest

from gputopo.errors import InputError
from gputopo.sources import snapshot
from gputopo.sources.reference import load_reference


def test_millions_of_gpus_are_refused_before_the_json_is_parsed(monkeypatch):
    text = json.dumps({"schema": "gputopo.topology/1", "gpus": [{"index": k % 7} for k in range(70_000)]})

    def no_parsing(*args, **kwargs):
        raise AssertionError("the JSON was parsed")

    monkeypatch.setattr(snapshot.json, "loads", no_parsing)
    with pytest.raises(InputError, match='70000 "index" keys, more GPUs than gputopo reads'):
        snapshot.parse_snapshot(text, "box.json")


def test_a_bad_field_in_a_long_list_is_named_as_the_careful_pass_names_it():
    data = load_reference("gb200-nvl72").to_dict()  # 2556 links: the column-wise checks run
    data["links"][2000]["type"] = 7
    with pytest.raises(InputError, match=r"links\[2000\]\.type: must be a string, got 7"):
        snapshot.parse_snapshot(json.dumps(data), "rack.json")
    data["links"][2000]["type"] = "NV18"
    data["links"][123]["nvlink_count"] = 2**70
    with pytest.raises(InputError, match=r"links\[123\]\.nvlink_count: .* is out of range"):
        snapshot.parse_snapshot(json.dumps(data), "rack.json")


def test_a_large_snapshot_round_trips_one_link_per_line():
    topology = load_reference("gb200-nvl72")
    text = snapshot.snapshot_json(topology)
    assert text.count("\n") < 5000  # one line per link (2556), not one per field (~30,000)
    again = snapshot.parse_snapshot(text, "rack.json")
    assert again.to_dict() == topology.to_dict()


def test_a_small_document_is_written_as_json_dumps_writes_it():
    data = load_reference("dgx1").to_dict()
    assert snapshot.strict_json_text(data) == json.dumps(data, indent=2) + "\n"
    assert snapshot.strict_json_text({"x": float("nan")}) == '{\n  "x": null\n}\n'
