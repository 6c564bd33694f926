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


# What the views colour and write, judged once here (issue 30: views render, they do not judge).

def _vm() -> Topology:
    from conftest import OWN_FIXTURES

    from gputopo.sources.registry import read_file

    return with_findings(read_file(str(OWN_FIXTURES / "corpus" / "topo" / "vm_4xa10_all_sys_one_cpuset_spaces.txt")))


def test_a_links_expected_speed_is_its_estimate_and_none_where_not_known():
    from gputopo.analysis.expect.bandwidth import pair_estimate

    topo = cube_mesh_8()
    result = scan_result(topo)
    assert not result.in_vm
    for link in topo.links:
        assert result.expected(link) == pair_estimate(topo, link.a, link.b)
        assert result.expected_speed(link) == pair_estimate(topo, link.a, link.b).gbps
    topo.links[0] = make_link(topo.links[0].a, topo.links[0].b, "UNKNOWN")
    assert scan_result(topo).expected_speed(topo.links[0]) is None


def test_on_a_virtual_machine_no_pcie_word_has_a_speed():
    result = scan_result(_vm())
    assert result.in_vm and {link.type for link in result.topology.links} == {"SYS"}
    assert all(result.expected_speed(link) is None for link in result.topology.links)
    assert result.speed_spans == {"SYS": None}
    assert scan_result(two_socket_4()).speed_spans["SYS"] is not None


def test_a_measured_links_verdict_is_its_slower_directions():
    topo = cube_mesh_8()
    for k, link in enumerate(topo.links[:4]):
        exp = expectation(topo, link)
        link.measured = Measurement(a_to_b_gbps=0.95 * exp.gbps, b_to_a_gbps=(0.9, 0.6, 0.2, 0.8)[k] * exp.gbps)
    result = scan_result(topo)
    for link in topo.links[:4]:
        exp = expectation(topo, link)
        assert result.link_verdict(link) == verdict(link.measured.b_to_a_gbps, exp.gbps, exp.line_rate_gbps)
    assert [result.link_verdict(lk) for lk in topo.links[:4]] == ["ok", "low", "far-below", "ok"]
    assert result.link_verdict(topo.links[4]) is None


def test_a_pcie_link_below_its_max_is_judged_with_the_state_it_was_read_in():
    topo = two_socket_4()
    for gpu, state in zip(topo.gpus, (0, 8, None)):
        gpu.pcie_gen_current, gpu.pcie_gen_max, gpu.pcie_width_current, gpu.pcie_width_max = 1, 4, 16, 16
        gpu.performance_state = state
    assert scan_result(topo).pcie_below == {0: ("below", "P0"), 1: ("idle", "P8"), 2: ("below", None)}


def test_faults_and_the_pairs_doctor_named_are_carried_for_the_drawing():
    from gputopo.model import Finding

    topo = two_socket_4()
    topo.link(0, 1).health = ["acs"]
    topo.diagnostics = [Finding("warning", "x", "a fault", gpus=[2], kind="fault"),
                        Finding("error", "y", "an old snapshot's error", gpus=[3]),
                        Finding("warning", "z", "a design fact", gpus=[1], kind="design")]
    result = scan_result(topo)
    assert [f.code for f in result.faults] == ["x", "y"]
    assert result.pair_faults == {(0, 1): ["acs"]}
