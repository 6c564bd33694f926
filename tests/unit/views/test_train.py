"""`gputopo train` screens: the plan and the summary print paths and notes as they are, and say what
the loss figures are."""

from __future__ import annotations

import pytest

from gputopo.train.launch.plan import LaunchPlan
from gputopo.views.train import render_plan, render_summary

SUMMARY = {
    "status": "completed",
    "steps": 20,
    "total_steps": 20,
    "steps_run": 20,
    "start_step": 0,
    "initial_loss": 2.2913,
    "final_loss": 1.7661,
    "final_accuracy": 0.57,
    "examples_per_second": 2020.0,
    "global_batch_size": 64,
    "per_replica_batch_size": 32,
    "replicas": 2,
    "devices": ["/device:CPU:0", "/device:CPU:1"],
    "checkpoint_path": "/tmp/x[bold]y[/bold]/ckpt-20",
}


def _text(capsys) -> str:
    return " ".join(capsys.readouterr().out.split())


def test_summary_prints_the_checkpoint_path_as_it_is(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "120")
    render_summary(dict(SUMMARY))
    assert "/tmp/x[bold]y[/bold]/ckpt-20" in _text(capsys)


def test_summary_says_what_the_loss_figures_are(monkeypatch, capsys):
    """The bar shows the last steps' loss; the summary's final loss is the last epoch's mean: say so."""
    monkeypatch.setenv("COLUMNS", "120")
    render_summary(dict(SUMMARY))
    text = _text(capsys)
    assert "2.2913 (first steps) -> 1.7661 (mean of the last epoch)" in text
    assert "0.570 (mean of the last epoch)" in text


def test_plan_prints_notes_and_reason_literally(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "120")
    plan = LaunchPlan("CPU", 2, [], {}, [], reason="why [red]not[/]", notes=["see /data/[x]/train"])
    render_plan(plan, [{"label": "training process", "shell": "python -m x --data '/data/[x]'"}], "mirrored")
    text = _text(capsys)
    assert "why [red]not[/]" in text and "see /data/[x]/train" in text and "--data '/data/[x]'" in text


@pytest.mark.parametrize(("basis", "says"), [
    ("measured", "(measured)"),
    ("estimated", "(estimated for its link type)"),
    ("assumed", "(at least: estimated where a fact its speed depends on is not in the source)"),
])
def test_plan_says_how_the_bottleneck_per_direction_figure_was_had(monkeypatch, capsys, basis, says):
    """Issue 32: a measured figure is never called "expected for its link type"."""
    monkeypatch.setenv("COLUMNS", "160")
    plan = LaunchPlan("GPU", 2, [0, 1], {"CUDA_VISIBLE_DEVICES": "0,1"}, [], ring=[0, 1], bottleneck_gbps=20.0,
                      bottleneck_basis=basis)
    render_plan(plan, [], "mirrored")
    text = " ".join(_text(capsys).split())
    assert f"~20.0 GB/s per direction {says}" in text
    assert basis != "measured" or "expected" not in text

def test_a_resumed_run_that_was_already_complete_says_so(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "120")
    render_summary({**SUMMARY, "steps": 20, "steps_run": 0, "start_step": 20, "initial_loss": None,
                    "final_loss": None, "examples_per_second": None})
    text = _text(capsys)
    assert "Already complete: the checkpoint is at step 20 of 20" in text and "Raise --epochs" in text
    assert " ? " not in text and "examples/s" not in text


def test_no_checkpoint_names_the_option_that_was_given(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "120")
    render_summary({**SUMMARY, "checkpoint_path": None})
    assert "none (--no-checkpoint)" in _text(capsys) and "--checkpoint-dir" not in _text(capsys)


def test_summary_prints_the_watched_link_traffic_literally(monkeypatch, capsys):
    monkeypatch.setenv("COLUMNS", "160")
    watch = {"recorded": True, "reason": None, "seconds": 3.0, "frames": 3,
             "links": [{"gpu": 0, "link": 1, "peer": "GPU [bold]2[/bold]", "tx_bytes": 2e9, "rx_bytes": 0,
                        "peak_percent": 30.0}], "pcie": [],
             "plan": {"verdict": "pcie", "link_errors": 0}, "findings": []}
    render_summary(dict(SUMMARY, watch=watch))
    text = _text(capsys)
    assert "link traffic over 3.0 s (3 intervals):" in text and "GPU [bold]2[/bold]: 2.00 GB" in text
    assert "plan: PCIe carried the traffic while the planned NVLinks idled" in text
