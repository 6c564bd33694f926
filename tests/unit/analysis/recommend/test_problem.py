"""recommend.problem: the bandwidth matrix the search sees (measurements, TensorFlow's peer view)."""
import pytest
from linktable import cube_mesh_8, pcie_8, two_socket_4

from gputopo.analysis.recommend import recommend
from gputopo.model import Measurement


# --- measurements and TF's peer view change the answer ----------------------------------------------


def test_a_measured_slow_pair_moves_the_pick():
    topo = two_socket_4()
    assert recommend(topo, 2).best.gpus == [0, 1]
    topo.link(0, 1).measured = Measurement(a_to_b_gbps=3.0, b_to_a_gbps=3.1)
    rec = recommend(topo, 2)
    assert rec.best.gpus == [2, 3]
    assert any("measurements" in note for note in rec.notes)


def test_tf_peer_view_fills_in_unknown_p2p_and_moves_the_pick():
    from gputopo.model import TfDevice, TfView

    topo = pcie_8()
    for link in topo.links:
        link.p2p_read = link.p2p_write = link.p2p_atomics = None  # as from pasted nvidia-smi text
    assert recommend(topo, 2).best.gpus == [0, 1]
    # TF numbered the GPUs in reverse (FASTEST_FIRST); the join is by PCI bus id.
    devices = [TfDevice(ordinal=o, pci_bus_id=topo.gpu(7 - o).pci_bus_id) for o in range(8)]
    peer = [[True] * 8 for _ in range(8)]
    peer[7][6] = peer[6][7] = False  # TF ordinals 7 and 6 are GPUs 0 and 1
    topo.tf = TfView(devices=devices, peer=peer)
    rec = recommend(topo, 2)
    assert rec.best.gpus == [2, 3]
    assert topo.link(0, 1).p2p_read is None  # the topology itself is left alone
    assert any("TensorFlow's peer view" in note for note in rec.notes)


def test_a_restricted_problem_keeps_the_figures_of_its_positions():
    from gputopo.analysis.recommend import Problem

    topo = cube_mesh_8()
    problem = Problem.from_topology(topo, topo.gpu_indices)
    local = problem.restricted([1, 4, 6])
    assert local.links is problem.links and local.ring_cache == {}
    assert local.n == 3 and local.index == [1, 4, 6] and local.pos == {1: 0, 4: 1, 6: 2}
    assert local.weight[0][1] == problem.weight[1][4] and local.weight[2][1] == problem.weight[6][4]
    assert local.host_id == [problem.host_id[p] for p in (1, 4, 6)]
    assert local.domain_id == [problem.domain_id[p] for p in (1, 4, 6)]
    assert local.key((0, 1, 2)) == problem.key((1, 4, 6))


def test_the_link_lookup_answers_as_the_topology_does():
    """Issue 21: ``LinkLookup`` finds a pair's link by its place in the link table, and its answer is
    ``Topology.link``'s: a link listed b-a, or changed in place, is looked up in the topology's index."""
    from gputopo.analysis.recommend.problem import LinkLookup
    from gputopo.model import Gpu, Link, Topology, make_link

    links = [make_link(0, 1, "NV2"), make_link(1, 2, "SYS"), make_link(0, 2, "PIX")]
    topo = Topology(gpus=[Gpu(0), Gpu(1), Gpu(2)], links=links)
    lookup = LinkLookup(topo)
    assert lookup[(1, 0)] is links[0] and lookup.get((2, 1)) is links[1] and (0, 2) in lookup
    assert (1, 1) not in lookup and lookup.get((0, 3), "none") == "none"
    with pytest.raises(KeyError, match="no link between GPU 0 and GPU 3"):
        lookup[(0, 3)]
    topo.link_table()
    topo.links[2] = make_link(1, 2, "NV4")  # in place, same length: the table's place now holds another pair
    assert lookup.get((0, 2)) is None and lookup.get((1, 2)) is links[1] == topo.link(1, 2)
    backwards = Topology(gpus=[Gpu(0), Gpu(1)], links=[Link(1, 0, "NV2")])
    assert LinkLookup(backwards).get((0, 1)) is None  # as Topology.link: the pair listed b-a is not found
