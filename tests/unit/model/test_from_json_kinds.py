"""``build_kinds``: a long list of links checked once per kind accepts exactly what the item-by-item
checks accept and builds the same links (or gives way to them, which name what is wrong)."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import dataclass

import pytest

from gputopo.model import Link, Topology
from gputopo.model.from_json import _value
from gputopo.model.from_json_kinds import build_kinds
from gputopo.model.link_table import KIND_FIELDS, LinkTable
from gputopo.sources.reference import load_reference


def _tray_domain(n: int = 20) -> dict:
    """The first ``n`` GPUs of the GB200 NVL72 reference: 190 links of three kinds."""
    data = load_reference("gb200-nvl72").to_dict()
    data["gpus"] = data["gpus"][:n]
    data["links"] = [link for link in data["links"] if link["b"] < n]
    data["diagnostics"] = []
    return data


def test_the_links_and_their_kinds_are_those_built_one_by_one():
    data = _tray_domain()
    kinds = build_kinds(Link, copy.deepcopy(data["links"]), KIND_FIELDS)
    expected = [Link(**link) for link in data["links"]]
    table = LinkTable.of(expected)
    assert kinds is not None and kinds.objects == expected
    assert (kinds.kind_of, kinds.kinds) == (table.kind_of, table.kinds)
    assert [expected[p] for p in kinds.first] == table.examples
    assert (kinds.columns["a"], kinds.columns["b"]) == (table.ends_a, table.ends_b)
    assert len({id(link.health) for link in kinds.objects}) == len(expected)  # a list of its own each


@pytest.mark.parametrize(("field", "value"), [("nvlink_count", 18.0), ("nvlink_count", True), ("nvswitch", 1),
                                              ("nvswitch", 1.0)])
def test_a_number_equal_to_its_kinds_but_of_another_type_is_not_taken(field, value):
    """18.0 == 18 and 1 == True: the same kind by equality, refused by type (the whole column is checked)."""
    links = copy.deepcopy(_tray_domain()["links"])
    links[150][field] = value
    assert build_kinds(Link, links, KIND_FIELDS) is None


@dataclass
class _Row:
    a: int
    figure: float
    word: str | None = None


def test_an_integer_beyond_64_bits_equal_to_a_kinds_figure_is_not_taken():
    rows = [{"a": k, "figure": 1e20, "word": "x"} for k in range(40)]
    assert build_kinds(_Row, rows, ("figure", "word")) is not None
    rows[30]["figure"] = 10**20  # == 1e20, and out of range for a JSON integer here
    assert build_kinds(_Row, rows, ("figure", "word")) is None
    with pytest.raises(ValueError, match=r"rows\[30\]\.figure: .* is out of range"):  # as item by item
        _value(rows, list[_Row], "rows")


_HOSTILE = [18.0, True, False, 1, 0, -1, 2**70, None, "NV18", "SYS", "x\ny", "\x1b[31m", [], ["acs"], ["\n"], {},
            {"a_to_b_gbps": 1.0}, {"a_to_b_gbps": "fast"}, float("nan"), float("inf"), "ok", "NODE"]


def _from_dict(data: dict, take: bool) -> object:
    try:
        return Topology.from_dict(copy.deepcopy(data), take=take)
    except ValueError as exc:
        return str(exc)


@pytest.mark.parametrize("seed", range(6))
def test_mutated_links_read_as_the_item_by_item_checks_read_them(seed):
    """Random damage (a wrong type, value, key; on a kind's first link or another): the links read
    with their kinds (``take``) are the links read item by item, or the same error names them."""
    rng = random.Random(seed)
    base = _tray_domain()
    firsts = [0, 1, 2, 3, 4]  # (a tray's first links: each kind's first)
    for _ in range(40):
        data = copy.deepcopy(base)
        for _ in range(rng.randint(1, 3)):
            link = data["links"][rng.choice(firsts + [rng.randrange(len(data["links"]))])]
            field = rng.choice([*link, "extra"])
            if rng.random() < 0.1:
                link.pop(field, None)
            else:
                link[field] = copy.deepcopy(rng.choice(_HOSTILE))
        data = json.loads(json.dumps(data))  # as a snapshot reads (NaN and Infinity included)
        careful, kinded = _from_dict(data, take=False), _from_dict(data, take=True)
        assert careful == kinded, json.dumps(data["links"][:6])


@pytest.mark.parametrize("field", ["a", "b", "measured", "health", "type"])
def test_a_renamed_key_is_read_as_the_item_by_item_checks_read_it(field):
    """A link with as many keys as a link has, one of them renamed: the count check passed, and a
    field that is not shared (``b``, ``measured``) was then looked up and raised KeyError, a
    traceback where the careful path says ``links[150].b: missing`` or reads the link."""
    data = _tray_domain()
    link = data["links"][150]
    link[field + "x"] = link.pop(field)
    assert _from_dict(data, take=True) == _from_dict(data, take=False)
