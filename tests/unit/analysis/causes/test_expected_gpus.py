"""``--expect-gpus``: how many GPUs Slurm's environment expects, and the one finding when fewer show."""

from __future__ import annotations

import pytest

from gputopo.analysis.causes.expected_gpus import expected_from_env, expected_gpus_findings, visible_in_evidence
from gputopo.sources.evidence.health import HealthEvidence


@pytest.mark.parametrize(("env", "expected"), [
    ({"SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7"}, (8, "SLURM_JOB_GPUS=0,1,2,3,4,5,6,7")),  # what a Prolog gets
    ({"SLURM_JOB_GPUS": "0-3,6"}, (5, "SLURM_JOB_GPUS=0-3,6")),
    ({"SLURM_GPUS_ON_NODE": "4", "SLURM_JOB_GPUS": ""}, (4, "SLURM_GPUS_ON_NODE=4")),
    ({"SLURM_JOB_ID": "12", "CUDA_VISIBLE_DEVICES": "GPU-a,GPU-b"}, (2, "CUDA_VISIBLE_DEVICES=GPU-a,GPU-b in Slurm job 12")),
    ({"CUDA_VISIBLE_DEVICES": "0,1"}, None),  # outside Slurm: nothing expected
    ({"SLURM_JOB_ID": "12", "CUDA_VISIBLE_DEVICES": "-1"}, None),
    ({"SLURM_GPUS_ON_NODE": "eight"}, None),
    ({}, None),
])
def test_expected_from_slurms_environment(env, expected):
    assert expected_from_env(env) == expected


def test_fewer_visible_is_one_error_and_enough_is_none():
    (finding,) = expected_gpus_findings(0, 8, "SLURM_JOB_GPUS=0-7", unseen="NVML: no driver")
    assert finding.code == "gpus-missing" and finding.severity == "error"
    assert finding.message.startswith("0 GPUs visible, 8 expected (NVML: no driver): expected by SLURM_JOB_GPUS=0-7")
    assert "drain" in finding.fix
    assert expected_gpus_findings(8, 8, "--expect-gpus 8") == []
    assert expected_gpus_findings(16, 8, "--expect-gpus 8") == []
    (one,) = expected_gpus_findings(1, 2, "--expect-gpus 2", " on host n1")
    assert one.message.startswith("1 GPU visible, 2 expected on host n1:")
    (unknown,) = expected_gpus_findings(None, 2, "--expect-gpus 2", " in box.tar.gz")
    assert unknown.code == "gpus-not-counted" and unknown.severity == "info"


def test_visible_in_evidence_nvml_first_then_what_saved_evidence_shows():
    from gputopo.sources.host.host_health import HostHealth
    from gputopo.sources.host.nvml_health import NvmlHealth
    from gputopo.sources.reference import load_reference

    assert visible_in_evidence(HealthEvidence(nvml_unavailable="no driver")) == (0, "NVML: no driver")
    assert visible_in_evidence(HealthEvidence(nvml=NvmlHealth())) == (0, None)
    assert visible_in_evidence(HealthEvidence(topology=load_reference("dgx1"))) == (8, None)
    assert visible_in_evidence(HealthEvidence(host=HostHealth(driver_gpus=["0000:01:00.0"]))) == (1, None)
    assert visible_in_evidence(HealthEvidence()) == (None, None)


@pytest.mark.parametrize("env", [
    {"SLURM_JOB_GPUS": "0-" + "9" * 5000},
    {"SLURM_JOB_GPUS": "9" * 5000 + "-1"},
    {"SLURM_GPUS_ON_NODE": "9" * 5000},
])
def test_a_slurm_variable_of_thousands_of_digits_says_nothing(env):
    """(Python refuses to read an integer of more than 4,300 digits: such a variable in a job's
    environment made scan and doctor end in a ValueError traceback, exit 1 - a failed check to a
    Slurm prolog.)"""
    assert expected_from_env(env) is None
