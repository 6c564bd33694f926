"""p2pBandwidthLatencyTest on real captures: devices and bus ids, peer lines, P2P on/off figures per
direction, bidirectional and latency, and the writes-vs-reads direction rule."""

import pytest

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.errors import InputError
from gputopo.sources.tools import p2pbw
from unit.sources.readers_corpus import DRESSINGS, cases, directed_gbps, dressed_cases, pair, reading, text_of


@pytest.mark.parametrize(("name", "want"), cases("p2pbw"))
def test_real_captures_read_as_the_expert_reads_them(name, want):
    text = text_of("p2pbw", name)
    assert p2pbw.sniff(text)
    topo = p2pbw.read(text, name)
    assert len(topo.gpus) == want["gpus"]
    bus_ids = want.get("bus_ids")
    if bus_ids is None:
        assert all(g.pci_bus_id is None for g in topo.gpus)
        assert any(n.code == "cuda-ordinals-only" for n in topo.reading_notes)
    else:
        assert {str(g.index): g.pci_bus_id for g in topo.gpus} == bus_ids
    for index, gpu_name in want.get("names", {}).items():
        assert topo.gpu(int(index)).name == gpu_name
    for key, can in want.get("can_peer", {}).items():
        assert topo.link(*pair(key, "-")).can_peer is can
    for key, gbps in want.get("p2p_enabled_gbps", {}).items():
        assert directed_gbps(topo, *pair(key, "->")) == pytest.approx(gbps)
    for key, gbps in want.get("p2p_disabled_gbps", {}).items():
        assert directed_gbps(topo, *pair(key, "->"), field="p2p_off_") == pytest.approx(gbps)
    for key, gbps in want.get("bidirectional_gbps", {}).items():
        assert topo.link(*pair(key, "-")).measured.bidirectional_gbps == pytest.approx(gbps)
    for key, us in want.get("latency_us_p2p_enabled_worse_direction", {}).items():
        assert topo.link(*pair(key, "-")).measured.latency_us == pytest.approx(us)
    for a, b in want.get("slow_pairs", []):
        slow = directed_gbps(topo, a, b)
        assert all(slow < directed_gbps(topo, a, c) for c in topo.gpu_indices if c not in (a, b))
    if want.get("p2p_enabled_measured") is False:  # cut after its P2P=Disabled matrices: said, no P2P figure
        assert all(link.measured.a_to_b_gbps is None and link.measured.b_to_a_gbps is None for link in topo.links)
        assert any(f.code == "p2p-enabled-not-measured" for f in note_findings(topo.reading_notes))
        return
    if want.get("pairs_measured") == 0:  # cut before its first matrix: GPUs and peer lines only
        assert all(link.measured is None for link in topo.links)
        assert any(f.code == "no-pair-measured" for f in note_findings(topo.reading_notes))
        return
    for link in topo.links:
        m = link.measured
        assert m.method == "p2pBandwidthLatencyTest" and m.test.startswith("P2P=Enabled") and m.origin == name


def test_pairs_that_cannot_peer_are_not_called_p2p_enabled():
    topo = p2pbw.read(text_of("p2pbw", "lambda_8x_titanrtx_no_peer_p2p_reads_modified_sample.txt"), "x")
    assert all(link.measured.p2p_enabled is False and link.p2p_read == "NS" for link in topo.links)


def test_reads_matrix_runs_column_to_row_and_an_unlabelled_old_release_too():
    reads = ("Unidirectional P2P=Enabled Bandwidth (P2P Reads) Matrix (GB/s)\n"
             "   D\\D     0      1\n     0 500.00  10.00\n     1  20.00 500.00\n")
    topo = p2pbw.read(reads, "reads")
    assert directed_gbps(topo, 1, 0) == 10.0 and directed_gbps(topo, 0, 1) == 20.0
    old = reads.replace(" (P2P Reads)", "")
    assert directed_gbps(p2pbw.read(old, "old"), 1, 0) == 10.0
    writes = reads.replace("Reads", "Writes")
    assert directed_gbps(p2pbw.read(writes, "writes"), 0, 1) == 10.0


def test_unrelated_lines_around_and_a_cut_matrix_are_left_alone():
    text = ("$ nvidia-smi\nsome banner\nUnidirectional P2P=Disabled Bandwidth Matrix (GB/s)\n"
            "   D\\D     0      1\n     0 500.00  10.00\n     1  9.00\nmore text\n")
    topo = p2pbw.read(text, "cut")  # an unlabelled (old) release: row 0, column 1 is a copy 1 -> 0
    assert directed_gbps(topo, 1, 0, field="p2p_off_") == 10.0
    assert directed_gbps(topo, 0, 1, field="p2p_off_") is None and topo.link(0, 1).measured.a_to_b_gbps is None


def test_a_banner_without_any_device_or_matrix_is_one_input_error():
    with pytest.raises(InputError, match="no device line and no matrix"):
        p2pbw.read("[P2P (Peer-to-Peer) GPU Bandwidth Latency Test]\n", "b")


def test_an_output_cut_before_its_matrices_still_gives_its_gpus_and_which_can_peer():
    """aikitoria PR #29: nine mixed GPUs, cut inside the peer lines (it was refused: 'no matrix')."""
    topo = p2pbw.read(text_of("p2pbw", "aikitoria29_9gpu_mixed_blackwell_ampere_ada_peer_lines_cut_before_matrices.txt"), "c")
    assert len(topo.gpus) == 9 and topo.gpu(8).pci_bus_id == "0000:23:00.0"
    assert topo.link(0, 4).can_peer is True and topo.link(1, 5).can_peer is False and topo.link(2, 3).can_peer is None
    (note,) = [f for f in note_findings(topo.reading_notes) if f.code == "no-pair-measured"]
    assert "ends before its first matrix" in note.message


@pytest.mark.parametrize(("name", "dressing"), dressed_cases("p2pbw"))
def test_every_real_capture_reads_the_same_under_a_pastes_dressing(name, dressing):
    """The capture as users paste it (CRLF, tabs, a prompt, a fence, a quote, bold, a host prefix, long
    lines cut): the reader makes of it what it makes of the capture itself."""
    text = text_of("p2pbw", name)
    assert reading(p2pbw.read(DRESSINGS[dressing](text), name)) == reading(p2pbw.read(text, name))


def test_an_output_cut_after_its_p2p_disabled_matrix_says_the_p2p_figures_are_missing():
    """NVIDIA/nccl#1264: the connectivity matrix (every pair 1) and the P2P=Disabled figures only: the
    staged ~37 GB/s is kept as P2P-off, no P2P figure is made up, and the missing P2P=Enabled matrices are said."""
    topo = p2pbw.read(text_of("p2pbw", "nccl1264_8x_h100_sxm_tab_connectivity_p2p_off_37gbps_cut_before_writes.txt"), "x")
    assert topo.link(0, 1).can_peer is True and directed_gbps(topo, 0, 1, field="p2p_off_") == pytest.approx(37.19)
    assert directed_gbps(topo, 0, 1) is None
    (finding,) = [f for f in note_findings(topo.reading_notes) if f.code == "p2p-enabled-not-measured"]
    assert "ends before any P2P=Enabled matrix" in finding.message
