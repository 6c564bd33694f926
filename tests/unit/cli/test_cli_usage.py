"""Usage errors and options mean one thing everywhere (issue 24): the hint names the command whose
help to read, --format's error lists every format, -h/-V exist, help fits 80 columns."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import REPO, assert_one_error_line


def _gputopo(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gputopo", *args], cwd=REPO, timeout=120, text=True,
                          capture_output=True, env={**os.environ, **(env or {})})


def test_an_option_without_its_value_points_at_the_commands_help():
    run = _gputopo("scan", "--machine")
    assert run.returncode == 2
    assert run.stderr.strip().endswith("(see 'gputopo scan --help')"), run.stderr


def test_the_format_error_names_slurm_too(cli):
    line = assert_one_error_line(cli("recommend", "--machine", "dgx1", "-n", "2", "--format", "yaml"))
    assert "slurm" in line and "json" in line


COMMANDS = ["scan", "machines", "recommend", "bench-p2p", "train", "report"]


def test_dash_h_is_help_on_every_command_and_dash_capital_v_the_version(cli):
    from gputopo import __version__

    for name in COMMANDS:
        result = cli(name, "-h")
        assert result.exit_code == 0 and f"gputopo {name}" in result.output, (name, result.output)
    assert cli("-V").output.strip() == f"gputopo {__version__}"


def test_shell_completion_is_offered():
    run = _gputopo("--help", env={"COLUMNS": "80"})
    assert "--install-completion" in run.stdout and "--show-completion" in run.stdout
    run = _gputopo(env={"_GPUTOPO_COMPLETE": "complete_bash", "COMP_WORDS": "gputopo rec", "COMP_CWORD": "1"})
    assert run.stdout.split() == ["recommend"]


def test_help_fits_80_columns():
    for name in ["", *COMMANDS]:
        run = _gputopo(*([name] if name else []), "--help", env={"COLUMNS": "80"})
        assert run.returncode == 0
        wide = [line for line in run.stdout.splitlines() if len(line) > 80]
        assert not wide, (name, wide[:2])


def test_a_count_is_gpus_or_n_everywhere_and_bench_p2p_takes_a_list_as_devices(cli):
    for name in ("recommend", "train", "report"):
        assert "-n" in cli(name, "--help").output
    assert "--devices" in cli("bench-p2p", "--help").output
    # The old list option still works but says so (checked before TensorFlow is imported).
    run = _gputopo("bench-p2p", "--gpus", "0,1", "--size", "12XB", "--cpu-devices", "2")
    assert run.returncode == 2
    assert "--gpus LIST is deprecated: use --devices LIST" in run.stderr


def test_train_does_not_ignore_gpus_next_to_cpu_devices(cli):
    line = assert_one_error_line(cli("train", "--gpus", "4", "--cpu-devices", "2", "--dry-run"))
    assert "--gpus 4" in line and "--cpu-devices 2" in line


def test_train_with_several_hosts_points_at_the_plan(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for host in ("node1", "node2"):
        assert cli("scan", "--machine", "dgx1", "--host", host, "--save", f"{host}.json").exit_code == 0
    line = assert_one_error_line(cli("train", "--from", "node1.json", "--from", "node2.json", "--dry-run"))
    assert "--save plan.json" in line and "--plan plan.json" in line


def test_recommend_wraps_under_its_own_indent():
    run = _gputopo("recommend", "--machine", "dgx1", "-n", "4", env={"COLUMNS": "80"})
    lines = run.stdout.splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith("  GPUs "))
    assert lines[start + 1].startswith("  ") and lines[start + 2].startswith("  ")  # not back at column 0
    why = [line for line in lines if line.startswith("  #1 ")]
    assert why and lines[lines.index(why[0]) + 1].startswith("     ")  # under the text, past "#1"


def test_cpu_lists_wrap_between_ranges_never_inside_a_number():
    run = _gputopo("scan", "--machine", "dgx-a100", env={"COLUMNS": "60"})
    assert run.returncode == 0
    assert "176-191" in run.stdout and "48-63," in run.stdout


def test_piped_output_has_no_trailing_spaces():
    for args in (["scan", "--machine", "dgx1"], ["recommend", "--machine", "dgx1", "-n", "4"], ["machines"]):
        run = _gputopo(*args)
        assert run.returncode == 0
        assert not [line for line in run.stdout.splitlines() if line != line.rstrip()], args


def test_the_colour_legend_only_where_colours_are_shown():
    assert "colour =" not in _gputopo("scan", "--machine", "dgx1").stdout
    assert "colour =" in _gputopo("scan", "--machine", "dgx1", env={"FORCE_COLOR": "1", "COLUMNS": "120"}).stdout


def test_saving_says_so_on_stderr(tmp_path):
    target = tmp_path / "snap.json"
    run = _gputopo("scan", "--machine", "dgx1", "--json", "--save", str(target))
    assert run.returncode == 0 and target.exists()
    assert f"saved {target}" in run.stderr and run.stdout.lstrip().startswith("{")


def test_parameter_server_summary_says_each_step_is_one_workers_batch(monkeypatch, capsys):
    from gputopo.views.train import render_summary

    monkeypatch.setenv("COLUMNS", "120")
    summary = {"status": "completed", "steps": 10, "total_steps": 10, "steps_run": 10, "start_step": 0,
               "initial_loss": 2.3, "initial_loss_steps": 10, "final_loss": 1.0, "final_accuracy": 0.5,
               "examples_per_second": 100.0, "global_batch_size": 64, "per_replica_batch_size": 64, "replicas": 2,
               "workers": 2, "strategy": "parameter-server", "devices": ["w0", "w1"], "checkpoint_path": None}
    render_summary(summary)
    text = " ".join(capsys.readouterr().out.split())
    assert "64 per step, each step on one of 2 workers" in text and "per replica" not in text
    assert "mean of the first 10 steps" in text


# Every --json document names its schema; findings are `findings`, numactl a list (docs/json.md).
def _json_documents(cli, tmp_path):
    import json

    plan = tmp_path / "plan.json"
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    for path, host in ((a, "node1"), (b, "node2")):
        assert cli("scan", "--machine", "dgx1", "--host", host, "--save", str(path)).exit_code == 0
    runs = {
        "scan": ["scan", "--machine", "dgx1", "--json"],
        "scan (cluster)": ["scan", "--from", str(a), "--from", str(b), "--json"],
        "recommend": ["recommend", "--machine", "dgx1", "--gpus", "4", "--json"],
        "recommend (plan)": ["recommend", "--from", str(a), "--from", str(b), "--gpus", "16", "--save", str(plan), "--json"],
        "train --dry-run": ["train", "--machine", "dgx1", "--gpus", "4", "--dry-run", "--json"],
        "report": ["report", "--machine", "dgx1", "-o", str(tmp_path / "r.html"), "--json"],
        "machines": ["machines", "--json"],
        "doctor": ["doctor", "--from", str(REPO / "tests/fixtures/doctor/proc_cmdline_amd_iommu_pt.txt"), "--json"],
    }
    for name, args in runs.items():
        result = cli(*args)
        assert result.exit_code == 0, (name, result.output)
        yield name, json.loads(result.stdout)


def test_every_json_document_names_its_schema_and_spells_findings_and_numactl_one_way(cli, tmp_path):
    documents = dict(_json_documents(cli, tmp_path))
    for name, data in documents.items():
        assert isinstance(data, dict) and str(data.get("schema", "")).startswith("gputopo."), name
    for name in ("scan", "scan (cluster)", "doctor"):
        assert isinstance(documents[name]["findings"], list), name
    scan = documents["scan"]
    assert scan["diagnostics"] == scan["findings"]  # the deprecated alias, written alongside
    numactls = [documents["recommend"]["groups"][0]["numactl"], documents["train --dry-run"]["plan"]["numactl"],
                *(host["numactl"] for host in documents["recommend (plan)"]["hosts"])]
    assert all(isinstance(value, list) for value in numactls), numactls
    assert documents["recommend"]["groups"][0]["numactl"] == ["numactl", "--cpunodebind=0", "--membind=0"]


def test_a_snapshot_with_findings_only_reads_back(tmp_path):
    import json

    from gputopo.sources.reference import load_reference
    from gputopo.analysis import with_findings
    from gputopo.model import Topology

    data = json.loads(with_findings(load_reference("dgx1")).to_json_text())
    findings = data.pop("diagnostics")
    assert findings and Topology.from_dict(data).diagnostics == Topology.from_dict({**data, "diagnostics": findings}).diagnostics


def _option_rows(help_text: str) -> dict[str, int]:
    """Each option of a rich help screen -> how many lines its row takes."""
    import re

    rows: dict[str, int] = {}
    current = None
    for line in help_text.splitlines():
        if not line.startswith("│"):
            current = None  # a panel's border or a blank line ends its last option
            continue
        match = re.match(r"│ (--[\w-]+)", line)
        if match:
            current = match.group(1)
            rows[current] = 1
        elif current is not None:
            rows[current] += 1
    return rows


def test_train_help_groups_its_options_and_says_each_in_at_most_two_lines():
    run = _gputopo("train", "--help", env={"COLUMNS": "80"})
    for panel in ("Inputs", "Choice of GPUs", "Training", "Cluster", "Checkpoints", "Output"):
        assert f"╭─ {panel} " in run.stdout, panel
    rows = _option_rows(run.stdout)
    assert len(rows) > 30 and "--checkpoint-every" in rows
    long = {option: count for option, count in rows.items() if count > 2}
    assert not long, long


def test_command_help_is_wrapped_by_the_terminal_not_by_the_docstring():
    import re

    for columns in (80, 120):
        run = _gputopo("--help", env={"COLUMNS": str(columns)})
        rows: list[list[str]] = []
        for line in run.stdout.split("Commands", 1)[1].splitlines():
            if not line.startswith("│"):
                continue
            if re.match(r"│ [a-z]", line):
                rows.append([])
            rows[-1].append(line[1:-1].rstrip())
        assert len(rows) >= 10
        for row in rows:  # a line ends only where the next word would not fit: no break of the docstring's
            ragged = [line for line, after in zip(row, row[1:]) if len(line) + 1 + len(after.split()[0]) < columns - 4]
            assert not ragged, (columns, row)
    scan = _gputopo("scan", "--help", env={"COLUMNS": "200"}).stdout
    assert "findings. --from may be given several times" in scan  # one paragraph, not the docstring's lines


def test_values_are_completed(cli):
    def complete(*words: str) -> list[str]:
        run = _gputopo(env={"_GPUTOPO_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(("gputopo", *words)),
                            "COMP_CWORD": str(len(words))})
        return run.stdout.split()

    assert "dgx1" in complete("scan", "--machine", "") and complete("recommend", "--machine", "dgx-") == [
        "dgx-a100", "dgx-h100"]
    assert complete("scan", "--fail-on", "") == ["warning", "error"]
    assert complete("doctor", "--fail-on", "e") == ["error"]
    assert complete("recommend", "--format", "s") == ["slurm", "slurm-topology"]
    assert complete("train", "--strategy", "") == ["mirrored", "multi-worker", "parameter-server"]
