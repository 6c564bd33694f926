"""CUDA samples' peer-access lines (deviceQuery, simpleP2P) on real captures, as pasted (CRLF, tabs,
prompts, a fence, a host prefix, cut lines), alone and after another kind, through the registry."""

import pytest

from gputopo.errors import InputError
from gputopo.sources.registry import read_text
from gputopo.sources.tools import cuda_peers
from unit.sources.readers_corpus import CORPUS, DRESSINGS, cases, pair, text_of

@pytest.mark.parametrize("dressing", DRESSINGS)
@pytest.mark.parametrize(("name", "want"), cases("cuda_peers"))
def test_real_outputs_read_as_the_expert_reads_them(name, want, dressing):
    text = DRESSINGS[dressing](text_of("cuda_peers", name))
    assert cuda_peers.sniff(text)
    topo = read_text(text, name)  # through the registry: this kind alone matches, or beside a topo -m ("links")
    assert {str(g.index): g.name for g in topo.gpus} == want["gpus"]
    if "links" in want:
        assert {key: topo.link(*pair(key, "-")).type for key in want["links"]} == want["links"]
    else:
        assert topo.source == "cuda-peer-access"
        assert all(link.type == "UNKNOWN" for link in topo.links)  # deviceQuery never says how GPUs are wired
    for key, can in want["peer"].items():
        assert topo.link(*pair(key, "-")).can_peer is can, key


@pytest.mark.parametrize("name", ["tinygrad22_simplep2p_7x_rtx4090_patched_all_yes_cut.txt",
                                  "aikitoria5_simplep2p_7gpu_mixed_only_4090_pair_cut.txt",
                                  "tf2145_simplep2p_4x_k40m_pairs_only_cut.txt"])
def test_simple_p2p_captures_are_read_too(name):
    topo = read_text((CORPUS / "doctor_pastes" / name).read_text(encoding="utf-8"), name)
    assert topo.source == "cuda-peer-access" and len(topo.gpus) >= 4
    assert any(link.can_peer is not None for link in topo.links)


def test_mixed_models_keep_their_names_and_the_only_yes_pair():
    topo = read_text((CORPUS / "doctor_pastes" / "aikitoria5_simplep2p_7gpu_mixed_only_4090_pair_cut.txt")
                     .read_text(encoding="utf-8"), "x")
    assert topo.gpu(0).name == "NVIDIA GeForce RTX 4090" and topo.gpu(4).name == "NVIDIA RTX A6000"
    assert topo.link(0, 1).can_peer is True
    assert topo.link(0, 2).can_peer is False


def test_a_peer_line_cut_before_its_answer_leaves_that_pair_unknown():
    """DERIVED from the T4 capture: the 2 -> 3 and 3 -> 2 lines cut before ``: Yes``."""
    text = text_of("cuda_peers", "guide_devicequery_4x_t4_two_peer_pairs.txt")
    cut = "\n".join(line.split(" :")[0] if "(GPU2) -> Tesla T4 (GPU3)" in line or "(GPU3) -> Tesla T4 (GPU2)" in line
                    else line for line in text.split("\n"))
    topo = cuda_peers.read(cut, "x")
    assert topo.link(2, 3).can_peer is None
    assert topo.link(0, 1).can_peer is True and topo.link(1, 2).can_peer is False


def test_the_device_count_proves_gpus_a_cut_paste_does_not_name():
    """DERIVED from the T4 capture: the Device blocks and the peer lines of GPUs 2 and 3 deleted."""
    lines = text_of("cuda_peers", "guide_devicequery_4x_t4_two_peer_pairs.txt").split("\n")
    kept = [line for line in lines if "Peer access" in line and "(GPU2)" not in line and "(GPU3)" not in line
            or line.startswith("Detected")]
    topo = cuda_peers.read("\n".join(kept), "x")
    assert [g.index for g in topo.gpus] == [0, 1, 2, 3]
    assert topo.gpu(3).name is None and topo.link(0, 1).can_peer is True and topo.link(2, 3).can_peer is None


def test_after_another_kind_both_are_read():
    topo_m = (CORPUS / "topo" / "gtx1080ti_2gpu_phb_consumer_board.txt").read_text(encoding="utf-8")
    query = text_of("cuda_peers", "forum2015_devicequery_c2075_gtx460_peer_no.txt")
    topo = read_text(topo_m + "\n" + query, "paste.txt")
    assert topo.link(0, 1).type == "PHB"  # nvidia-smi's word, kept
    assert topo.link(0, 1).can_peer is False  # CUDA's answer, added


@pytest.mark.parametrize("line", [
    "> Peer access from Tesla T4 (GPU0) -> Tesla T4 (GPU0) : Yes",  # a GPU with itself
    "> Peer access from Tesla T4 (GPU0) -> Tesla T4 (GPU1) : Maybe",
    "> Peer access from Tesla T4 (GPU0) -> Tesla T4 (GPU1) : Nope",
    "Peer access from CUDA device 0 -> CUDA device 1 : Yes",  # libfabric's log line: no (GPUn)
    "cannot enable peer access from device ordinal 0 to device ordinal 1",  # TensorFlow's
])
def test_other_lines_are_not_peer_answers(line):
    assert not cuda_peers.sniff(line)
    with pytest.raises(InputError):
        cuda_peers.read(line, "x")


def test_an_old_simple_p2p_names_every_gpu_in_its_capable_lines():
    """tensorflow#231: simpleP2P of CUDA 7 named each GPU (`> GPU3 = "      Tesla K80" IS  capable of
    Peer-to-Peer (P2P)`) before its pair lines, which were cut after GPU 0's second peer."""
    topo = cuda_peers.read(text_of("cuda_peers", "tf231_simplep2p_16x_k80_all_capable_cut.txt"), "k80")
    assert [g.name for g in topo.gpus] == ["Tesla K80"] * 16
    assert topo.link(0, 2).can_peer is True and topo.link(3, 4).can_peer is None
