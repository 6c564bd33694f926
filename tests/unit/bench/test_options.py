"""bench-p2p option parsing (gputopo.notation's parsers, as bench-p2p uses them): no TensorFlow.

The result bookkeeping: test_bench_results."""

from __future__ import annotations

import pytest

from gputopo.errors import InputError
from gputopo.notation import (
    GIB,
    KIB,
    MIB,
    format_size,
    parse_gpu_list,
    parse_size,
    parse_size_sweep,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("64MiB", 64 * MIB),
        ("64M", 64 * MIB),
        ("1GiB", GIB),
        ("4KB", 4000),
        ("2 kib", 2 * KIB),
        ("1024", 1024),
        ("1.5MiB", 3 * MIB // 2),
        ("7B", 7),
    ],
)
def test_parse_size_units(text, expected):
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "abc", "-1", "0", "12XB", "1..5MiB", "MiB", "65GiB", "1 2"])
def test_parse_size_rejects_garbage(text):
    with pytest.raises(InputError):
        parse_size(text)


def test_parse_sizes_sweep_doubles_and_stops_at_last():
    assert parse_size_sweep("1KiB:16KiB") == [1 * KIB, 2 * KIB, 4 * KIB, 8 * KIB, 16 * KIB]
    assert parse_size_sweep("1KiB:1MiB:4") == [KIB, 4 * KIB, 16 * KIB, 64 * KIB, 256 * KIB, MIB]
    # The last size is an upper bound, as with nccl-tests -e.
    assert parse_size_sweep("3:20") == [3, 6, 12]
    assert len(parse_size_sweep("1KiB:1GiB")) == 21


def test_parse_sizes_list_is_sorted_and_unique():
    assert parse_size_sweep("64MiB,4KiB,4KiB") == [4 * KIB, 64 * MIB]


@pytest.mark.parametrize("text", ["", "1MiB:1KiB", "1KiB:1MiB:1", "1KiB:1MiB:x", "1:2:3:4", "1B:64GiB:1", ",", "a:b"])
def test_parse_sizes_rejects_garbage(text):
    with pytest.raises(InputError):
        parse_size_sweep(text)


def test_parse_index_list():
    assert parse_gpu_list("0,2,3") == [0, 2, 3]
    assert parse_gpu_list("3,0-1") == [3, 0, 1]


@pytest.mark.parametrize("text", ["", "a,b", "1,1", "-1", "3-1", "0-2,1", "1.5"])
def test_parse_index_list_rejects_garbage(text):
    with pytest.raises(InputError):
        parse_gpu_list(text)


def test_format_size():
    assert format_size(64 * MIB) == "64 MiB"
    assert format_size(1000) == "1000 B"
    assert format_size(3 * MIB // 2) == "1536 KiB"
    assert format_size(1000 * 1000) == "976.6 KiB"
