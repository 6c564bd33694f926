"""NCCL topology XML on real dumps: GPUs by NVML index with bus ids and NUMA nodes, NVSwitch fabric
as NV<n> to every peer, NICs; hostile XML refused before parsing."""

import pytest

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import InputError
from gputopo.sources.tools import nccl_xml
from unit.sources.readers_corpus import cases, text_of


@pytest.mark.parametrize(("name", "want"), cases("nccl_xml"))
def test_real_dumps_read_as_the_expert_reads_them(name, want):
    text = text_of("nccl_xml", name)
    assert nccl_xml.sniff(text)
    topo = nccl_xml.read(text, name)
    assert len(topo.gpus) == want["gpus"]
    for index, bus in want["bus_ids"].items():
        assert topo.gpu(int(index)).pci_bus_id == bus
    for index, node in want.get("numa", {}).items():
        assert topo.gpu(int(index)).numa_node == node
    assert len(topo.nics) == want["nics"]
    for key, word in want.get("pair_words", {}).items():
        a, b = (int(x) for x in key.split("-"))
        assert topo.link(a, b).type == word
    if "reading_notes" in want:
        assert sorted(n.code for n in topo.reading_notes) == want["reading_notes"]
    if want["gpus"] > 1 and want["nvlinks_per_gpu"] is not None:
        assert {link.type for link in topo.links} == {f"NV{want['nvlinks_per_gpu']}"}
        assert all(link.nvswitch is want["nvswitch"] for link in topo.links)


def test_the_pcie_path_word_follows_numa_nodes_and_the_tree():
    topo = nccl_xml.read(text_of("nccl_xml", "ibm_gx3d_8xh100_nvswitch_8nic_topo.xml"), "ibm")
    assert topo.link(0, 4).pcie_path == "SYS" and topo.link(0, 3).pcie_path == "NODE"


def test_a_direct_nvlink_between_two_gpus_is_nv_count_without_nvswitch():
    text = ('<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0"><gpu dev="0"><nvlink target="0000:02:00.0" count="2"/></gpu></pci>'
            '<pci busid="0000:02:00.0"><gpu dev="1"><nvlink target="0000:01:00.0" count="2"/></gpu></pci></cpu></system>')
    link = nccl_xml.read("pasted before\n" + text + "\nafter", "x").link(0, 1)
    assert (link.type, link.nvswitch, link.pcie_path) == ("NV2", False, "NODE")


@pytest.mark.parametrize("bad", [
    '<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]><system version="1"><cpu>&lol2;</cpu></system>',
    '<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0">',
    '<system version="1"><cpu <<< </system>',
])
def test_hostile_or_cut_xml_is_one_input_error(bad):
    with pytest.raises(InputError):
        nccl_xml.read(bad, "bad")


def _switched_gpu(dev, bus, targets, close=True):
    links = "".join(f'<nvlink target="0000:{t}:00.0" count="2" tclass="0x068000"/>' for t in targets)
    return f'<pci busid="0000:{bus}:00.0"><gpu dev="{dev}">{links}' + ("</gpu></pci>" if close else "")


def test_a_dump_cut_inside_a_gpu_is_read_and_that_gpus_pairs_are_unknown():
    """nccl#1125 pasted a dump cut inside GPU 0's NVLink list: read, not refused."""
    topo = nccl_xml.read(text_of("nccl_xml", "nccl1125_1xa100_amd_epyc_nvswitch_targets_cut.xml"), "cut")
    assert [(g.index, g.pci_bus_id, g.numa_node) for g in topo.gpus] == [(0, "0000:07:00.0", 0)]
    assert any(f.code == "nccl-xml-cut" and "GPU 0's NVLink list was cut" in f.message for f in note_findings(topo.reading_notes))
    six = ["d2", "d3", "d4", "d5", "d6", "d7"]
    text = ('<system version="1"><cpu numaid="0">' + _switched_gpu(0, "07", six) + _switched_gpu(1, "0f", six) +
            _switched_gpu(2, "47", six[:2], close=False))
    cut = nccl_xml.read(text + '\n<nvlink target="0000:d4', "x")
    assert cut.link(0, 1).type == "NV12" and cut.link(0, 2).type == "UNKNOWN" and cut.link(1, 2).nvswitch is None
    whole_gpus = nccl_xml.read(text + "</gpu></pci>\n<pci busid", "y")
    assert whole_gpus.link(0, 2).type == "NV4"  # GPU 2's element closed: its two switch links are all it has
    with pytest.raises(InputError, match="DOCTYPE"):
        nccl_xml.read('<!DOCTYPE x><system version="1"><cpu numaid="0">', "z")


