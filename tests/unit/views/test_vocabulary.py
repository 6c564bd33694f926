"""views.vocabulary: one spelling per concept, and every command's text keeps to it."""

from __future__ import annotations

from gputopo.views.vocabulary import NONE, SELF, UNKNOWN, ring_text, severity_word, unknown_or


def test_the_glyphs():
    assert (UNKNOWN, NONE, SELF) == ("?", "-", "X")


def test_a_ring_ends_where_it_starts_and_a_pair_does_not():
    assert ring_text([0, 1, 3, 2]) == "0-1-3-2-0"
    assert ring_text([4, 5]) == "4-5"
    assert ring_text([7]) == "7"


def test_severities_are_upper_case_and_unknown_is_a_question_mark():
    assert severity_word("warning") == "WARNING"
    assert unknown_or(None) == "?" and unknown_or(3) == "3"
