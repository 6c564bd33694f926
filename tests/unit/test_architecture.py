"""The shape of the code: one door each to TensorFlow and pynvml, no oversized module.

The layers themselves (a module imports only from layers below its own, no cycles) are checked by
import-linter's contracts in pyproject.toml, which `make test` runs before pytest.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "gputopo"
MAX_MODULE_LINES = 450
MODULES = sorted(PACKAGE.rglob("*.py"))


def _imported_top_modules(path: Path) -> set[str]:
    """Every module an ``import``/``from ... import`` statement names anywhere in the file (also
    inside functions: a lazy import is still a door)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def _relative(path: Path) -> str:
    return path.relative_to(PACKAGE.parent).as_posix()


def test_the_package_has_modules():
    assert len(MODULES) > 20


@pytest.mark.parametrize("path", MODULES, ids=_relative)
def test_no_module_is_over_the_size_limit(path):
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_MODULE_LINES, f"{_relative(path)} has {lines} lines (limit {MAX_MODULE_LINES}): split it by concern"


def test_only_the_nvml_binding_imports_pynvml():
    importers = {_relative(p) for p in MODULES if "pynvml" in _imported_top_modules(p)}
    assert importers == {"gputopo/sources/host/nvml_binding.py"}


def test_only_tfruntime_imports_tensorflow():
    """The child script of ``scan --tf`` runs in its own interpreter and is a string, not an import."""
    importers = {_relative(p) for p in MODULES if "tensorflow" in _imported_top_modules(p)}
    assert importers == {"gputopo/tfruntime.py"}


MAX_FUNCTION_BODY_LINES = 60
# A function may be longer where its docstring says why, in a sentence starting with this.
LONG_BECAUSE = "Long because"


def _long_functions(path: Path) -> list[str]:
    """Functions whose body (after the docstring; a typer command's option declarations are its
    signature, not its body) runs over the limit without a reason in the docstring."""
    long = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        docstring = ast.get_docstring(node) or ""
        body = node.body[1:] if docstring else node.body
        if body and node.end_lineno is not None:
            lines = node.end_lineno - body[0].lineno + 1
            if lines > MAX_FUNCTION_BODY_LINES and LONG_BECAUSE not in docstring:
                long.append(f"{_relative(path)}:{node.lineno} {node.name} ({lines} lines)")
    return long


def test_no_function_is_over_the_size_limit_without_a_reason():
    long = [entry for path in MODULES for entry in _long_functions(path)]
    assert not long, (f"functions over {MAX_FUNCTION_BODY_LINES} lines: split them, or say why in the docstring "
                      f"('{LONG_BECAUSE} ...'): " + "; ".join(long))


def test_the_size_check_sees_a_long_function(tmp_path):
    body = "\n".join(f"    x{k} = {k}" for k in range(MAX_FUNCTION_BODY_LINES + 1))
    source = tmp_path / "gputopo" / "m.py"
    source.parent.mkdir()
    source.write_text(f'def f():\n    """Doc."""\n{body}\n\ndef g():\n    """{LONG_BECAUSE} it is a table."""\n{body}\n')
    global PACKAGE
    saved, PACKAGE = PACKAGE, tmp_path / "gputopo"
    try:
        assert [entry.split(" ")[1] for entry in _long_functions(source)] == ["f"]
    finally:
        PACKAGE = saved


SOURCES = PACKAGE / "sources"


def _finding_uses(text: str, name: str) -> list[str]:
    """Where a module's ``text`` names ``Finding`` at all: imports it (``from gputopo.model import
    Finding``, ``as`` another name, ``*`` from the model), or reaches it as a name or an attribute
    (``model.Finding(...)``). Sources give the topology as read and record ``ReadingNote``s;
    findings are made in ``gputopo.analysis`` only."""
    uses = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ImportFrom) and any(alias.name in ("Finding", "*") for alias in node.names):
            uses.append(f"{name}:{node.lineno} imports {', '.join(a.name for a in node.names)} from {node.module}")
        elif isinstance(node, ast.Name) and node.id == "Finding" or isinstance(node, ast.Attribute) and node.attr == "Finding":
            uses.append(f"{name}:{node.lineno} uses Finding")
    return uses


def test_no_source_imports_or_makes_a_finding():
    uses = [use for path in sorted(SOURCES.rglob("*.py")) for use in _finding_uses(path.read_text(encoding="utf-8"), _relative(path))]
    assert not uses, "findings are made in gputopo/analysis/ only (a source records a ReadingNote): " + "; ".join(uses)


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("from gputopo.model import Finding, Gpu\n", 1),
        ("from gputopo.model.parts import Finding as F\n", 1),
        ("from gputopo.model import *\n", 1),
        ("import gputopo.model as m\nx = m.Finding('info', 'c', 'm')\n", 1),
        ("def f(t):\n    return [Finding for _ in t]\n", 1),
        ("from gputopo.model import ReadingNote\nnote = ReadingNote('c')  # a Finding in a comment is none\n", 0),
    ],
)
def test_the_finding_check_sees_every_way_in(text, count):
    assert len(_finding_uses(text, "m.py")) == count


def _finding_codes_made(path: Path) -> set[str]:
    """The finding codes ``path`` writes as literals into ``Finding(...)`` (second argument or ``code=``)."""
    codes = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Finding":
            given = [k.value for k in node.keywords if k.arg == "code"] + node.args[1:2]
            codes |= {g.value for g in given if isinstance(g, ast.Constant) and isinstance(g.value, str)}
    return codes


def test_each_finding_code_is_worded_in_one_module():
    """One cause, one wording: a code made in two modules drifts into two messages and two fixes
    (issue 30: acs-redirect, iommu-translating, nvlink-errors, nvlink-links-down, virtual-machine)."""
    made_in: dict[str, list[str]] = {}
    for path in sorted((PACKAGE / "analysis").rglob("*.py")):
        for code in _finding_codes_made(path):
            made_in.setdefault(code, []).append(str(path.relative_to(PACKAGE)))
    assert made_in.get("acs-redirect")  # the scan finds what it looks for
    assert {code: where for code, where in made_in.items() if len(where) > 1} == {}
