"""What the NVLinks are, in words: NVSwitch fabric, direct links, or none."""

from __future__ import annotations

from linktable import cube_mesh_8, link_table, nvswitch, pcie_8

from gputopo.analysis.causes.nvlink_findings import nvlink_fabric
from gputopo.model import ReadingNote


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


def test_a_pcie_only_matrix_does_not_say_there_is_no_nvlink():
    """`nvidia-smi topo -mp` shows PCIe paths only (JUWELS Booster's NV4-meshed A100s read SYS there)."""
    topo = pcie_8()
    topo.reading_notes.append(ReadingNote("pcie-only-matrix"))
    assert "no-nvlink" not in by_code(topo)


def test_a_cut_paste_names_the_pairs_it_does_not_show_instead_of_every_pair():
    """nvidia-smi text cut after row GPU5 of 8 (NV18 everywhere shown): 6-7 is not in the source."""
    from gputopo.model import make_link

    topo = nvswitch(8, "NV18")
    topo.source = "nvidia-smi"
    topo.links = [link if (link.a, link.b) != (6, 7) else make_link(6, 7, "UNKNOWN") for link in topo.links]
    (fabric,) = [f for f in nvlink_fabric(topo) if f.code == "nvswitch-fabric"]
    assert fabric.message.startswith("NVSwitch fabric (inferred: every pair it shows is NV18, the NVSwitch pattern")
    assert "every pair of GPUs 0,1,2,3,4,5,6,7 but 6-7 (not in the source) is NV18" in fabric.message


def _switch_board_with_gpu_2_off_the_fabric(source: str = "nvidia-smi"):
    """An 8-GPU NV18 board whose GPU2 shows no NVLink (vllm#16336): NODE/SYS to every peer."""
    from gputopo.model import make_link

    topo = nvswitch(8, "NV18")
    topo.source = source
    topo.links = [make_link(l.a, l.b, "NODE" if max(l.a, l.b) < 4 else "SYS") if 2 in (l.a, l.b) else l
                  for l in topo.links]
    for link in topo.links:
        if link.is_nvlink:
            link.nvswitch = True
    for gpu in topo.gpus:  # text says no link counts or versions
        gpu.nvlink_active_links = gpu.nvlink_version = None
    return topo


def test_a_gpu_without_nvlink_on_a_switch_board_is_a_warning_not_silence():
    topo = _switch_board_with_gpu_2_off_the_fabric()
    found = by_code(topo)
    down = found["nvlink-links-down"]
    assert down.severity == "warning" and down.gpus == [2]
    assert "GPU 2 shows no NVLink to any other GPU while GPUs 0,1,3,4,5,6,7 reach each other through NVSwitch" in down.message
    assert "(inferred from their NV# pattern)" in down.message and "PCIe (NODE/SYS)" in down.message
    assert "nvidia-smi nvlink -s -i 2" in down.fix
    assert found["nvswitch-fabric"].message.startswith(
        "NVSwitch fabric (inferred: GPUs 0,1,3,4,5,6,7 show NV18 to each other, more NVLinks than one GPU has")


def test_a_gpu_of_another_model_beside_a_switch_board_is_another_card_not_one_with_links_down():
    """An L4 (a PCIe card, no NVLink) in an HGX H100 server: the source names both models."""
    topo = _switch_board_with_gpu_2_off_the_fabric()
    for gpu in topo.gpus:
        gpu.name = "NVIDIA L4" if gpu.index == 2 else "NVIDIA H100 80GB HBM3"
    assert "nvlink-links-down" not in by_code(topo)
    topo.gpu(2).name = "NVIDIA H100 80GB HBM3"  # one model: its links are down
    down = by_code(topo)["nvlink-links-down"]
    assert down.severity == "warning" and "unless it is another card" not in down.message
    for gpu in topo.gpus:
        gpu.name = None  # text alone: the other explanation is said
    assert "unless it is another card beside the board (the source does not name the GPUs)" in (
        by_code(topo)["nvlink-links-down"].message)


def test_a_gpu_whose_links_the_source_does_not_show_is_not_called_down():
    from gputopo.model import make_link

    topo = _switch_board_with_gpu_2_off_the_fabric()
    topo.links = [make_link(l.a, l.b, "UNKNOWN") if 2 in (l.a, l.b) and l.b == 7 else l for l in topo.links]
    assert "nvlink-links-down" not in by_code(topo)
    assert "nvlink-links-down" not in by_code(nvswitch(8, "NV18"))


_TWO_BRIDGED_PAIRS = """
    X     NV12  NODE  NODE
    NV12  X     NODE  NODE
    NODE  NODE  X     NV10
    NODE  NODE  NV10  X
"""  # as a real Vast.ai box of four A100s showed it (tests/fixtures/corpus/topo/vastai_*)


