"""cli.option_values: plain option values converted without pydantic, exactly as typer's own
(pydantic) converter would; anything else is still typer's."""

from __future__ import annotations

import pytest

from gputopo.cli.option_values import NOT_PLAIN, plain_value

VALUES = [
    "4", "007", "-3", "0", "123456789012345678", "+3", " 4", "4 ", "4.0", "1_000", "١٢", "abc", "",
    "0.25", "-0.5", ".5", "5.", "1e3", "inf", "nan", "007.50", "text", "--json",
    0, 1, 7, 2.0, 0.2, True, False,
]  # fmt: skip


@pytest.mark.parametrize("annotation", [str, int, float, bool])
@pytest.mark.parametrize("value", VALUES, ids=repr)
def test_a_plain_value_is_what_pydantic_makes_of_it(annotation, value):
    pydantic = pytest.importorskip("pydantic")
    plain = plain_value(annotation, value)
    if plain is NOT_PLAIN:
        return  # handed to typer's own converter
    expected = pydantic.TypeAdapter(annotation).validate_python(value)
    assert plain == expected and type(plain) is type(expected)


def test_plain_values_take_the_light_path():
    assert plain_value(int, "4") == 4 and plain_value(float, "0.25") == 0.25 and plain_value(str, "x") == "x"
    assert plain_value(int, 1) == 1 and plain_value(float, 1) == 1.0 and plain_value(bool, False) is False
    for annotation, value in ((int, " 4"), (int, "4.0"), (int, "abc"), (float, "1e3"), (int, True), (str, b"x")):
        assert plain_value(annotation, value) is NOT_PLAIN


def test_values_that_are_not_plain_are_still_typers(cli):
    result = cli("recommend", "--machine", "dgx1", "--gpus", " 4", "--json")  # typer's converter strips it
    assert result.exit_code == 0, result.output
    result = cli("recommend", "--machine", "dgx1", "--gpus", "four")
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        "gputopo: error: Invalid value for '--gpus' / '-n': Input should be a valid integer, unable to parse "
        "string as an integer (see 'gputopo recommend --help')"
    ]
