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
    assert importers == {"gputopo/sources/nvml_binding.py"}


def test_only_tfruntime_imports_tensorflow():
    """The child script of ``scan --tf`` runs in its own interpreter and is a string, not an import."""
    importers = {_relative(p) for p in MODULES if "tensorflow" in _imported_top_modules(p)}
    assert importers == {"gputopo/tfruntime.py"}
