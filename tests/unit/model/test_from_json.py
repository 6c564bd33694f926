"""model.from_json: a Topology to JSON and back, exactly; what a snapshot must hold."""

import json

import pytest
from linktable import cube_mesh_8, two_socket_4

from gputopo.model import (
    Finding,
    Measurement,
    TfDevice,
    TfView,
    Topology,
)
from gputopo.sources.reference import MACHINES, load_reference


@pytest.mark.parametrize("name", list(MACHINES))
def test_reference_machines_round_trip_exactly_through_json(name):
    topo = load_reference(name)
    topo.tf = TfView(devices=[TfDevice(0, "x", "0000:01:00.0")], peer=[[True]], era="tf2")
    topo.links[0].measured = Measurement(a_to_b_gbps=12.5, b_to_a_gbps=11.0, device_kind="CPU")
    topo.diagnostics.append(Finding("warning", "cross-socket", "msg", [0, 1], "fix"))
    text = json.dumps(topo.to_dict())
    again = Topology.from_dict(json.loads(text))
    assert again == topo
    assert again.to_dict()["schema"] == "gputopo.topology/1"


def test_from_dict_rejects_wrong_schema_and_shapes():
    with pytest.raises(ValueError, match="schema"):
        Topology.from_dict({"schema": "other/1"})
    with pytest.raises(ValueError):
        Topology.from_dict({"schema": "gputopo.topology/1", "gpus": [{"nope": 1}]})
    bad = two_socket_4().to_dict()
    bad["links"].append(dict(bad["links"][0]))
    with pytest.raises(ValueError, match="twice"):
        Topology.from_dict(bad)


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("gpus", 0, "index"), "a", r"gpus\[0\]\.index: must be an integer, got \"a\""),
        (("gpus", 0, "numa_node"), True, r"gpus\[0\]\.numa_node: must be an integer or null"),
        (("links", 0, "nvlink_count"), "x", r"links\[0\]\.nvlink_count: must be an integer"),
        (("links", 0, "a"), 0.5, r"links\[0\]\.a: must be an integer"),
        (("gpus",), None, r"gpus: must be a list of Gpu, got null"),
        (("diagnostics",), [{"severity": 3, "code": "c", "message": "m"}], r"diagnostics\[0\]\.severity: must be a string"),
        (("diagnostics",), [{"severity": "info", "code": "c", "message": "m", "gpus": ["0"]}], r"diagnostics\[0\]\.gpus\[0\]: must be an integer"),
    ],
)
def test_from_dict_rejects_wrong_field_types(where, value, message):
    """A hand-edited snapshot with a wrong type is one ValueError (one error line), not a crash later."""
    data = two_socket_4().to_dict()
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(ValueError, match=message):
        Topology.from_dict(data)


# --- where the GPUs sit: NUMA sets, GPU NUMA IDs, sockets, NUMA distances; nvswitch may be null ------


def test_snapshot_without_the_locality_keys_still_loads():
    data = load_reference("dgx-a100").to_dict()
    for gpu in data["gpus"]:
        for key in ("numa_affinity", "gpu_numa_id", "socket"):
            del gpu[key]
    del data["numa_distances"]
    topo = Topology.from_dict(data)
    assert all(g.socket is None and g.numa_affinity is None and g.gpu_numa_id is None for g in topo.gpus)
    assert topo.numa_distances is None and topo.numa_distance(0, 1) is None
    assert topo.gpus[0].numa_nodes == {3}  # from numa_node alone


def test_locality_keys_round_trip_and_nvswitch_may_be_null():
    topo = load_reference("gb200-nvl72")
    topo.gpus[0].numa_affinity, topo.gpus[0].gpu_numa_id = "0,3-9,11-17", 2
    topo.numa_distances = {"0": {"0": 10, "1": 40}, "1": {"0": 40, "1": 10}}
    topo.links[0].nvswitch = None
    data = json.loads(json.dumps(topo.to_dict()))
    assert data["gpus"][0]["socket"] == 0 and data["gpus"][0]["gpu_numa_id"] == 2
    assert data["links"][0]["nvswitch"] is None
    again = Topology.from_dict(data)
    assert again == topo and again.numa_distance(0, 1) == 40
    assert again.gpus[0].numa_nodes == {0, 3, 4, 5, 6, 7, 8, 9, 11, 12, 13, 14, 15, 16, 17}


@pytest.mark.parametrize(
    "field, value",
    [("numa_distances", {"0": {"0": "near"}}), ("numa_distances", [[10]])],
)
def test_malformed_numa_distances_are_refused(field, value):
    data = cube_mesh_8().to_dict()
    data[field] = value
    with pytest.raises(ValueError, match="numa_distances"):
        Topology.from_dict(data)


@pytest.mark.parametrize("key", ["message", "fix", "evidence", "x.message", "NCCL_P2P_LEVEL"])
def test_a_dictionary_value_is_one_line_whatever_its_key_is_called(key):
    """nccl.settings is a dictionary of NCCL variables: a key named like a free-text field
    ("message") does not make its value free text (a terminal escape got in that way)."""
    data = load_reference("dgx-h100").to_dict()
    data["nccl"] = {"settings": {key: "1\x1b[2J"}}
    with pytest.raises(ValueError, match=r"nccl\.settings\..*control character|nccl\.settings\..*one line"):
        Topology.from_dict(data)
