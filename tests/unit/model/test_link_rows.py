"""``link_rows`` and ``Topology.to_json_text``: a large domain's links written once per kind of link,
the same text as ``strict_json_text(topology.to_dict())``."""

from __future__ import annotations

import json

from linktable import cube_mesh_8, nvl72

from gputopo.model import Gpu, Measurement, Topology, make_link, plain_data
from gputopo.model.json_text import strict_json_text
from gputopo.model.link_rows import link_rows


def test_a_large_domain_is_written_as_its_dicts_would_be():
    topo = nvl72()
    text = topo.to_json_text()
    assert text == strict_json_text(topo.to_dict())
    assert text.count("\n") < 2556 + 72 * 30  # one line per link (a GPU: one line per field)
    assert topo.to_json_text(indent=1) == strict_json_text(topo.to_dict(), indent=1)


def test_measured_links_health_findings_and_non_finite_figures_are_written_as_the_dicts_are():
    topo = nvl72()
    topo.links[5].measured = Measurement(a_to_b_gbps=float("nan"), b_to_a_gbps=640.5, method="nvbandwidth")
    topo.links[7].health = ["acs", "iommu"]
    topo.links[9].health = []
    topo.links[11].p2p_read = "TNS"
    topo.links[12].nvswitch = None
    topo.links[13].pcie_path = 'a "quoted" }, { word'
    text = topo.to_json_text()
    assert text == strict_json_text(topo.to_dict())
    rows = {json.loads(line.rstrip(",")).get("b"): json.loads(line.rstrip(",")) for line in text.splitlines()
            if line.startswith('    {"a": 0,')}
    assert rows[6]["measured"]["a_to_b_gbps"] is None and rows[8]["health"] == ["acs", "iommu"]


def test_a_small_topology_is_written_as_json_dumps_writes_it():
    topo = cube_mesh_8()
    assert topo.to_json_text() == json.dumps(topo.to_dict(), indent=2) + "\n"


def test_rows_are_not_made_where_the_ends_are_not_plain_integers():
    links = [make_link(0, 1, "NV2"), make_link(0, 2, "SYS")]
    assert link_rows(links, plain_data) == [json.dumps(plain_data(link)) for link in links]
    links[1].a = True
    assert link_rows(links, plain_data) is None


def test_a_domain_whose_links_are_all_of_one_kind_round_trips():
    n = 64
    topo = Topology(gpus=nvl72().gpus[:n], links=[make_link(a, b, "NV18", nvswitch=True)
                                                 for a in range(n) for b in range(a + 1, n)])
    assert Topology.from_dict(json.loads(topo.to_json_text())) == topo


def test_a_large_domains_text_is_made_in_blocks_of_rows_not_whole():
    """Issue 21: scan --json writes a domain's parts as they are made (35 MB for 576 GPUs, never
    held whole); joined, they are the text of its dicts."""
    from gputopo.model.link_rows import BLOCK_ROWS

    n = 100  # 4950 links: two blocks
    topo = Topology(gpus=[Gpu(index=k, name="GB200") for k in range(n)],
                    links=[make_link(a, b, "NV18", nvswitch=True) for a in range(n) for b in range(a + 1, n)])
    parts = list(topo.json_parts())
    assert "".join(parts) == strict_json_text(topo.to_dict()) == topo.to_json_text()
    blocks = [part for part in parts if part.count('{"a": ') > 1]
    assert len(blocks) == 2 and blocks[0].count('{"a": ') == BLOCK_ROWS
