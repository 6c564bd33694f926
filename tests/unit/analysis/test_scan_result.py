"""analysis.scan_result: the one object scan's text, the report and ``scan --json`` render: findings,
measured directions judged once, GPU places with their nearest NICs, what the source does not say."""

from __future__ import annotations

import json

from linktable import CUBE_MESH_8_NICS, cube_mesh_8, two_socket_4

from gputopo.analysis import with_findings
from gputopo.analysis.expect.measured import comparisons, expectation, verdict
from gputopo.analysis.place.nics import nearest_nics
from gputopo.analysis.scan_result import direction_dict, scan_result
from gputopo.model import Gpu, Measurement, Topology, make_link


def test_places_carry_each_gpus_numa_node_cpus_bus_id_and_nearest_nics():
    topo = cube_mesh_8(nics=CUBE_MESH_8_NICS, gpu={"pci_bus_id": [f"0000:{k:02x}:00.0" for k in range(8)]})
    places = scan_result(topo).places
    assert [p.gpu for p in places] == topo.gpu_indices
    for place, gpu, near in zip(places, topo.gpus, nearest_nics(topo)):
        assert (place.numa_node, place.cpu_affinity, place.pci_bus_id, place.socket) == (
            gpu.numa_node, gpu.cpu_affinity, gpu.pci_bus_id, gpu.socket)
        assert place.nic_path == near.path and list(place.nearest_nics) == [n.name for n in near.nics]
    assert (places[0].nic_path, places[0].nearest_nics) == ("PIX", ("mlx5_0",))
    assert (places[7].nic_path, places[7].nearest_nics) == ("PIX", ("mlx5_3",))


def test_a_gpu_without_a_nic_has_no_path():
    (place, _, _, _) = scan_result(two_socket_4()).places
    assert place.nic_path is None and place.nearest_nics == () and place.to_dict()["nearest_nics"] == []


def test_each_measured_direction_is_judged_by_the_one_rule():
    topo = cube_mesh_8()
    exp = expectation(topo, topo.link(0, 1))
    assert exp is not None and exp.line_rate_gbps
    topo.link(0, 1).measured = Measurement(a_to_b_gbps=0.3 * exp.gbps, b_to_a_gbps=2 * exp.line_rate_gbps)
    result = scan_result(topo)
    assert result.compared == comparisons(topo)
    there, back = result.comparison(0, 1), result.comparison(1, 0)
    assert there is not None and back is not None and result.comparison(0, 2) is None
    assert there.verdict == verdict(0.3 * exp.gbps, exp.gbps, exp.line_rate_gbps) == "far-below"
    assert back.verdict == "above-line-rate"
    (entry,) = result.link_figures["measured"]
    assert entry["verdict"] == "far-below"  # the slower direction, as before
    assert [d["verdict"] for d in entry["directions"]] == ["far-below", "above-line-rate"]
    assert entry["directions"][0]["ratio"] == round(there.ratio, 3)


def test_a_share_resting_on_an_assumption_is_not_given():
    """The PCIe generation is not in the source: the share would be a guess (the text shows ?)."""
    link = make_link(0, 1, "NODE", measured=Measurement(a_to_b_gbps=26.3))
    (compared,) = scan_result(Topology(gpus=[Gpu(0), Gpu(1)], links=[link])).compared
    assert compared.assumption and direction_dict(compared)["ratio"] is None
    assert direction_dict(compared)["verdict"] == compared.verdict


def test_unknowns_say_what_the_source_does_not():
    gpus = [Gpu(0, numa_node=0), Gpu(1, numa_node=0), Gpu(2)]
    topo = Topology(gpus=gpus, links=[make_link(0, 1, "NV2"), make_link(1, 2, "UNKNOWN")])
    said = scan_result(topo).unknowns
    assert said.missing_pairs == [(0, 2)] and said.unknown_link_pairs == [(1, 2)]
    assert said.unplaced_gpus == [2] and said.p2p_not_in_source
    whole = scan_result(cube_mesh_8()).unknowns
    assert (whole.missing_pairs, whole.unknown_link_pairs, whole.unplaced_gpus, whole.p2p_not_in_source) == ([], [], [], False)


def test_findings_are_the_topologys_with_their_kinds():
    topo = with_findings(two_socket_4())
    result = scan_result(topo)
    assert result.findings == topo.diagnostics and result.findings
    assert all(f.kind for f in result.findings)


def test_the_json_is_the_topologys_with_the_results_members_after_it():
    topo = cube_mesh_8(nics=CUBE_MESH_8_NICS)
    data = json.loads("".join(scan_result(topo).json_parts()))
    assert data["schema"] == "gputopo.topology/1" and len(data["links"]) == len(topo.links)
    assert len(data["link_figures"]["class_of_link"]) == len(topo.links)
    assert [p["gpu"] for p in data["gpu_places"]] == topo.gpu_indices
    assert data["gpu_places"][2]["nearest_nics"] == ["mlx5_1"]
    assert data["unknowns"] == {"missing_pairs": [], "unknown_link_pairs": [], "unplaced_gpus": [],
                                "p2p_not_in_source": False}


def test_every_pair_is_found_linked_in_any_order_and_a_pair_listed_twice_is_not_two():
    topo = cube_mesh_8()
    assert scan_result(topo).unknowns.missing_pairs == []
    topo.links = list(reversed(topo.links))  # (out of order: counted by the link table)
    assert scan_result(topo).unknowns.missing_pairs == []
    twice = cube_mesh_8()
    twice.links = [*twice.links[:-1], make_link(0, 1, "NV1")]  # as many links as pairs, one pair twice
    assert scan_result(twice).unknowns.missing_pairs == [(6, 7)]
