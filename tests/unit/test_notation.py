"""notation: CPU lists read and written as the kernel writes them."""

from gputopo.notation import format_cpu_list, parse_cpu_list


def test_cpu_lists():
    assert parse_cpu_list("0-11,24-35") == list(range(12)) + list(range(24, 36))
    assert parse_cpu_list("N/A") is None
    assert format_cpu_list([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"