@pytest.mark.parametrize("closed", [True, False])
def test_a_thousand_nested_pci_elements_are_one_input_error_not_a_recursion_error(closed):
    """The attacker's 32 KB file: the tree was walked by recursion, one Python frame per <pci>."""
    text = '<system version="1"><cpu numaid="0">' + '<pci busid="0000:01:00.0">' * 1000
    if closed:
        text += "</pci>" * 1000 + "</cpu></system>"
    with pytest.raises(InputError, match="nests elements 100[0-9] deep") as refused:
        nccl_xml.read(text, "deep.xml")
    assert "\n" not in str(refused.value)


def test_a_gpu_as_deep_as_the_bound_allows_keeps_its_whole_pcie_path():
    depth = nccl_xml.MAX_XML_DEPTH - 3  # system, cpu, then <pci> levels, then the gpu element
    pcis = "".join(f'<pci busid="0000:{i:02x}:00.0">' for i in range(depth))
    gpu = '<gpu dev="0"/><gpu dev="1"/>'  # two GPUs under one bridge: PIX
    text = f'<system version="1"><cpu numaid="0">{pcis}{gpu}{"</pci>" * depth}</cpu></system>'
    topo = nccl_xml.read(text, "deep.xml")
    assert [g.pci_bus_id for g in topo.gpus] == [f"0000:{depth - 1:02x}:00.0"] * 2
    assert topo.link(0, 1).pcie_path == "PIX"


def test_a_tag_without_its_closing_bracket_is_one_input_error():
    """``<aaaa...`` with no ``>`` before the next tag: the tag pattern handed name characters back to
    ``[^<>]*?`` (the square of the length: hours at 4 MB); now one pass, and the damage is said."""
    text = '<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0"><gpu dev="0"/><' + "a" * 100_000 + "<x/>"
    with pytest.raises(InputError, match="is damaged"):
        nccl_xml.read(text, "cut.xml")


IBM = "ibm_gx3d_8xh100_nvswitch_8nic_topo.xml"
FRAGMENT_DRESSINGS = {
    "as pasted": lambda t: t,
    "CRLF": lambda t: t.replace("\n", "\r\n"),
    "tabs for spaces": lambda t: t.replace("  ", "\t"),
    "shell prompt": lambda t: "\n".join("$ " + line for line in t.split("\n")),
    "markdown fence": lambda t: "```xml\n" + t.rstrip("\n") + "\n```\n",
    "host prefix": lambda t: "\n".join("node-7: " + line for line in t.split("\n")),
}


def _without_root(text: str) -> str:
    """DERIVED: a real dump with its ``<system ...>`` and ``</system>`` lines deleted."""
    return "\n".join(line for line in text.split("\n") if not line.lstrip().startswith(("<system", "</system")))


@pytest.mark.parametrize("dressing", FRAGMENT_DRESSINGS)
def test_a_dump_without_its_system_root_is_read_and_the_missing_root_said(dressing):
    text = FRAGMENT_DRESSINGS[dressing](_without_root(text_of("nccl_xml", IBM)))
    assert nccl_xml.sniff(text)
    topo = nccl_xml.read(text, "fragment.xml")
    whole = nccl_xml.read(text_of("nccl_xml", IBM), IBM)
    assert [(g.index, g.pci_bus_id, g.numa_node) for g in topo.gpus] == [(g.index, g.pci_bus_id, g.numa_node) for g in whole.gpus]
    assert [(link.type, link.pcie_path) for link in topo.links] == [(link.type, link.pcie_path) for link in whole.links]
    assert [n.code for n in topo.reading_notes] == ["nccl-xml-no-root"]
    (finding,) = note_findings(topo.reading_notes)
    assert "without its <system> root" in finding.message


