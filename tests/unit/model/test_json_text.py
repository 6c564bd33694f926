"""JSON text as gputopo writes it: strict, and a large document's long lists one item per line."""

from __future__ import annotations


def test_a_long_list_of_integers_is_one_per_line_and_reads_back():
    """(scan --json's class_of_link: 165,600 integers in a 576-GPU domain, from one encoder call.)"""
    import json

    from gputopo.model.json_text import ROWS_FROM_ITEMS, strict_json_text

    numbers = list(range(ROWS_FROM_ITEMS + 5)) + [-1, 2**40]
    text = strict_json_text({"n": numbers, "x": [True, 1]}, large=True)
    assert json.loads(text) == {"n": numbers, "x": [True, 1]}
    assert text.count("\n") > len(numbers)  # one per line
