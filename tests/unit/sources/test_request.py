"""TopologyRequest: the shared source options, checked once for every command."""

from __future__ import annotations

import pytest

from gputopo.errors import InputError
from gputopo.sources import TopologyRequest


def test_defaults_name_no_source():
    request = TopologyRequest()
    assert request.from_files == () and not request.names_a_source and request.given_options() == []


def test_from_files_become_a_tuple_and_are_a_source():
    request = TopologyRequest(from_files=["a.txt", "b.txt"])  # type: ignore[arg-type]
    assert request.from_files == ("a.txt", "b.txt") and request.names_a_source
    assert request.given_options() == ["--from"]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"from_files": ("x",), "machine": "dgx1"}, "either --machine or --from"),
        ({"from_files": ("-", "-")}, "standard input once"),
        ({"from_files": ("-",), "tf_log": "-"}, "cannot both read standard input"),
        ({"tf_run": 2}, "give --tf-log too"),
        ({"tf_now": True, "tf_log": "x.log"}, "either --tf"),
        ({"tf_now": True, "machine": "dgx1"}, "reference machine"),
        ({"host": ""}, "1 to 253 characters"),
        ({"host": "a" * 254}, "1 to 253 characters"),
        ({"host": "evil\nrm -rf /"}, "no spaces or control characters"),
        ({"host": "bell\x07"}, "no spaces or control characters"),
    ],
)
def test_conflicts_and_bad_values_are_one_error(kwargs, words):
    with pytest.raises(InputError, match=words):
        TopologyRequest(**kwargs)


def test_given_options_are_named_as_flags():
    request = TopologyRequest(from_files=("a",), tf_log="t.log", tf_run=1, host="n1")
    assert request.given_options() == ["--from", "--tf-log", "--tf-run", "--host"]
