"""The tests mirror the code: tests/unit/<package>/test_<module>.py tests gputopo/<package>/<module>.py,
so a renamed or removed module cannot leave a test named after what is no longer there, and the
modules without a unit test file are a list that can only shrink. Tests that run real TensorFlow,
Slurm, Chromium, network namespaces or the C fake libnvml live in tests/system/ and name no module.

A unit test file is named after one module: ``test_<module>.py``, ``test_<package>.py`` for what a
package's ``__init__.py`` holds, or ``test_<module>_<aspect>.py`` for a second file about one module
(``test_tflog_bounds.py``). Files about no one module are in CROSS_CUTTING, each with its reason."""

from __future__ import annotations

from pathlib import Path

from conftest import REPO, TESTS

PACKAGE = REPO / "gputopo"
UNIT = TESTS / "unit"

# Unit test files that test no single module, by path under tests/unit/, with the reason.
CROSS_CUTTING = {
    "test_architecture.py": "the package's shape: module sizes, which module may import pynvml or TensorFlow",
    "test_cli_imports.py": "what every command imports (no TensorFlow for scan/recommend, no rich with --json)",
    "test_exit_codes.py": "the documented exit codes, across every command",
    "test_json_schemas.py": "every command's --json against docs/schemas/ (JSON Schema), across every command",
    "test_hostile_inputs.py": "hostile input files through every reader and command",
    "test_layout.py": "this file: the layout of tests/ itself",
    "cli/test_cli_usage.py": "usage, -h, -V and completion across every command",
    "docs/test_docs_claims.py": "what docs/*.md claim, checked against the code",
    "docs/test_docs_examples.py": "the examples of README.md and docs/*.md run, and every path they name exists",
    "docs/test_docs_pictures.py": "the pictures in docs/ are what the current code draws",
    "train/test_hostile_plans.py": "hostile plans, Slurm variables and TF_CONFIG across plan_file, slurm and workers",
    "views/test_markup_injection.py": "snapshot strings through every multi-host view: never markup or terminal codes",
    "sources/test_readers_mixed.py": "pastes holding several kinds of output, through every reader and the merge",
    "test_tflog_corpus.py": "the corpus of real TensorFlow logs through the readers and the analysis",
    "test_topology_corpus.py": "the corpus of real nvidia-smi captures through the readers and the analysis",
    "test_scan_doctor_agree.py": "every fixture through scan --from and doctor --from: one judgement",
    "test_broken_box.py": "issue 32's broken box through recommend, scan and train --dry-run",
    "test_doctor_pastes_corpus.py": "the corpus of real pastes users bring to P2P tickets through doctor --from",
    "test_issue_bodies_corpus.py": "whole issue bodies (several outputs, prose, fences) through doctor and scan --from",
    "test_hardware_corpus.py": "NVML's answers recorded on real GPUs, replayed through the probe, doctor and the fakes",
}

# The modules without a unit test file today (bench/engine, bench/run and train/child/* are run for
# real by tests/system/, which names no module). Write tests/unit/<package>/test_<module>.py for one
# and remove it here; this list may only shrink (test_modules_without_a_unit_test_are_only_fewer).
UNTESTED = frozenset(
    {
        "analysis",
        "analysis/causes/disagreements",
        "analysis/causes/doctor_report",
        "analysis/place/pair_classes",
        "analysis/recommend/result",
        "bench/engine",
        "bench/run",
        "cli",
        "cli/bench",
        "cli/machines",
        "errors",
        "model/cluster",
        "model/tf_view",
        "numbering",
        "sources/doctor_input",
        "sources/archives/gather",
        "sources/host/host_health",
        "sources/tools/nvbandwidth_json",
        "sources/host/pcie_health",
        "sources/smi/smi_p2p",
        "sources/tf/tflog_matrix",
        "train/child/common",
        "train/child/main",
        "train/child/models",
        "train/child/progress",
        "train/child/ps_loop",
        "train/child/strategy",
        "train/launch/netns",
        "train/launch/run",
        "views/bench_extras",
        "views/cluster",
        "views/cluster_plan",
        "views/doctor",
        "views/launch",
        "views/live",
        "views/svg",
        "views/svg_hub",
        "views/svg_layout",
        "views/svg_links",
    }
)


def _modules() -> dict[str, Path]:
    """``{"analysis/recommend/ring": path}``: every module, and every package whose ``__init__.py``
    defines something (``analysis/recommend`` holds ``recommend()``)."""
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).with_suffix("")
        if path.name == "__main__.py":
            continue
        if path.name == "__init__.py":
            text = path.read_text(encoding="utf-8")
            if rel.parent == Path(".") or not any(line.startswith(("def ", "class ")) for line in text.splitlines()):
                continue
            rel = rel.parent
        found[rel.as_posix()] = path
    return found


def _unit_test_files() -> list[Path]:
    return sorted(p for p in UNIT.rglob("test_*.py"))


def _module_of(test_file: Path, modules: dict[str, Path]) -> str | None:
    """The module a unit test file is named after (the longest match), or None."""
    rel = test_file.relative_to(UNIT)
    folder = rel.parent.as_posix()
    name = rel.stem.removeprefix("test_")
    prefix = "" if folder == "." else folder + "/"
    matches = [
        module
        for module in modules
        if module.startswith(prefix) and "/" not in module[len(prefix):]
        and (name == module[len(prefix):] or name.startswith(module[len(prefix):] + "_"))
    ]  # fmt: skip
    return max(matches, key=len) if matches else None


def test_every_unit_test_file_names_an_existing_module_or_says_why_not():
    modules = _modules()
    stale = []
    for test_file in _unit_test_files():
        rel = test_file.relative_to(UNIT).as_posix()
        if rel in CROSS_CUTTING:
            continue
        if _module_of(test_file, modules) is None:
            stale.append(rel)
    assert not stale, (
        "these unit test files name no module under gputopo/ (a renamed module? then rename the test: "
        "tests/unit/<package>/test_<module>.py); a file about no one module goes into CROSS_CUTTING "
        f"with its reason: {stale}"
    )
    missing = sorted(set(CROSS_CUTTING) - {p.relative_to(UNIT).as_posix() for p in _unit_test_files()})
    assert not missing, f"CROSS_CUTTING names files that are not there: {missing}"


def test_every_test_folder_is_a_package():
    """Package-style test folders: two test files of one name in different folders do not clash."""
    for folder in [UNIT, TESTS / "system", *(p for p in UNIT.rglob("*") if p.is_dir() and p.name != "__pycache__")]:
        assert (folder / "__init__.py").is_file(), f"{folder.relative_to(REPO)} has no __init__.py"


def test_modules_without_a_unit_test_are_only_fewer():
    modules = _modules()
    tested = {_module_of(p, modules) for p in _unit_test_files() if p.relative_to(UNIT).as_posix() not in CROSS_CUTTING}
    untested = sorted(set(modules) - tested)
    new = sorted(set(untested) - UNTESTED)
    done = sorted(UNTESTED - set(untested))
    assert not new and not done, (
        f"modules without a unit test file (tests/unit/<package>/test_<module>.py): {untested}\n"
        f"new since UNTESTED was written (write their test file): {new}\n"
        f"tested or gone now (remove them from UNTESTED in tests/unit/test_layout.py): {done}"
    )
