"""The one table of what each finding is (fault, design, note): every code any finding can have is
in it, found the way the code makes them; and what ``--fail-on`` counts."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from gputopo.analysis.causes.finding_kinds import DESIGN, FAULT, KIND_OF_CODE, KINDS, NOTE, counted, kind_of, kind_rule
from gputopo.model import Finding

GPUTOPO = Path(__file__).resolve().parents[4] / "gputopo"
# Modules outside gputopo/analysis/ that make findings (bench-p2p's own, from before the rule).
ALSO_MAKE_FINDINGS = ("bench/results.py",)


def _finding_codes() -> tuple[set[str], set[str], list[str]]:
    """(codes written out, prefixes of codes made from a word, code expressions not understood)
    of every ``Finding(...)`` made under gputopo/analysis/ (and ``ALSO_MAKE_FINDINGS``)."""
    codes: set[str] = set()
    prefixes: set[str] = set()
    unknown: list[str] = []
    paths = sorted((GPUTOPO / "analysis").rglob("*.py")) + [GPUTOPO / p for p in ALSO_MAKE_FINDINGS]
    for path in paths:
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "Finding"):
                continue
            code = next((k.value for k in node.keywords if k.arg == "code"), node.args[1] if len(node.args) > 1 else None)
            if isinstance(code, ast.Constant):
                codes.add(code.value)
            elif isinstance(code, ast.JoinedStr) and isinstance(code.values[0], ast.Constant):
                prefixes.add(code.values[0].value)  # f"p2p-{word}"
            elif isinstance(code, ast.BinOp) and isinstance(code.left, ast.Constant):
                prefixes.add(code.left.value)  # "env-" + name
            elif isinstance(code, ast.Name) and code.id == "CODE":
                codes.add(_module_constant(path, "CODE"))
            else:
                unknown.append(f"{path.relative_to(GPUTOPO)}:{node.lineno}: {ast.unparse(code) if code else None}")
    return codes, prefixes, unknown


def _module_constant(path: Path, name: str) -> str:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == [name]:
            return node.value.value
    raise AssertionError(f"{path}: no {name}")


def _codes_passed_to(function: str, position: int) -> set[str]:
    """The string constants passed as argument ``position`` of every call of ``function`` under analysis/."""
    codes = set()
    for path in sorted((GPUTOPO / "analysis").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == function and len(node.args) > position:
                arg = node.args[position]
                if isinstance(arg, ast.Constant):
                    codes.add(arg.value)
    return codes


# Finding codes made from a variable, with where they come from (each read below).
UNDERSTOOD = {
    "analysis/cluster.py": "code",          # _mismatch(..., code, ...): the codes passed to _mismatch
    "analysis/notes/reading_notes.py": "_code(note)",  # the codes of _WORDINGS, nvml-<query>-unavailable
    "analysis/causes/doctor.py": "f'doctor-{finding.code}'",  # doctor's own codes, prefixed in a snapshot
}


def test_every_code_a_finding_can_have_has_a_kind():
    from gputopo.analysis.notes import reading_notes
    from gputopo.analysis.causes import tf_crosscheck
    from gputopo.analysis.causes.nccl_env import ENV_RULES
    from gputopo.model import P2P_STATUS_MEANING

    codes, prefixes, unknown = _finding_codes()
    left = [u for u in unknown if not any(u.startswith(where) and u.endswith(expr) for where, expr in UNDERSTOOD.items())]
    assert not left, f"findings made with a code this test cannot read: {left} (add how to find them)"
    codes |= _codes_passed_to("_mismatch", 3)
    codes |= set(reading_notes._WORDINGS) - {"nvml-query-failed"}
    codes |= {"nvml-pcie-width-unavailable", "nvml-cpu-affinity-unavailable"}
    expanded = {
        "p2p-": [f"p2p-{w.lower()}" for w in P2P_STATUS_MEANING if w != "ok"],
        "p2p-status-": [f"p2p-status-{w.lower()}" for w in P2P_STATUS_MEANING if w != "ok"],
        "tf-cannot-peer-": [f"tf-cannot-peer-{r}" for r in tf_crosscheck._REASONS],
        "env-": ["env-" + name.lower().replace("_", "-") for name in ENV_RULES],
        "xid-": ["xid-79", "xid-45"],
        "doctor-": ["doctor-acs-redirect", "doctor-xid-79", "doctor-p2p-status-tns"],
    }
    assert prefixes <= set(expanded), f"codes made from a word, prefixes not expanded here: {prefixes - set(expanded)}"
    codes |= {code for prefix in prefixes for code in expanded[prefix]}
    assert len(codes) > 100
    missing = sorted(code for code in codes if kind_rule(code) is None)
    assert not missing, f"finding codes with no kind in analysis/causes/finding_kinds.py: {missing}"


def test_the_table_holds_only_kinds_and_no_code_twice_by_its_prefix():
    for code, rule in KIND_OF_CODE.items():
        assert (rule in KINDS) if isinstance(rule, str) else set(rule.values()) <= set(KINDS), code


@pytest.mark.parametrize(("code", "severity", "kind"), [
    ("cross-socket", "warning", DESIGN),
    ("p2p-tns", "warning", DESIGN),
    ("p2p-gns", "warning", DESIGN),
    ("p2p-dr", "warning", FAULT),  # a registry key someone set
    ("p2p-status-tns", "info", DESIGN),
    ("doctor-acs-redirect", "error", FAULT),
    ("pcie-link-narrow", "warning", FAULT),
    ("pcie-link-slow-idle", "info", NOTE),
    ("nvml-pcie-width-unavailable", "info", NOTE),
    ("xid-79", "error", FAULT),
    ("gpus-missing", "error", FAULT),
    ("nccl-shm-between-gpus", "info", DESIGN),  # NCCL's own P2P level
    ("nccl-shm-between-gpus", "warning", FAULT),  # below a PCIe switch: turned off
])
def test_kinds(code, severity, kind):
    assert kind_of(Finding(severity, code, "m")) == kind


def test_a_code_not_in_the_table_keeps_its_saved_kind_else_a_warning_is_a_fault():
    assert kind_of(Finding("warning", "from-a-newer-version", "m", kind=DESIGN)) == DESIGN
    assert kind_of(Finding("warning", "from-a-newer-version", "m")) == FAULT
    assert kind_of(Finding("info", "from-a-newer-version", "m")) == NOTE
    assert kind_of(Finding("warning", "cross-socket", "m", kind=FAULT)) == DESIGN  # the table decides a known code


def test_fail_on_counts_faults_at_the_level_and_design_only_when_asked():
    findings = [Finding("warning", "cross-socket", "m"), Finding("info", "pcie-link-slow-idle", "m"),
                Finding("warning", "pcie-link-narrow", "m"), Finding("error", "p2p-tns", "m")]
    assert [f.code for f in counted(findings, "warning")] == ["pcie-link-narrow"]
    assert counted(findings, "error") == []
    assert [f.code for f in counted(findings, "warning", design=True)] == ["cross-socket", "pcie-link-narrow", "p2p-tns"]
    assert [f.code for f in counted(findings, "info", design=True)] == ["cross-socket", "pcie-link-narrow", "p2p-tns"]


def test_worst_first_orders_by_severity_then_faults_design_notes_and_keeps_the_rest():
    from gputopo.analysis.causes.finding_kinds import worst_first

    made = [Finding("info", "virtual-machine", "a note"), Finding("warning", "cross-socket", "design warning"),
            Finding("info", "cross-socket", "design info"), Finding("warning", "pcie-link-narrow", "fault 1"),
            Finding("error", "virtual-machine", "an error note"), Finding("warning", "pcie-link-narrow", "fault 2"),
            Finding("info", "pcie-link-slow-maybe-idle", "another note")]
    assert [f.message for f in worst_first(made)] == [
        "an error note", "fault 1", "fault 2", "design warning", "design info", "a note", "another note"]
