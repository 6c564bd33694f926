"""Metamorphic tests: every real `nvidia-smi topo -m` capture, mangled the way pastes are, reads to
the same GPUs, links and conclusions -- or, where the mangling truly loses information, to
"unknown" (None), never to a different answer.

The captures are globbed (tests/fixtures/corpus/topo, tests/fixtures/shared/topo): a new capture
gets every mangling for free. Hypothesis picks the details (which prefix, which row, which cells);
examples are few per capture so the suite stays fast on a busy CI machine.
"""

from __future__ import annotations

import functools
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, SHARED_FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputopo.analysis.causes.diagnose import diagnose
from gputopo.analysis.place.locality import same_socket
from gputopo.errors import InputError
from gputopo.model import Topology
from gputopo.sources.smi.smi_text import parse_topo_matrix

CAPTURES = sorted([*(OWN_FIXTURES / "corpus" / "topo").glob("*.txt"), *(SHARED_FIXTURES / "topo").glob("*.txt")])
EXAMPLES = settings(max_examples=2, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_CELL_WORD = re.compile(r"^(?:X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|OK|CNS|GNS|TNS|DR|NS|U)$", re.IGNORECASE)
_ATTRIBUTE = re.compile(r"^(?:\d[\d,\-]*|N/A)$")


@dataclass(frozen=True)
class Facts:
    gpus: int
    links: tuple[tuple[int, int, str], ...]
    same_socket: tuple[bool | None, ...]
    nvswitch: tuple[bool | None, ...]
    vm: bool
    best: tuple[int, ...] | None


def _facts(topology: Topology, with_best: bool) -> Facts:
    pairs = [(link.a, link.b) for link in topology.links]
    best = None
    if with_best and len(topology.gpus) >= 2:
        from gputopo.analysis.recommend import recommend

        best = tuple(recommend(topology, gpus=min(4, len(topology.gpus))).best.gpus)
    return Facts(
        gpus=len(topology.gpus),
        links=tuple((link.a, link.b, link.type) for link in topology.links),
        same_socket=tuple(same_socket(topology, a, b) for a, b in pairs),
        nvswitch=tuple(link.nvswitch for link in topology.links),
        vm=any(f.code == "virtual-machine" for f in diagnose(topology)),
        best=best,
    )


@functools.lru_cache(maxsize=None)
def _original(path: Path) -> tuple[str, Facts] | None:
    text = path.read_text()
    try:
        return text, _facts(parse_topo_matrix(text, path.name), with_best=True)
    except InputError:
        return None  # a `-p2p`-only capture: refused as a whole, nothing to compare


READABLE = [p for p in CAPTURES if _original(p) is not None]
IDS = [p.name for p in READABLE]


def _check(path: Path, mangled: str, lossless: bool) -> None:
    text, before = _original(path)  # type: ignore[misc]
    try:
        topology = parse_topo_matrix(mangled, "mangled")
    except InputError as exc:
        pytest.fail(f"{path.name}: the mangled paste was refused: {exc}")
    after = _facts(topology, with_best=lossless)
    assert after.gpus == before.gpus and after.links == before.links, path.name
    assert after.vm <= before.vm if not lossless else after.vm == before.vm, path.name  # never a VM made up
    if lossless:
        assert after == before, path.name
        return
    for field in ("same_socket", "nvswitch"):
        for was, now in zip(getattr(before, field), getattr(after, field)):
            assert now is None or now is was, (path.name, field, was, now)


# --- the matrix lines of a capture ----------------------------------------------------------------


def _label_index(tokens: list[str]) -> int | None:
    """Where a row's label (GPUn followed by a self cell X) stands among its tokens (after any prefix)."""
    for k, token in enumerate(tokens[:6]):
        if re.fullmatch(r"GPU\d+", token) and "X" in tokens[k + 1 :]:
            return k
    return None


def _matrix_rows(text: str) -> list[int]:
    """Indexes of the GPU rows of the first link matrix (label GPUn and a self cell X)."""
    rows: list[int] = []
    for k, line in enumerate(text.split("\n")):
        tokens = line.split()
        label = _label_index(tokens)
        if label is not None:
            if rows and tokens[label] == "GPU0":
                break
            rows.append(k)
    return rows


def _device_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of each link cell of a row, label (and any prefix before it) excluded."""
    spans = [(m.start(), m.end()) for m in re.finditer(r"\S+", line)]
    label = _label_index(line.split()) or 0
    return [s for s in spans[label + 1 :] if _CELL_WORD.match(line[s[0] : s[1]])]


# --- manglings --------------------------------------------------------------------------------------

PREFIXES = ["# ", "> ", "| ", "#", "[2023-01-01 12:00:00] ", "[rank0]: ", "2024-05-02T10:11:12.123Z stdout F "]


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(tabs=st.sampled_from(["expand", "one-space", "two-spaces"]))
def test_tabs_to_spaces(path, tabs):
    text = _original(path)[0]  # type: ignore[index]
    mangled = {"expand": text.expandtabs(8), "one-space": text.replace("\t", " "), "two-spaces": text.replace("\t", "  ")}[tabs]
    # Expanded tabs keep every cell on a tab stop; one or two spaces lose where an empty cell was.
    _check(path, mangled, lossless=tabs == "expand" or "\t\t" not in text)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(indent=st.sampled_from(["  ", "    ", "\t", "        "]))
def test_reindent(path, indent):
    text = _original(path)[0]  # type: ignore[index]
    _check(path, "\n".join(indent + line for line in text.split("\n")), lossless=True)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(prefix=st.sampled_from(PREFIXES), stamps=st.booleans())
def test_prefix_every_line(path, prefix, stamps):
    text = _original(path)[0]  # type: ignore[index]
    lines = text.split("\n")
    if stamps and "00" in prefix:  # a log prefix whose time stamp moves line by line
        mangled = "\n".join(prefix.replace("00]", f"{k % 60:02d}]") + line for k, line in enumerate(lines))
    else:
        mangled = "\n".join(prefix + line for line in lines)
    _check(path, mangled, lossless=True)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(blanks=st.integers(1, 2), everywhere=st.booleans())
def test_blank_lines_between_rows(path, blanks, everywhere):
    text = _original(path)[0]  # type: ignore[index]
    lines = text.split("\n")
    rows = set(_matrix_rows(text)) if not everywhere else set(range(len(lines)))
    out = []
    for k, line in enumerate(lines):
        out.append(line)
        if k in rows:
            out.extend([""] * blanks)
    _check(path, "\n".join(out), lossless=True)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(data=st.data())
def test_cut_the_legend(path, data):
    text = _original(path)[0]  # type: ignore[index]
    lines = text.split("\n")
    legend = next((k for k, line in enumerate(lines) if line.strip().lower().startswith("legend")), None)
    if legend is None:
        return
    keep = data.draw(st.integers(legend, min(len(lines), legend + 4)))
    _check(path, "\n".join(lines[:keep]), lossless=False)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(extra=st.integers(0, 1))
def test_cut_after_the_gpu_rows(path, extra):
    text = _original(path)[0]  # type: ignore[index]
    rows = _matrix_rows(text)
    lines = text.split("\n")
    _check(path, "\n".join(lines[: rows[-1] + 1] + [""] * extra), lossless=False)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(width=st.sampled_from([80, 100]))
def test_wrap_at_80_columns(path, width):
    text = _original(path)[0]  # type: ignore[index]
    out = []
    for line in text.expandtabs(8).split("\n"):
        if len(line) <= width or not line.strip():
            out.append(line)
        else:
            out.extend(textwrap.wrap(line, width, break_long_words=False, break_on_hyphens=False))
    _check(path, "\n".join(out), lossless=False)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(colour=st.sampled_from(["\x1b[1;32m", "\x1b[31m", "\x1b[4m", "\x1b[38;5;208m"]), every=st.integers(1, 3))
def test_ansi_colour(path, colour, every):
    text = _original(path)[0]  # type: ignore[index]
    lines = text.split("\n")
    for k in _matrix_rows(text):
        spans = _device_spans(lines[k])[::every]
        line = lines[k]
        for start, end in reversed(spans):
            line = line[:start] + colour + line[start:end] + "\x1b[0m" + line[end:]
        lines[k] = line
    _check(path, "\n".join(lines), lossless=True)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(ending=st.sampled_from(["\r\n", "\r"]))
def test_crlf(path, ending):
    text = _original(path)[0]  # type: ignore[index]
    _check(path, text.replace("\n", ending), lossless=True)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(data=st.data())
def test_merge_two_adjacent_cells(path, data):
    text = _original(path)[0]  # type: ignore[index]
    lines = text.split("\n")
    rows = _matrix_rows(text)
    k = data.draw(st.sampled_from(rows))
    spans = _device_spans(lines[k])
    if len(spans) < 2:
        return
    left = data.draw(st.integers(0, len(spans) - 2))
    end, start = spans[left][1], spans[left + 1][0]
    tabbed = "\t" in lines[k]
    lines[k] = lines[k][:end] + lines[k][start:]
    # Between tabs the fields stay fields; in a space-aligned row the columns after it move (an
    # empty affinity cell there can no longer be placed: unknown).
    _check(path, "\n".join(lines), lossless=tabbed)


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(data=st.data())
def test_drop_an_affinity_cell(path, data):
    text = _original(path)[0]  # type: ignore[index]
    lines = text.split("\n")
    k = data.draw(st.sampled_from(_matrix_rows(text)))
    line = lines[k]
    values = [m for m in re.finditer(r"\S+", line)][(_label_index(line.split()) or 0) + 1 :]
    values = [m for m in values if _ATTRIBUTE.match(m.group(0))]
    if not values:
        return
    cell = data.draw(st.sampled_from(values[:2]))
    blank = "" if "\t" in line else " " * len(cell.group(0))
    lines[k] = line[: cell.start()] + blank + line[cell.end() :]
    _check(path, "\n".join(lines), lossless=False)


# --- two manglings at once ---------------------------------------------------------------------------


def _wrap80(text: str) -> str:
    out = []
    for line in text.expandtabs(8).split("\n"):
        out.extend([line] if len(line) <= 80 or not line.strip() else
                   textwrap.wrap(line, 80, break_long_words=False, break_on_hyphens=False))
    return "\n".join(out)


COMPOSABLE = {
    "prefix": lambda t: "\n".join("# " + line for line in t.split("\n")),
    "blank lines": lambda t: t.replace("\n", "\n\n"),
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "indent": lambda t: "\n".join("    " + line for line in t.split("\n")),
    "colour": lambda t: re.sub(r"\b(NV\d+|SYS|NODE|PIX|PXB|PHB)\b", "\x1b[32m\\1\x1b[0m", t),
    "expand tabs": lambda t: t.expandtabs(8),
}


@pytest.mark.parametrize("path", READABLE, ids=IDS)
@EXAMPLES
@given(first=st.sampled_from(sorted(COMPOSABLE)), second=st.sampled_from(sorted(COMPOSABLE)), wrap=st.booleans())
def test_two_manglings_composed(path, first, second, wrap):
    """Pastes suffer several things at once. (A paste wrapped and then prefixed again is not read:
    its continuation lines lack the prefix the rows carry.)"""
    text = _original(path)[0]  # type: ignore[index]
    mangled = COMPOSABLE[second](COMPOSABLE[first](text))
    if wrap and "prefix" not in (first, second) and "cropped" not in path.name:
        _check(path, _wrap80(mangled), lossless=False)
    else:
        _check(path, mangled, lossless=True)
