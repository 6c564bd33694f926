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


def _rack() -> dict:
    return load_reference("gb200-nvl72").to_dict()  # 2556 links: the column-wise checks run


def test_measurements_and_health_in_a_long_list_are_read_as_the_careful_pass_reads_them():
    data = _rack()
    data["links"][10]["measured"] = {"a_to_b_gbps": 700.5, "method": "nvbandwidth"}
    data["links"][11]["health"] = ["acs"]
    data["links"][12] = dict(reversed(list(data["links"][12].items())))  # keys in another order
    topology = snapshot.parse_snapshot(json.dumps(data), "rack.json")
    assert topology.links[10].measured.a_to_b_gbps == 700.5 and topology.links[10].measured.method == "nvbandwidth"
    assert topology.links[11].health == ["acs"] and topology.links[12].type == data["links"][12]["type"]
    assert len({id(link.health) for link in topology.links}) == len(topology.links)  # a list of its own each
    assert snapshot.parse_snapshot(snapshot.snapshot_json(topology), "again.json") == topology


@pytest.mark.parametrize(("where", "value", "message"), [
    ("nvlink_count", True, r"links\[2000\]\.nvlink_count: must be an integer, got true"),
    ("nvlink_count", 18.0, r"links\[2000\]\.nvlink_count: must be an integer, got 18.0"),
    ("health", None, r"links\[2000\]\.health: must be a list, got null"),
    ("health", ["x\ny"], r"links\[2000\]\.health\[0\]: control character"),
    ("measured", {"a_to_b_gbps": "fast"}, r"links\[2000\]\.measured\.a_to_b_gbps: must be"),
    ("p2p_read", "YES", r"links\[2000\]\.p2p_read: unknown P2P word 'YES'"),
    ("pcie_path", "XYZ", r"links\[2000\]\.pcie_path: unknown PCIe path word 'XYZ'"),
    ("b", 3, r"links\[2000\]: link \d+-3 must have a < b|listed twice"),
])
def test_a_wrong_value_in_a_long_list_of_links_is_named(where, value, message):
    data = _rack()
    data["links"][2000][where] = value
    with pytest.raises(InputError, match=message):
        snapshot.parse_snapshot(json.dumps(data), "rack.json")


def test_a_link_listed_twice_in_a_long_list_is_named():
    data = _rack()
    data["links"][2000] = dict(data["links"][1999])
    with pytest.raises(InputError, match=r"links\[2000\]: link \d+-\d+ is listed twice"):
        snapshot.parse_snapshot(json.dumps(data), "rack.json")


def test_a_page_of_snapshot_openings_that_never_close_is_refused_at_once():
    """(A lazy ``.*?</script>`` searched from every opening tag: a 1 MB page of 20,000 openings took
    two minutes to refuse, 64 MiB of them days.)"""
    import time

    opening = f'<script type="application/json" id="{snapshot.REPORT_SNAPSHOT_ID}">'
    started = time.perf_counter()
    with pytest.raises(InputError, match="without an embedded gputopo snapshot"):
        snapshot.report_snapshot_text("<!doctype html>" + opening * 200_000, "page.html")
    assert time.perf_counter() - started < 5
    page = f"<!doctype html>{opening}{opening}{{}}</script>{opening}[]</script>"
    assert snapshot.report_snapshot_text(page) == f"{opening}{{}}"  # as the pattern read it: the first opening
