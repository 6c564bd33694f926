"""nvidia-smi nvlink -s/-c and topo -p2p alone, on real captures."""

import pytest

from gputopo.errors import InputError
from gputopo.sources.smi import nvlink, smi_p2p
from unit.sources.readers_corpus import cases, text_of


@pytest.mark.parametrize(("name", "want"), cases("nvlink"))
def test_nvlink_outputs_read_as_the_expert_reads_them(name, want):
    text = text_of("nvlink", name)
    assert nvlink.sniff(text) and not smi_p2p.sniff(text)
    topo = nvlink.read(text, name)
    listed = sorted(g.index for g in topo.gpus)
    assert listed == want.get("gpus_listed", list(range(want.get("gpus", 0))))
    for gpu, count in want.get("active", {}).items():
        assert topo.gpu(int(gpu)).nvlink_active_links == count
        assert all(s.gbps == want["gbps_per_link"] for s in topo.nvlinks if s.gpu == int(gpu) and s.active)
    for gpu, links in want.get("inactive", {}).items():
        assert sorted(s.link for s in topo.nvlinks if s.gpu == int(gpu) and s.active is False) == links
    for gpu in want.get("count_unknown", []):  # a list the paste elided: its count unknown, never "links down"
        assert topo.gpu(gpu).nvlink_active_links is None
        assert any(n.code == "nvlink-list-cut" and gpu in n.gpus for n in topo.reading_notes)
    if "links_per_gpu" in want:
        assert all(sum(1 for s in topo.nvlinks if s.gpu == g) == want["links_per_gpu"] for g in listed)
    for gpu, far_end in want.get("remote", {}).items():
        ends = {s.link: s.remote for s in topo.nvlinks if s.gpu == int(gpu)}
        assert {link for link, end in ends.items() if end} == {s.link for s in topo.nvlinks if s.gpu == int(gpu) and s.active}
        assert {end for end in ends.values() if end} == {far_end}
    for gpu, per_link in want.get("capabilities", {}).items():
        for link, caps in per_link.items():
            state = next(s for s in topo.nvlinks if s.gpu == int(gpu) and s.link == int(link))
            assert all(state.capabilities[k] is v for k, v in caps.items()) and state.active is None


def test_link_lines_without_a_gpu_line_are_one_input_error():
    with pytest.raises(InputError, match="without a `GPU N:`"):
        nvlink.read("\t Link 0: 25.781 GB/s\n", "x")


def test_remote_ends_of_nvlink_r_are_kept():
    text = "GPU 0: Tesla V100 (UUID: GPU-1)\n\t Link 0: Remote Device Type: GPU, Remote PCI Bus ID: 00000000:1B:00.0\n"
    assert nvlink.read(text, "r").nvlinks[0].remote == "0000:1b:00.0"


@pytest.mark.parametrize(("name", "want"), cases("topo_p2p"))
def test_topo_p2p_alone_gives_gpus_and_p2p_words(name, want):
    text = text_of("topo_p2p", name)
    assert smi_p2p.sniff(text)
    topo = smi_p2p.read(text, name)
    assert len(topo.gpus) == want["gpus"]
    for key, word in want["p2p"].items():
        a, b = (int(x) for x in key.split("-"))
        link = topo.link(a, b)
        assert link.type == "UNKNOWN" and link.p2p_read == word
    assert any(n.code == "p2p-capability-assumed" for n in topo.reading_notes)


def test_topo_p2p_beside_topo_m_is_left_to_the_topo_m_reader():
    text = text_of("nvlink", "quadro_rtx8000_pair_status_topo_errors_session.txt")
    assert not smi_p2p.sniff(text)


def test_an_elided_uuid_is_not_read_into_the_gpu_name():
    """Azure/azhpc-diagnostics#73 pasted `GPU 3: Tesla V100-SXM2-32GB (UUID: ...)`."""
    topo = nvlink.read(text_of("nvlink", "azhpc73_v100_status_elided_gpu3_links_3_5_inactive.txt"), "a")
    assert topo.gpu(3).name == "Tesla V100-SXM2-32GB" and topo.gpu(3).uuid is None
    real = nvlink.read("GPU 0: Tesla V100 (UUID: GPU-12ab-34cd)\n\t Link 0: 25.781 GB/s\n", "r")
    assert real.gpu(0).uuid == "GPU-12ab-34cd" and real.gpu(0).name == "Tesla V100"


def test_gpu_and_remote_lines_are_read_to_the_shared_line_width_only():
    """A GPU's UUID is found at the end of its line, a far end after ``Remote``: within the first
    ``LINE_CAP_CHARS`` of the line, never past them."""
    from gputopo.sources.pasted import LINE_CAP_CHARS

    uuid = "GPU-12345678-1234-1234-1234-123456789abc"
    pad = " " * (LINE_CAP_CHARS - 200)

    def read(pad: str) -> object:
        return nvlink.read(f"GPU 0: NVIDIA A100{pad} (UUID: {uuid})  \n\t Link 0: Remote{pad} 0000:07:00.0\n"
                          "\t Link 1: <inactive>\n", "s")

    near = read(" " * 100)
    assert (near.gpus[0].name, near.gpus[0].uuid) == ("NVIDIA A100", uuid)
    assert [s.remote for s in near.nvlinks] == ["0000:07:00.0", None]
    far = read(pad + " " * 400)
    assert (far.gpus[0].name, far.gpus[0].uuid) == ("NVIDIA A100", None)
    assert [s.remote for s in far.nvlinks] == [None]


def test_an_elision_below_a_short_list_leaves_its_count_unknown_and_one_after_a_whole_list_does_not():
    """k8s-test-infra#371 lists GPU 1's links 0-1 then '...': its other links are left out, not down. In
    the DGX-1 capture '[snip]' follows GPU 0's whole list and stands for GPUs 1-6: GPU 0's count holds."""
    cut = nvlink.read(text_of("nvlink", "k8sti371_gb200_status_18_links_53gbps_gpu1_elided.txt"), "k")
    assert (cut.gpu(0).nvlink_active_links, cut.gpu(1).nvlink_active_links) == (18, None)
    (note,) = cut.reading_notes
    assert (note.code, note.gpus, note.facts["links_listed"], note.facts["lines"]) == ("nvlink-list-cut", [1], [2], [24])
    whole = nvlink.read(text_of("nvlink", "dgx1_v100_status_snipped.txt"), "d")
    assert [g.nvlink_active_links for g in whole.gpus] == [6, 6] and whole.reading_notes == []
    from gputopo.analysis.causes.diagnose import diagnose

    assert "nvlink-links-down" not in {f.code for f in diagnose(cut)}
