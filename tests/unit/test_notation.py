"""notation: CPU lists read and written as the kernel writes them; UTC times as snapshots record them."""

from gputopo.notation import format_cpu_list, parse_cpu_list


def test_cpu_lists():
    assert parse_cpu_list("0-11,24-35") == list(range(12)) + list(range(24, 36))
    assert parse_cpu_list("N/A") is None
    assert format_cpu_list([0, 1, 2, 3, 8, 10, 11]) == "0-3,8,10-11"


def test_one_reader_for_json_objects_from_people():
    import pytest

    from gputopo.errors import InputError
    from gputopo.notation import parse_json_object

    assert parse_json_object('{"a": 1}', "TF_CONFIG") == {"a": 1}
    for text, words in (("[" * 100_000 + "]" * 100_000, "TF_CONFIG is nested too deeply; set it right"),
                        ("{cluster: 1}", "TF_CONFIG is not JSON (Expecting property name"),
                        ("[1]", "TF_CONFIG is not a JSON object; set it right")):
        with pytest.raises(InputError) as info:
            parse_json_object(text, "TF_CONFIG", "; set it right")
        assert str(info.value).startswith(words) and "\n" not in str(info.value)


def test_utc_times_as_snapshots_record_them():
    import pytest

    from gputopo.notation import check_utc_time, shown_utc_time, utc_now_text

    for good in ("2025-06-01T10:00:00Z", "2025-06-01T10:00:00.123456Z", "2025-06-01T10:00:00+00:00", utc_now_text()):
        assert check_utc_time(good, "t") == good
    for bad in ("2025-06-01T10:00:00", "2025-06-01T12:00:00+02:00", "2025-02-30T10:00:00Z", "2025-06-01 10:00:00Z",
                "２０２５-06-01T10:00:00Z", "2025-06-01T10:00:00Z\n"):
        with pytest.raises(ValueError, match="^t: not a UTC time in ISO 8601"):
            check_utc_time(bad, "t")
    assert shown_utc_time("2025-06-01T10:00:00.5Z") == "2025-06-01 10:00:00 UTC"


def test_all_word_never_says_all_two():
    from gputopo.notation import all_word

    assert [all_word(n, "bridge") for n in (1, 2, 3)] == ["the one bridge", "both bridges", "all 3 bridges"]
