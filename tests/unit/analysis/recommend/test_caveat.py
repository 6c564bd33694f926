"""The P2P caveat's words: broken pairs (measured, inferred) told apart, pairs a doctor finding covers
that the measurement clears, and NCCL_P2P_DISABLE=1 advised or not, per group, with the figures."""

from __future__ import annotations

from unit.analysis.recommend.test_today import box

from gputopo.analysis.recommend import recommend


def test_a_cleared_pair_is_named_with_its_figures_and_nothing_is_changed():
    caveat = recommend(box(), 2, require=[2, 3]).best.p2p_caveat
    assert "doctor found the IOMMU translating over 2-3" in caveat and "12.92 against 9.91" in caveat
    assert "is broken" not in caveat and "faster there" not in caveat


def test_the_advice_says_what_it_gains_today():
    caveat = recommend(box(), 2, require=[0, 1]).best.p2p_caveat
    assert "P2P between 0-1 is broken until fixed (measured slower" in caveat
    assert "faster today (~9.9 GB/s on its ring 0-1 against ~2.4 GB/s with P2P as it is)" in caveat


def test_broken_pairs_nccl_never_takes_with_p2p_get_no_p2p_off():
    """0-2 is NODE: beyond NCCL's default P2P level, through host memory whatever P2P does."""
    best = recommend(box(), 2, require=[0, 2]).best
    assert best.p2p_broken_pairs == [(0, 2)] and not best.p2p_disable_advised
    assert "NCCL copies over none of them with P2P" in best.p2p_caveat and "not set for this group" in best.p2p_caveat
