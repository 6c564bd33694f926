"""Every command's ``--json`` against the JSON Schema its ``schema`` key names (docs/schemas/, draft
2020-12; docs/json.md): reference machines, corpus captures, the constructed broken box, doctor
fixtures, recommend, the multi-host view and plan, machines, report, train's dry runs and launchers,
watch over the Python fake of pynvml, and bench-p2p's JSON view of a hand-made result. Also: every
schema value the code can emit has a file, and a document the contract forbids is rejected."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, REPO, SHARED_FIXTURES

jsonschema = pytest.importorskip("jsonschema")
from referencing import Registry, Resource  # noqa: E402  (comes with jsonschema)

from gputopo.sources.reference import MACHINES  # noqa: E402

SCHEMAS = REPO / "docs" / "schemas"
CONSTRUCTED = OWN_FIXTURES / "doctor" / "constructed"
DOCTOR_FIXTURES = sorted((OWN_FIXTURES / "doctor").glob("*.txt"))
CORPUS_TOPO = sorted((OWN_FIXTURES / "corpus" / "topo").glob("*.txt"))[:4]
SHARED_TOPO = sorted((SHARED_FIXTURES / "topo").glob("*.txt"))
SHARED_TF_LOGS = sorted((SHARED_FIXTURES / "tf_logs").glob("*.log"))[:2]
# Written by the code but no command's output: the record train keeps in its checkpoint folder.
NOT_COMMAND_OUTPUT = {"gputopo.checkpoints/1": "train's marker file in a checkpoint folder (train/checkpoints.py)"}


def schema_file(name: str) -> Path:
    """``gputopo.topology/1`` -> docs/schemas/gputopo.topology-1.json."""
    return SCHEMAS / f"{name.replace('/', '-')}.json"


def _load_schemas() -> dict[str, dict]:
    return {path.name: json.loads(path.read_text(encoding="utf-8")) for path in sorted(SCHEMAS.glob("*.json"))}


_SCHEMAS = _load_schemas()
_REGISTRY = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in _SCHEMAS.values())


def validator(name: str):
    return jsonschema.Draft202012Validator(_SCHEMAS[schema_file(name).name], registry=_REGISTRY)


def check(document: dict) -> str:
    """Validate one document against the schema its own ``schema`` key names; returns that name."""
    name = document["schema"]
    assert schema_file(name).is_file(), f"{name}: no {schema_file(name).relative_to(REPO)}"
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.absolute_path))
    assert not errors, "\n".join(f"{name} at {list(e.absolute_path)}: {e.message[:300]}" for e in errors[:10])
    return name


def json_of(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_every_schema_file_is_a_valid_draft_2020_12_schema_named_by_its_file():
    assert _SCHEMAS
    for file_name, schema in _SCHEMAS.items():
        jsonschema.Draft202012Validator.check_schema(schema)
        assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema", file_name
        assert schema_file(schema["properties"]["schema"]["const"]).name == file_name


def test_every_schema_value_the_code_can_emit_has_a_file_and_every_file_a_value():
    emitted = set()
    for path in (REPO / "gputopo").rglob("*.py"):
        emitted |= set(re.findall(r'"(gputopo\.[a-z][a-z0-9-]*/\d+)"', path.read_text(encoding="utf-8")))
    assert {"gputopo.topology/1", "gputopo.doctor/1", "gputopo.watch/1"} <= emitted  # the search finds them
    missing = sorted(name for name in emitted - set(NOT_COMMAND_OUTPUT) if not schema_file(name).is_file())
    assert not missing, f"schema values without a file in docs/schemas/: {missing}"
    files = {schema["properties"]["schema"]["const"] for schema in _SCHEMAS.values()}
    assert not files - emitted, f"schema files no code emits: {sorted(files - emitted)}"


@pytest.mark.parametrize(
    "against, document, where",
    [
        ("gputopo.report/1", {"schema": "gputopo.report/1", "output": "page.html", "gpus": "8", "links": 28}, ["gpus"]),
        ("gputopo.report/1", {"schema": "gputopo.report/2", "output": "page.html", "gpus": 8, "links": 28}, ["schema"]),
        ("gputopo.machines/1", {"schema": "gputopo.machines/1"}, []),  # `machines` is required
        ("gputopo.doctor/1", {"schema": "gputopo.doctor/1", "source": "x", "checks": [], "gpus": [], "pairs": [],
          "findings": [{"severity": "fatal", "code": "c", "message": "m", "gpus": [], "fix": None, "id": "c",
                        "pairs": [], "caused_by": None}]}, ["findings", 0]),
    ],
)  # fmt: skip
def test_a_document_the_contract_forbids_is_rejected(against, document, where):
    """The validation can fail: a wrong type, another schema, a stable key missing, a word not in the contract."""
    errors = list(validator(against).iter_errors(document))
    assert errors and any(list(e.absolute_path)[: len(where)] == where for e in errors), errors
    if document["schema"] == against:
        with pytest.raises(AssertionError, match=against):
            check(document)


def test_an_added_key_is_allowed(cli):
    """Consumers must tolerate added keys, so the schemas allow them (docs/json.md)."""
    check(json_of(cli("machines", "--json")) | {"added_in_a_later_version": {"anything": [1]}})


@pytest.mark.parametrize("machine", sorted(MACHINES))
def test_scan_and_recommend_of_every_reference_machine(cli, machine):
    topology = json_of(cli("scan", "--machine", machine, "--json"))
    assert check(topology) == "gputopo.topology/1"
    for count in [c for c in ("2", "4") if int(c) <= len(topology["gpus"])]:
        assert check(json_of(cli("recommend", "--machine", machine, "--gpus", count, "--json"))) == "gputopo.recommendation/1"


@pytest.mark.parametrize("path", [*SHARED_TOPO, *CORPUS_TOPO], ids=lambda p: p.name)
def test_scan_from_captures(cli, path):
    assert check(json_of(cli("scan", "--from", str(path), "--json"))) == "gputopo.topology/1"


def test_scan_of_fabric_graphs_with_nvlink_and_nvswitch_edges(cli):
    from fake_nvml import FakeNvml

    from gputopo.sources.host.nvml import probe

    topology = probe(FakeNvml(_machine("dgx-a100")))
    assert topology.fabric.edges and check(topology.to_dict()) == "gputopo.topology/1"
    for path in sorted((REPO / "tests/fixtures/corpus/nccl_xml").glob("*.xml")):
        document = json_of(cli("scan", "--from", str(path), "--json"))
        assert document["fabric"]["nodes"] and check(document) == "gputopo.topology/1"


def _machine(name: str):
    from gputopo.sources.reference import load_reference

    return load_reference(name)


@pytest.mark.parametrize("path", SHARED_TF_LOGS, ids=lambda p: p.name)
def test_scan_of_tensorflow_logs_alone_and_beside_a_machine(cli, path):
    alone = json_of(cli("scan", "--tf-log", str(path), "--json"))
    beside = json_of(cli("scan", "--machine", "dgx1", "--tf-log", str(path), "--json"))
    assert check(alone) == check(beside) == "gputopo.topology/1" and beside["tf"] is not None


def test_scan_and_doctor_of_the_constructed_broken_box(cli):
    pastes = [arg for path in sorted(CONSTRUCTED.glob("*.txt")) for arg in ("--from", str(path))]
    assert check(json_of(cli("scan", *pastes, "--json"))) == "gputopo.topology/1"
    result = cli("doctor", *pastes, "--json")
    assert check(json.loads(result.stdout)) == "gputopo.doctor/1"


@pytest.mark.parametrize("path", DOCTOR_FIXTURES, ids=lambda p: p.name)
def test_doctor_from_each_fixture(cli, path):
    result = cli("doctor", "--from", str(path), "--json")
    assert result.exit_code in (0, 1), result.output  # 1: a failed check (--fail-on), still a document
    assert check(json.loads(result.stdout)) == "gputopo.doctor/1"


def test_cluster_view_plan_and_the_launchers_from_two_snapshots(cli, tmp_path):
    snapshots = []
    for machine, host in (("dgx1", "node1"), ("dgx-h100", "node2")):
        path = tmp_path / f"{host}.json"
        assert check(json_of(cli("scan", "--machine", machine, "--host", host, "--save", str(path), "--json")))
        assert check(json.loads(path.read_text(encoding="utf-8"))) == "gputopo.topology/1"  # the saved snapshot
        snapshots += ["--from", str(path)]
    assert check(json_of(cli("scan", *snapshots, "--json"))) == "gputopo.cluster/1"
    plan = tmp_path / "plan.json"
    assert check(json_of(cli("recommend", *snapshots, "--gpus", "4", "--json", "--save", str(plan)))) == "gputopo.cluster-plan/1"
    assert check(json.loads(plan.read_text(encoding="utf-8"))) == "gputopo.cluster-plan/1"
    launch = cli("train", "--launcher", "slurm", "--plan", str(plan), "--dry-run", "--json", "--port", "2300")
    assert check(json_of(launch)) == "gputopo.train-launch/1"


def test_machines_and_report(cli, tmp_path):
    assert check(json_of(cli("machines", "--json"))) == "gputopo.machines/1"
    page = tmp_path / "page.html"
    assert check(json_of(cli("report", "--machine", "dgx1", "-o", str(page), "--json"))) == "gputopo.report/1"


@pytest.mark.parametrize(
    "args",
    [
        ["--cpu-devices", "2"],
        ["--cpu-devices", "4", "--batch-size", "64", "--scaling", "1,2,4"],
        ["--machine", "dgx1", "--gpus", "4"],
        ["--machine", "two-socket-4gpu", "--devices", "2,3"],
    ],
)
def test_train_dry_runs(cli, args):
    assert check(json_of(cli("train", *args, "--dry-run", "--json"))) == "gputopo.train-plan/1"


def test_watch_lines_and_summary_over_the_python_fake(cli, monkeypatch):
    from fake_nvml import FakeNvml

    from gputopo.sources.host import nvml_counters
    from gputopo.sources.reference import load_reference

    counters = {"gpus": {"0": {"nvlink_tx_bytes_per_s": {"3": 25e9}, "nvlink_replay_errors_per_s": {"1": 1000},
                               "pcie_tx_bytes_per_s": 4e9}}}  # fmt: skip
    monkeypatch.setattr(nvml_counters, "reader",
                        lambda: nvml_counters.CounterReader(FakeNvml(load_reference("dgx-h100"), counters=counters)))
    result = cli("watch", "-i", "0.05", "--json", "--planned-gpus", "0,1", "--", sys.executable, "-c",
                 "import time; time.sleep(0.2)")  # fmt: skip
    assert result.exit_code == 0, result.output
    names = [check(json.loads(line)) for line in result.stdout.splitlines()]
    assert names[-1] == "gputopo.watch-summary/1" and set(names[:-1]) == {"gputopo.watch/1"} and len(names) > 1


@pytest.mark.parametrize("kind", ["GPU", "CPU"])
def test_bench_p2p_json_of_a_hand_made_result(kind):
    """bench-p2p itself needs TensorFlow; its ``--json`` is ``views.bench.bench_json`` of the result,
    checked here on a hand-made one (tests/system/ runs the command for real)."""
    from bench_results import make_result

    from gputopo.bench.judgement import judge
    from gputopo.sources.reference import load_reference
    from gputopo.views import bench as view

    result = make_result(kind, {(0, 2): 1.0, (2, 0): 5.0}, via={(0, 2): 3.0, (2, 0): 3.0})
    topology = load_reference("two-socket-4gpu")
    document = json.loads(json.dumps(view.bench_json(result, judge(result, topology), topology)))
    assert check(document) == "gputopo.bench-p2p/1"


@pytest.mark.tf
@pytest.mark.parametrize("extra, name", [([], "gputopo.train/1"), (["--scaling", "1,2"], "gputopo.train-scaling/1")])
def test_a_real_training_run_and_scaling_run(extra, name, tmp_path):
    """A run's summary and a scaling run need TensorFlow (in the children): a few steps on CPU devices."""
    import os
    import subprocess

    pytest.importorskip("tensorflow")
    env = dict(os.environ, PYTHONPATH=str(REPO), TF_CPP_MIN_LOG_LEVEL="2")
    run = subprocess.run(
        [sys.executable, "-m", "gputopo", "train", "--cpu-devices", "2", "--batch-size", "16", "--no-eval",
         "--steps-per-epoch", "2", "--epochs", "1", "--checkpoint-dir", str(tmp_path / "ck"), *extra, "--json"],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=300,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-3000:]
    assert check(json.loads(run.stdout)) == name
