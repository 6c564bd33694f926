"""The link -> GB/s model: public figures, path penalties, P2P, TF-log links, measurements."""

import pytest
from linktable import cube_mesh_8

from gputopo.analysis.expect.bandwidth import (
    card_line_rate,
    estimate_link,
    pair_bandwidth_matrix,
    pair_estimate,
)
from gputopo.model import Gpu, Measurement, make_link


def _gpu(index, gen=3, width=16, nvlink=None):
    return Gpu(index=index, pcie_gen_current=gen, pcie_width_current=width, nvlink_version=nvlink)


@pytest.mark.parametrize(
    "version, links, expected_gbps",
    [("1.0", 4, 72.0), ("2.0", 2, 40.0), ("3.0", 12, 240.0), ("4.0", 18, 370.8), ("5.0", 18, 721.8)],
)
def test_nvlink_uses_nccl_effective_per_link_figures(version, links, expected_gbps):
    link = make_link(0, 1, f"NV{links}", p2p_read="ok", p2p_write="ok")
    est = estimate_link(link, _gpu(0, nvlink=version), _gpu(1, nvlink=version))
    assert est.gbps == pytest.approx(expected_gbps)
    assert est.basis == "estimated"


def test_nvlink_pair_of_mixed_generations_runs_at_the_older_one():
    link = make_link(0, 1, "NV2")
    assert estimate_link(link, _gpu(0, nvlink="2.0"), _gpu(1, nvlink="4.0")).gbps == pytest.approx(40.0)


def test_pcie_paths_are_ordered_pix_fastest_sys_slowest():
    a, b = _gpu(0, gen=4), _gpu(1, gen=4)
    speeds = [estimate_link(make_link(0, 1, word), a, b).gbps for word in ("PIX", "PXB", "PHB", "NODE", "SYS")]
    assert speeds == sorted(speeds, reverse=True) and len(set(speeds)) == 5
    assert speeds[0] == pytest.approx(24.64)  # Gen4 x16 in practice, ~24-26 GB/s


def test_pcie_follows_the_slower_gpus_generation_and_width():
    fast, slow = _gpu(0, gen=4, width=16), _gpu(1, gen=3, width=8)
    assert estimate_link(make_link(0, 1, "PIX"), fast, slow).gbps == pytest.approx(0.77 * 8)


def test_no_p2p_is_host_staged_and_slower_than_with_p2p():
    a, b = _gpu(0), _gpu(1)
    with_p2p = estimate_link(make_link(0, 1, "PHB", p2p_read="ok", p2p_write="ok"), a, b)
    without = estimate_link(make_link(0, 1, "PHB", p2p_read="GNS", p2p_write="GNS"), a, b)
    assert without.gbps < with_p2p.gbps
    assert "host" in without.explanation


def test_nvlink_with_p2p_disabled_falls_back_to_the_host():
    link = make_link(0, 1, "NV2", pcie_path="SYS", p2p_read="DR", p2p_write="DR")
    est = estimate_link(link, _gpu(0, nvlink="2.0"), _gpu(1, nvlink="2.0"))
    assert est.gbps < 10 and "P2P is off" in est.explanation


def test_tf_log_links_peer_ok_beats_cannot_peer_beats_nothing_known():
    a, b = _gpu(0), _gpu(1)
    peer = estimate_link(make_link(0, 1, "UNKNOWN", p2p_read="ok", p2p_write="ok"), a, b)
    no_peer = estimate_link(make_link(0, 1, "UNKNOWN", p2p_read="NS", p2p_write="NS"), a, b)
    unknown = estimate_link(make_link(0, 1, "UNKNOWN"), a, b)
    assert peer.gbps > no_peer.gbps
    assert peer.gbps == pytest.approx(estimate_link(make_link(0, 1, "PHB"), a, b).gbps)  # one PCIe root assumed
    assert no_peer.gbps <= estimate_link(make_link(0, 1, "SYS"), a, b).gbps
    assert unknown.gbps == pytest.approx(estimate_link(make_link(0, 1, "SYS"), a, b).gbps)
    assert "the source says they could peer" in peer.explanation and "could not peer" in no_peer.explanation


def test_estimate_link_gives_the_estimate_only_even_where_a_measurement_is_stored():
    link = make_link(0, 1, "NV2", measured=Measurement(a_to_b_gbps=5.0, b_to_a_gbps=5.0))
    est = estimate_link(link, _gpu(0, nvlink="2.0"), _gpu(1, nvlink="2.0"))
    assert est.basis == "estimated" and est.gbps == pytest.approx(40.0)