def test_a_bridged_pair_with_fewer_nvlinks_than_the_others_has_links_down():
    """The same bridges on GPUs of one model train the same link count: NV10 beside NV12 is two links
    down on that pair (a warning, an inference); without GPU names it is only "if they are alike"."""
    named = link_table(_TWO_BRIDGED_PAIRS, name="NVIDIA A100 80GB PCIe")
    (down,) = [f for f in nvlink_fabric(named) if f.code == "nvlink-links-down"]
    assert down.severity == "warning" and down.gpus == [2, 3]
    assert "pair 2-3 is joined by 10 NVLinks where the other NVLinked pair has 12" in down.message
    assert "one model (NVIDIA A100 80GB PCIe)" in down.message and "an inference" in down.message
    assert "nvidia-smi nvlink -s -i 2" in down.fix
    text = link_table(_TWO_BRIDGED_PAIRS, name=[None] * 4, nvswitch=None)
    (down,) = [f for f in nvlink_fabric(text) if f.code == "nvlink-links-down"]
    assert down.severity == "info" and "the source does not name the GPUs" in down.message


def test_equal_pairs_a_mesh_or_counts_from_nvml_give_no_bridged_pair_finding():
    equal = link_table(_TWO_BRIDGED_PAIRS.replace("NV10", "NV12"), name="NVIDIA A100 80GB PCIe")
    assert "nvlink-links-down" not in by_code(equal)
    assert "nvlink-links-down" not in by_code(cube_mesh_8())  # NV1 beside NV2 by design: several peers each
    counted = link_table(_TWO_BRIDGED_PAIRS, name="NVIDIA A100 80GB PCIe", gpu={"nvlink_active_links": [12, 12, 10, 10]})
    assert "nvlink-links-down" not in by_code(counted)  # diagnose says it from NVML's counts


def test_links_down_name_the_nvswitch_side_where_the_fabric_graph_knows_the_switches():
    from gputopo.analysis.causes.nvlink_findings import nvlinks_down
    from gputopo.model.fabric import (
        GPU,
        NVLINK,
        NVSWITCH,
        NVSWITCH_FABRIC,
        Fabric,
        FabricEdge,
        FabricNode,
    )

    topo = nvswitch(4, "NV12", "3.0")
    for gpu in topo.gpus:
        gpu.nvlink_active_links = 11 if gpu.index == 2 else 12
    fabric = Fabric([FabricNode(f"gpu:{g}", GPU, gpu=g) for g in range(4)])
    for k in range(6):
        fabric.add(FabricNode(f"pci:0000:c{k}:00.0", NVSWITCH, bdf=f"0000:c{k}:00.0"))
        for g in range(4):
            fabric.edges.append(FabricEdge(f"gpu:{g}", f"pci:0000:c{k}:00.0", NVLINK, count=2,
                                           active=1 if (g, k) == (2, 4) else 2))
    topo.fabric = fabric
    (down,) = nvlinks_down(topo)
    assert "GPU 2 has 11 (links up to NVSwitch 0000:c4:00.0: 1 of 2) (the others 12)" in down.message
    topo.fabric = Fabric([*fabric.nodes[:4], FabricNode(NVSWITCH_FABRIC, NVSWITCH)],
                         [FabricEdge(f"gpu:{g}", NVSWITCH_FABRIC, NVLINK, 12, 11 if g == 2 else 12) for g in range(4)])
    (down,) = nvlinks_down(topo)  # one switch node: the total says it all
    assert "GPU 2 has 11 (the others 12)" in down.message


def test_a_snapshots_fabric_of_more_switches_than_a_gpu_has_links_names_no_side():
    """(A snapshot's fabric is input: one GPU's edges to 1,600 switch nodes beside 999 GPUs with a link
    down named every switch for every one of them: 770 KB of snapshot made a 56 MB finding, as large
    as the square of the input allowed.)"""
    from gputopo.analysis.causes.nvlink_findings import nvlinks_down
    from gputopo.model import MAX_NVLINKS_PER_PAIR
    from gputopo.model.fabric import GPU, NVLINK, NVSWITCH, Fabric, FabricEdge, FabricNode

    topo = nvswitch(4, "NV12", "3.0")
    for gpu in topo.gpus:
        gpu.nvlink_active_links = 18 if gpu.index == 0 else 1
    fabric = Fabric([FabricNode(f"gpu:{g}", GPU, gpu=g) for g in range(4)])
    switches = MAX_NVLINKS_PER_PAIR + 1
    fabric.nodes += [FabricNode(f"s{k}", NVSWITCH) for k in range(switches)]
    fabric.edges += [FabricEdge("gpu:0", f"s{k}", NVLINK, count=1) for k in range(switches)]
    topo.fabric = fabric
    (down,) = nvlinks_down(topo)
    assert "GPU 1 has 1; GPU 2 has 1; GPU 3 has 1 (the others 18)" in down.message and "NVSwitch" not in down.message