def test_pci_elements_without_their_cpu_leave_numa_and_the_pcie_word_between_trees_unknown():
    """DERIVED: lines 3-32 of the IBM dump (two PCIe switch subtrees, GPUs 0 and 1), then the dump's
    closing ``</pci>`` and ``</cpu>`` lines, of elements the fragment does not open."""
    lines = text_of("nccl_xml", IBM).split("\n")
    text = "\n".join(lines[2:32]) + "\n    </pci>\n  </cpu>\n"
    assert nccl_xml.sniff(text)
    topo = nccl_xml.read(text, "fragment.xml")
    assert [g.pci_bus_id for g in topo.gpus] == ["0000:a4:00.0", "0000:ae:00.0"]
    assert all(g.numa_node is None for g in topo.gpus)
    link = topo.link(0, 1)
    assert link.type == "NV18" and link.nvswitch is True  # the NVLinks are in the text
    assert link.pcie_path is None  # whether both switches hang off one CPU is not
    (finding,) = note_findings(topo.reading_notes)
    assert "NUMA nodes" in finding.message and "unknown" in finding.message


def test_each_gpus_way_to_each_nic_is_worded_from_the_tree_as_between_gpus():
    # The IBM dump hangs each GPU and one ConnectX under one PCIe switch (PIX), four per CPU.
    topo = nccl_xml.read(text_of("nccl_xml", IBM), "ibm")
    words = {(link.gpu, link.nic): link.type for link in topo.nic_links}
    assert len(words) == 64
    assert {(g.compute_capability, g.nvlink_active_links) for g in topo.gpus} == {("9.0", 18)}  # sm="90", 5+5+4+4 up
    assert words[(0, "mlx5_7")] == "PIX" and words[(0, "mlx5_6")] == "NODE" and words[(0, "mlx5_3")] == "SYS"
    assert sorted(nic for (gpu, nic), word in words.items() if word == "PIX" and gpu == 4) == ["mlx5_3"]
    # A fragment without its <cpu>: a GPU and a NIC in other switch trees are not worded (not known).
    lines = text_of("nccl_xml", IBM).split("\n")
    fragment = nccl_xml.read("\n".join(lines[2:32]) + "\n    </pci>\n  </cpu>\n", "fragment.xml")
    assert {(link.gpu, link.nic, link.type) for link in fragment.nic_links} == {(0, "mlx5_7", "PIX"), (1, "mlx5_6", "PIX")}


@pytest.mark.parametrize("text", ['<pci busid="0000:01:00.0">', "<gpu dev=\"0\"/>", "<cpu numaid=\"0\"></cpu>"])
def test_xml_without_a_gpu_under_a_cpu_or_pci_is_not_this_kind(text):
    assert not nccl_xml.sniff(text)
    with pytest.raises(InputError):
        nccl_xml.read(text, "x")


@pytest.mark.parametrize(("name", "want"), cases("nccl_xml"))
def test_the_fabric_graph_gives_the_pair_tables_nvlink_words(name, want):
    topo = nccl_xml.read(text_of("nccl_xml", name), name)
    fabric = topo.fabric
    assert sorted(node.gpu for node in fabric.nodes if node.kind == "gpu") == topo.gpu_indices
    for gpu in topo.gpus:  # each GPU under its NUMA node, as the XML nests it
        assert gpu.numa_node is None or fabric.numa_of(fabric.gpu_node(gpu.index).id) == gpu.numa_node
    cut = next((note.facts["cut_gpu"] for note in topo.reading_notes if note.code == "nccl-xml-cut"), None)
    for link in topo.links:
        if cut not in (link.a, link.b):
            assert (fabric.nvlink_word(link.a, link.b) or link.type) == link.type, link