def test_an_idle_gpus_downclocked_generation_does_not_count_but_a_narrow_slot_does():
    idle = Gpu(index=0, pcie_gen_current=1, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16)
    busy = Gpu(index=1, pcie_gen_current=4, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16)
    assert estimate_link(make_link(0, 1, "PIX"), idle, busy).gbps == pytest.approx(24.64)
    narrow = Gpu(index=1, pcie_gen_current=4, pcie_gen_max=4, pcie_width_current=8, pcie_width_max=16)
    assert estimate_link(make_link(0, 1, "PIX"), idle, narrow).gbps == pytest.approx(12.32)


@pytest.mark.parametrize(("state", "gbps", "said"), [
    (0, 3.2, "trained down: read at P0"),   # P0: the link runs at what it trained to, Gen1 x16
    (8, 24.64, None),                        # idle: lowered by design, Gen4 under load
    (2, 24.64, None),                        # cannot tell: the max, as before
    (None, 24.64, None),
])
def test_a_generation_below_max_read_at_p0_is_the_one_copies_get(state, gbps, said):
    slow = Gpu(index=0, pcie_gen_current=1, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16,
               performance_state=state)
    busy = Gpu(index=1, pcie_gen_current=4, pcie_gen_max=4, pcie_width_current=16, pcie_width_max=16, performance_state=0)
    estimate = estimate_link(make_link(0, 1, "PIX"), slow, busy)
    assert estimate.gbps == pytest.approx(gbps)
    assert (said in estimate.explanation) if said else ("trained down" not in estimate.explanation)


def test_matrix_is_symmetric_and_covers_every_ordered_pair():
    topo = cube_mesh_8()
    matrix = pair_bandwidth_matrix(topo)
    assert len(matrix) == 8 * 7
    for (a, b), gbps in matrix.items():
        assert matrix[(b, a)] == gbps == pair_estimate(topo, a, b).gbps
    assert matrix[(0, 3)] == pytest.approx(40.0) and matrix[(0, 1)] == pytest.approx(20.0)
    assert matrix[(0, 5)] < 10  # SYS without P2P on the DGX-1


def test_a_named_card_without_a_link_generation_is_estimated_at_its_own_generation_said_as_an_inference():
    """A `topo -m` paste with a GPU list (or a TF log) names the card but no link generation: an
    RTX 4090 is a Gen4 card, so its PIX pair is Gen4 x16's figure, not a Gen3-Gen5 range, and the
    estimate says the generation is inferred from the card."""
    a, b = Gpu(index=0, name="NVIDIA GeForce RTX 4090"), Gpu(index=1, name="NVIDIA GeForce RTX 4090")
    est = estimate_link(make_link(0, 1, "PIX", p2p_read="ok", p2p_write="ok"), a, b)
    assert est.gbps == pytest.approx(24.64) and est.low_gbps is None and est.high_gbps is None
    assert est.assumption is None and "inferred" in est.inference and "RTX 4090" in est.inference
    assert "Gen4" in est.explanation and "inferred" in est.explanation
    old = Gpu(index=0, name="Tesla V100-PCIE-16GB")
    assert estimate_link(make_link(0, 1, "PIX"), old, old).gbps == pytest.approx(12.32)


def test_a_read_generation_wins_over_the_card_and_an_unknown_card_keeps_the_range():
    read = Gpu(index=0, name="NVIDIA GeForce RTX 4090", pcie_gen_max=3, pcie_width_current=16)
    est = estimate_link(make_link(0, 1, "PIX"), read, read)
    assert est.gbps == pytest.approx(12.32) and est.inference is None
    unknown = Gpu(index=0, name="Some GPU")
    est = estimate_link(make_link(0, 1, "PIX"), unknown, unknown)
    assert est.low_gbps is not None and est.high_gbps > est.low_gbps and est.inference is None


def test_the_card_line_rate_is_the_named_cards_generation_only_where_no_generation_is_read():
    ada, hopper = Gpu(0, name="NVIDIA GeForce RTX 4090"), Gpu(1, name="NVIDIA H100 PCIe")
    pix = make_link(0, 1, "PIX")
    rate, gen = card_line_rate(pix, ada, Gpu(1, name="NVIDIA GeForce RTX 4090"))
    assert gen == 4 and round(rate, 1) == 31.5  # Gen4 x16, raw
    assert card_line_rate(pix, ada, hopper)[1] == 4  # the slower card's generation
    assert card_line_rate(pix, ada, Gpu(1, name="a card the table does not know")) is None
    assert card_line_rate(pix, Gpu(0, pcie_gen_max=4), Gpu(1, pcie_gen_max=4)) is None  # read: the line rate itself
    assert card_line_rate(make_link(0, 1, "NV4"), ada, ada) is None
