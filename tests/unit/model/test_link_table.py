"""``LinkTable``: a topology's links as columns, each link with its kind (every field but its ends,
measurement and health)."""

from __future__ import annotations

import copy

from linktable import cube_mesh_8, nvl72

from gputopo.model import Measurement, make_link
from gputopo.model.link_table import KIND_FIELDS, LinkTable


def test_links_of_one_kind_differ_only_in_their_ends_measurement_and_health():
    topo = cube_mesh_8()
    table = LinkTable.of(topo.links)
    assert (table.ends_a, table.ends_b) == ([lk.a for lk in topo.links], [lk.b for lk in topo.links])
    for link, kind in zip(topo.links, table.kind_of):
        assert tuple(getattr(link, name) for name in KIND_FIELDS) == table.kinds[kind]
    assert len(set(table.kinds)) == len(table.kinds)  # each kind once, numbered in order of its first link
    assert table.kind_of[0] == 0 and sorted(set(table.kind_of)) == list(range(len(table.kinds)))
    assert [table.kind_of.index(k) for k in range(len(table.kinds))] == sorted(
        table.kind_of.index(k) for k in range(len(table.kinds)))
    assert all(table.examples[k] is topo.links[table.kind_of.index(k)] for k in range(len(table.kinds)))


def test_a_measurement_or_a_health_finding_does_not_make_another_kind():
    plain = [make_link(0, 1, "NV2"), make_link(0, 2, "NV2"), make_link(1, 2, "SYS")]
    plain[1].measured = Measurement(a_to_b_gbps=40.0)
    plain[1].health = ["acs"]
    table = LinkTable.of(plain)
    assert table.kind_of == [0, 0, 1]
    assert table.kind_fact("type") == ["NV2", "SYS"]
    assert table.links_where(plain, [1]) == [plain[2]]
    assert table.kinds_where([0]) == [True, True, False]


def test_a_rack_has_a_handful_of_kinds_and_the_topology_keeps_its_table():
    topo = nvl72()
    table = topo.link_table()
    assert len(topo.links) == 72 * 71 // 2 and len(table.kinds) <= 4
    assert topo.link_table() is table  # built once
    topo.links = list(topo.links)
    assert topo.link_table() is not table  # another list: built again


def test_a_deep_copy_keeps_no_table_of_the_original():
    topo = cube_mesh_8()
    topo.link_table()
    copied = copy.deepcopy(topo)
    copied.links[0].type = "SYS"  # a copy is changed (sources.merge), then analysed
    assert copied.link_table().kinds[copied.link_table().kind_of[0]][0] == "SYS"
    assert copied == copy.deepcopy(copied) and topo.links[0].type != "SYS"


def test_kind_counts_and_gpus_of_are_those_of_the_links():
    """Issue 21: what findings ask of every link (how many of each kind, which GPUs) from the columns."""
    from collections import Counter

    topo = nvl72()
    table = LinkTable.of(topo.links)
    counts = Counter(table.kind_of)
    assert table.kind_counts() == [counts[k] for k in range(len(table.kinds))]
    assert table.gpus_of() == {g for link in topo.links for g in (link.a, link.b)}
    where = table.kinds_where([0])
    assert table.gpus_of(where) == {g for link, w in zip(topo.links, where) if w for g in (link.a, link.b)}


def test_position_finds_the_first_link_of_a_pair_in_either_order():
    """Issue 21: recommend looks up the links of a few hops in a 576-GPU domain by place in the
    table (a dict of the pairs as numbers), not by an index of every link's (a, b) tuple."""
    links = [make_link(0, 1, "NV2"), make_link(1, 2, "SYS"), make_link(0, 3, "PIX"), make_link(1, 0, "NV4"),
             make_link(2, 2, "SYS")]
    table = LinkTable.of(links)
    assert [table.position(0, 1), table.position(1, 0), table.position(2, 1), table.position(3, 0)] == [0, 0, 1, 2]
    assert table.position(0, 2) is None and table.position(2, 9) is None and table.position(-1, 0) is None
    assert table.position(2, 2) is None  # no GPU has a link to itself, whatever the list says
    assert table.pair_numbers() == (4, [0 * 4 + 1, 1 * 4 + 2, 0 * 4 + 3, 0 * 4 + 1, 2 * 4 + 2])
    assert table.pairs_linked() == 3 and not table.one_per_pair()  # (0-1 twice; 2-2 no pair)
    assert LinkTable.of(links[:3]).one_per_pair()


def test_a_table_whose_ends_are_no_numbers_still_finds_and_counts_pair_by_pair():
    table = LinkTable([0, "x"], [1, 2], [0, 0], [("SYS",) + (None,) * 7], [make_link(0, 1, "SYS")])
    assert table.pair_numbers() is None and table.pairs_linked() is None
    assert table.position(2, "x") == 1 and table.position(0, 2) is None


def test_kinds_where_every_kind_or_none_and_the_gpus_of_kinds():
    topo = nvl72(trays=3)
    table = LinkTable.of(topo.links)
    every = range(len(table.kinds))
    assert table.kinds_where(every) == [True] * len(topo.links) and table.kinds_where([99]) == [False] * len(topo.links)
    assert table.gpus_of_kinds(every) is table.gpus_of() == set(topo.gpu_indices)  # the one set, kept
    for kind in every:
        assert table.gpus_of_kinds([kind]) == {g for link, k in zip(topo.links, table.kind_of) if k == kind
                                               for g in (link.a, link.b)}
    assert table.gpus_of_kinds([]) == set()
