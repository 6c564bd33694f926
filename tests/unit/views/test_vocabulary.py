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


# Every command's text, for every reference machine: one spelling per concept.
import re  # noqa: E402

import pytest  # noqa: E402

from gputopo.sources.reference import load_reference, machine_names  # noqa: E402

_ARROW_RING = re.compile(r"\b\d+ -> \d+ -> \d+")  # a ring as `0 -> 1 -> 2`: rings are `0-1-2-0`
_OTHER_SPELLINGS = ("bottleneck link", "not shown", "unknown ~", "(model not", "Warning ", "Error ")


def _texts(cli, name: str, tmp_path) -> dict[str, str]:
    gpus = len(load_reference(name).gpus)

    def run(*args: str) -> str:
        result = cli(*args)
        assert result.exit_code == 0, (args, result.output)
        return result.output

    texts = {"scan": run("scan", "--machine", name)}
    for n in sorted({1, 2, min(4, gpus)}):
        texts[f"recommend -n {n}"] = run("recommend", "--machine", name, "--gpus", str(n))
    texts["train --dry-run"] = run("train", "--machine", name, "--gpus", str(min(4, gpus)), "--dry-run")
    report = tmp_path / f"{name}.html"
    run("report", "--machine", name, "-o", str(report))
    texts["report"] = re.sub(r"<[^>]+>", " ", report.read_text(encoding="utf-8").split("<script", 1)[0])
    return texts


@pytest.mark.parametrize("name", machine_names())
def test_every_command_spells_each_concept_one_way(cli, name, tmp_path, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # whole lines: a spelling is never split by a wrap
    for command, text in _texts(cli, name, tmp_path).items():
        assert not _ARROW_RING.search(text), (command, _ARROW_RING.search(text))
        for spelling in _OTHER_SPELLINGS:
            assert spelling not in text, (command, spelling)
        # Severities are upper case wherever a finding is shown, followed by its code.
        for match in re.finditer(r"\b(error|warning|info)\b (?=[a-z0-9-]+:)", text):
            raise AssertionError((command, text[match.start():match.start() + 60]))


def test_self_cells_are_x_in_scan_and_bench():
    from bench_results import make_result
    from rich.console import Console

    from gputopo.views import bench as view
    from gputopo.views.topology import link_matrices

    console = Console(width=120, record=True)
    from gputopo.analysis.scan_result import scan_result

    for table in link_matrices(scan_result(load_reference("two-socket-4gpu"))):
        console.print(table)
    matrix = view._matrix(make_result("GPU", {(0, 1): 1.0, (1, 0): 2.0}), "GB/s", lambda a, b: 1.0, 1)
    console.print(matrix)
    text = console.export_text()
    cells = [cell for line in text.splitlines() for cell in line.replace("│", " ").split()]
    assert cells.count("X") == 4 + 2 and "-" not in cells, text