def test_nvlink_elements_are_edges_to_gpus_switches_or_the_switch_the_host_cannot_see():
    text = ('<system version="1"><cpu numaid="1"><pci busid="0000:05:00.0" link_speed="32.0 GT/s PCIe" link_width="16">'
            '<pci busid="0000:07:00.0"><gpu dev="0"><nvlink target="0000:08:00.0" count="4" tclass="0x030200"/>'
            '<nvlink target="fffffff:ffff:ff" count="6" tclass="0x068000"/></gpu></pci>'
            '<pci busid="0000:08:00.0"><gpu dev="1"><nvlink target="0000:07:00.0" count="4" tclass="0x030200"/>'
            '<nvlink target="0000:c1:00.0" count="5" tclass="0x068000"/></gpu></pci></pci>'
            '<pci busid="0000:09:00.0"><nic><net name="mlx5_0"/></nic></pci></cpu></system>')
    topo = nccl_xml.read(text, "x")
    fabric = topo.fabric
    assert fabric.node("pci:0000:05:00.0").kind == "bridge" and fabric.node("pci:0000:05:00.0").link_width_current == 16
    assert fabric.node("pci:0000:07:00.0").parent == "pci:0000:05:00.0" and fabric.numa_of("pci:0000:07:00.0") == 1
    assert fabric.node("pci:0000:09:00.0").nic == "mlx5_0" and fabric.node("pci:0000:c1:00.0").kind == "nvswitch"
    assert fabric.nvswitches_of("pci:0000:07:00.0") == ["nvswitch:fabric"]
    assert fabric.gpu_nvlinks(0, 1) == (4, False) and topo.link(0, 1).type == "NV4"
    assert {(e.a, e.b, e.count, e.active) for e in fabric.edges} == {
        ("pci:0000:07:00.0", "pci:0000:08:00.0", 4, 4), ("pci:0000:07:00.0", "nvswitch:fabric", 6, 6),
        ("pci:0000:08:00.0", "pci:0000:c1:00.0", 5, 5)}  # NCCL writes only the links that are up


def test_a_fragment_cut_inside_a_gpu_leaves_that_gpus_pairs_unknown_and_says_so():
    """aliyun/SimAI#128: an excerpt without <system>, cut after GPU 7's first of four NVSwitch lines:
    its switch links are a lower bound, so the pair is not NV4 (nor any count): unknown, and the cut said."""
    topo = nccl_xml.read(text_of("nccl_xml", "simai128_8xh100_nvswitch_fragment_no_root_gpu5_cut_in_gpu7.xml"), "f")
    assert topo.link(5, 7).type == "UNKNOWN"
    (cut,) = [f for f in note_findings(topo.reading_notes) if f.code == "nccl-xml-cut"]
    assert "GPU 7's NVLink list was cut" in cut.message
    whole = '<pci busid="0000:01:00.0"><gpu dev="0">' + "".join(
        f'<nvlink target="0000:0{s}:00.0" count="2" tclass="0x068000"/>' for s in "56") + "</gpu></pci>"
    closed = nccl_xml.read(whole + whole.replace('"0000:01', '"0000:02').replace('dev="0"', 'dev="1"'), "closed")
    assert closed.link(0, 1).type == "NV4" and not any(n.code == "nccl-xml-cut" for n in closed.reading_notes)


@pytest.mark.parametrize("links", [
    '<nvlink target="0000:02:00.0" count="100"/>',
    '<nvlink target="0000:02:00.0" count="2147483647"/>',
    '<nvlink target="0000:0a:00.0" count="1" tclass="0x068000"/>' * 65,
])
def test_more_nvlinks_than_a_gpu_has_are_one_input_error(links):
    """(``count="100"`` made the pair NV100, shown and saved, and the saved snapshot then failed to
    read back: ``unknown link type 'NV100'``; a count of 2**31 - 1 was taken as that many links.)"""
    text = (f'<system version="1"><cpu numaid="0"><pci busid="0000:01:00.0"><gpu dev="0">{links}</gpu></pci>'
            '<pci busid="0000:02:00.0"><gpu dev="1"/></pci></cpu></system>')
    with pytest.raises(InputError, match="more NVLinks than a GPU has"):
        nccl_xml.read(text, "x")
