"""The model's new optional parts round-trip through JSON, and snapshots written before them load."""

import json

from gputopo.model import Topology
from gputopo.sources.reference import load_reference
from gputopo.sources.registry import read_text
from unit.sources.readers_corpus import text_of


def test_readers_output_round_trips_exactly_through_json():
    for kind, name in (("p2pbw", "lambda_8x_titanrtx_no_peer_p2p_reads_modified_sample.txt"),
                       ("nccl_log", "nccltests133_2node_16gpu_gdrdma_p2p_read_cut.log"),
                       ("nccl_tests", "k8s_2node_16x_h100_all_reduce.txt"),
                       ("nvlink", "nccl1608_3x_h100nvl_topo_then_status_six_inactive_cut.txt")):
        topology = read_text(text_of(kind, name), name)
        again = Topology.from_dict(json.loads(json.dumps(topology.to_dict())))
        assert again == topology


def test_a_snapshot_without_the_new_keys_still_loads():
    data = load_reference("dgx1").to_dict()
    for key in ("nvlinks", "nccl", "collectives"):
        data.pop(key)
    data["links"][0]["measured"] = {"a_to_b_gbps": 20.0, "device_kind": "GPU"}
    topology = Topology.from_dict(data)
    assert topology.nvlinks == [] and topology.nccl is None and topology.collectives == []
    m = topology.links[0].measured
    assert m.method is None and m.p2p_enabled is None and m.p2p_off_a_to_b_gbps is None
