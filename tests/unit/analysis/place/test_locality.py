"""analysis.place.locality: sockets only where the source says them, one NUMA node below SYS, NVLinked
pairs placed by their affinities, a virtual machine's flat view concluding nothing; on link tables."""

from linktable import CUBE_MESH_8, PCIE_8, cube_mesh_8, link_table, two_socket_4, uniform

from gputopo.analysis.place.locality import (
    link_crosses_numa,
    pcie_path,
    same_socket,
    socket_groups,
    sockets_known,
    vm_evidence,
)
from gputopo.model import make_link

NO_SOCKETS = {"socket": [None] * 8}


def test_the_pcie_path_of_a_link():
    assert pcie_path(make_link(0, 1, "PIX")) == "PIX"
    assert pcie_path(make_link(0, 1, "NV2", pcie_path="NODE")) == "NODE"
    assert pcie_path(make_link(0, 1, "NV2")) is None  # nvidia-smi text shows only NV<n>
    assert pcie_path(make_link(0, 1, "UNKNOWN")) is None  # a TF log alone


def test_known_sockets_decide():
    topo = two_socket_4()
    assert sockets_known(topo) and sockets_known(topo, [0, 1])
    assert same_socket(topo, 0, 1) is True and same_socket(topo, 0, 2) is False


def test_without_sockets_below_sys_is_one_socket_and_sys_says_nothing():
    topo = two_socket_4(socket=[None] * 4)
    assert not sockets_known(topo)
    assert same_socket(topo, 0, 1) is True  # PIX: one NUMA node, so one socket
    assert same_socket(topo, 1, 2) is None  # SYS: between NUMA nodes, which may share a socket
    assert link_crosses_numa(topo, topo.link(1, 2)) and not link_crosses_numa(topo, topo.link(0, 1))


def test_nvlinked_pairs_without_a_pcie_path_are_placed_by_their_numa_nodes():
    topo = link_table(CUBE_MESH_8, numa=[0, 0, 0, 0, 1, 1, 1, 1], **NO_SOCKETS)  # as nvidia-smi text shows it
    assert same_socket(topo, 0, 3) is True  # NV2, both on NUMA node 0
    assert same_socket(topo, 0, 4) is None  # NV2 across NUMA nodes: no socket claimed
    assert link_crosses_numa(topo, topo.link(0, 4)) and not link_crosses_numa(topo, topo.link(0, 3))
    assert socket_groups(topo) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_socket_groups_follow_the_pcie_paths_where_they_are_known():
    assert socket_groups(cube_mesh_8(**NO_SOCKETS)) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert socket_groups(link_table(PCIE_8, **NO_SOCKETS)) == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_a_flat_virtual_machine_view_concludes_nothing():
    topo = link_table(uniform(4, "SYS"), numa=0, cpus=["0-15"] * 4, socket=[None] * 4)
    assert vm_evidence(topo) == "all 4 GPUs share CPUs 0-15 and NUMA node 0, yet nvidia-smi shows SYS (SOC) between every pair"
    assert same_socket(topo, 0, 1) is None
    assert not link_crosses_numa(topo, topo.link(0, 1))
    # The same GPUs on two NUMA nodes are a real layout.
    real = link_table(uniform(4, "SYS"), numa=[0, 0, 1, 1], socket=[None] * 4)
    assert vm_evidence(real) is None and link_crosses_numa(real, real.link(0, 2))


def test_sys_within_one_numa_node_is_not_taken_as_a_crossing_for_gpus_of_unknown_node():
    """Every pair SYS, GPUs 0,1 on NUMA 0 and 2 on NUMA 1, GPU 3's node not given (its row was cut
    from the paste): this box says SYS inside a node, so SYS says nothing of GPU 3's side."""
    table = """
        X   SYS SYS SYS
        SYS X   SYS SYS
        SYS SYS X   SYS
        SYS SYS SYS X
    """
    topo = link_table(table, numa=[0, 0, 1, None], socket=[None] * 4)
    assert link_crosses_numa(topo, topo.link(0, 2))  # known to be different nodes
    assert not link_crosses_numa(topo, topo.link(0, 1))  # one node, whatever the word
    assert not link_crosses_numa(topo, topo.link(0, 3)) and not link_crosses_numa(topo, topo.link(2, 3))
    assert socket_groups(topo) == [[0, 1], [2], [3]]
    plain = link_table(table, numa=[0, 1, 2, None], socket=[None] * 4)  # no SYS inside a node: the legend holds
    assert link_crosses_numa(plain, plain.link(0, 3))


def _link_by_link(topology):
    """What ``link_crosses_numa`` and ``same_numa_side`` say of each link, one by one."""
    from gputopo.analysis.place.locality import LinkSides, _verdict, numa_sides

    sides = numa_sides(topology)
    result = LinkSides()
    facts = [(link, (sides.get((link.a, link.b)), link.pcie_path, link.type, link.nvlink_count)) for link in topology.links]
    result.sys_within_node = any(side is True and (pcie or word) == "SYS" for _, (side, pcie, word, _) in facts)
    for link, fact in facts:
        joined, what = _verdict(*fact, result.sys_within_node)
        if joined:
            result.joined.append((link.a, link.b))
        if what:
            (result.crossing if what == 1 else result.unknown_nvlink).append(link)
    result.crossing_gpus = sorted({g for link in result.crossing for g in (link.a, link.b)})
    result.crossing_without_nvlink = [link for link in result.crossing if not link.is_nvlink]
    return result


def test_link_sides_in_columns_say_what_each_link_says():
    from linktable import nvl72

    from gputopo.analysis.place.locality import link_sides
    from gputopo.sources.reference import MACHINES, load_reference

    hosts = nvl72(trays=6)
    for gpu in hosts.gpus[:4]:
        gpu.cpu_affinity, gpu.numa_node = "0-3", None  # one tray known by CPU lists only
    hosts.links[3].pcie_path, hosts.links[4].type, hosts.links[4].nvlink_count = "SYS", "SYS", 0
    machines = [load_reference(name) for name in MACHINES] + [hosts, cube_mesh_8(**NO_SOCKETS),
                                                               link_table(PCIE_8, **NO_SOCKETS)]
    for topology in machines:
        expected = _link_by_link(topology)
        assert link_sides(topology) == expected, topology.label
        assert [link for link in topology.links if link_crosses_numa(topology, link)] == expected.crossing


def test_sockets_are_shown_apart_only_where_the_text_can_show_it():
    """The guard only spares work: the answer is every cross pair's same_socket being False."""
    from conftest import OWN_FIXTURES

    from gputopo.analysis.place.locality import same_socket, socket_groups, sockets_shown_apart
    from gputopo.sources.reference import load_reference
    from gputopo.sources.registry import read_text

    corpus = OWN_FIXTURES / "corpus" / "topo"
    shown = []
    for topology in [read_text((corpus / name).read_text(), name) for name in (
            "k80_4gpu_soc_header_and_legend_unindented.txt", "dgx1_p100_8gpu_nv1_mangled_header_soc.txt",
            "rtx4090_8gpu_all_sys_same_numa_2nic_tabs.txt")] + [two_socket_4(), load_reference("dgx1")]:
        groups = socket_groups(topology)
        if len(groups) == 2:
            every = all(same_socket(topology, a, b) is False for a in groups[0] for b in groups[1])
            assert sockets_shown_apart(topology, groups[0], groups[1]) is every
            shown.append(every)
    assert True in shown and False in shown
