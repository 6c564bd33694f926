"""What the NVLinks are, in words: NVSwitch fabric, direct links, or none."""

from __future__ import annotations

from linktable import cube_mesh_8, link_table, nvswitch, pcie_8

from gputopo.analysis.nvlink_findings import nvlink_fabric


def by_code(topology):
    return {f.code: f for f in nvlink_fabric(topology)}


def test_an_nvswitch_fabric_says_any_group_is_alike():
    (finding,) = nvlink_fabric(nvswitch(8, "NV18", "4.0"))
    assert finding.code == "nvswitch-fabric" and "every pair is NV18 (NVLink 4.0)" in finding.message
    assert "any GPUs of it can be grouped together" in finding.message and finding.gpus == list(range(8))


def test_nvswitch_inferred_from_text_says_so():
    topo = nvswitch(4, "NV12", "3.0")
    topo.source = "nvidia-smi"
    assert "inferred: every pair shows NV12" in by_code(topo)["nvswitch-fabric"].message


def test_a_direct_mesh_counts_pairs_per_word_and_names_the_pcie_rest():
    finding = by_code(cube_mesh_8())["nvlink-summary"]
    assert "8 pairs NV2, 8 pairs NV1; the other 12 pairs use PCIe (SYS)" in finding.message


def test_nvlinks_the_source_cannot_place_say_so():
    topo = link_table("""
        X    NV4  NV4
        NV4  X    NV4
        NV4  NV4  X
    """, nvswitch=None)
    assert "whether through NVSwitch or direct, the source does not say" in by_code(topo)["nvlink-summary"].message


def test_no_nvlink_only_where_every_link_is_known():
    assert by_code(pcie_8())["no-nvlink"].gpus == list(range(8))
    unknown = pcie_8()
    unknown.links[0].type = "UNKNOWN"
    assert nvlink_fabric(unknown) == []


def test_a_cut_paste_names_the_pairs_it_does_not_show_instead_of_every_pair():
    """nvidia-smi text cut after row GPU5 of 8 (NV18 everywhere shown): 6-7 is not in the source."""
    from gputopo.model import make_link

    topo = nvswitch(8, "NV18")
    topo.source = "nvidia-smi"
    topo.links = [link if (link.a, link.b) != (6, 7) else make_link(6, 7, "UNKNOWN") for link in topo.links]
    (fabric,) = [f for f in nvlink_fabric(topo) if f.code == "nvswitch-fabric"]
    assert fabric.message.startswith("NVSwitch fabric (inferred: every pair it shows is NV18, the NVSwitch pattern")
    assert "every pair of GPUs 0,1,2,3,4,5,6,7 but 6-7 (not in the source) is NV18" in fabric.message
