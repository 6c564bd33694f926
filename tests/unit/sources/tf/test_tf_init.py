"""`scan --tf`: TensorFlow's GPU initialisation in a child process, read as a source."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile

import pytest
from conftest import OWN_FIXTURES

from gputopo.errors import EXIT_ENVIRONMENT, GputopoError, TensorFlowUnavailable
from gputopo.sources.tf.tflog import ERA_NO_GPU

OWN_LOGS = OWN_FIXTURES / "tf_logs"


def test_scan_tf_for_real_reports_that_tensorflow_sees_no_gpu(cli):
    """Runs TensorFlow in a child process (seconds): on this CPU-only machine it sees no GPU."""
    if importlib.util.find_spec("tensorflow") is None:  # not importorskip: that would import it here
        pytest.skip("TensorFlow is not installed")
    tensorflow_was_loaded = "tensorflow" in sys.modules  # other tests may run TF in this process
    result = cli("scan", "--tf", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output[result.output.index("{") :])
    assert data["tf"]["devices"] == [] and data["tf"]["era"] == ERA_NO_GPU
    assert "TensorFlow" in data["tf"]["source"]
    codes = [f["code"] for f in data["diagnostics"]]
    assert "tf-no-gpu" in codes
    if not tensorflow_was_loaded:
        assert "tensorflow" not in sys.modules  # the child ran TF, not this process


def test_scan_tf_without_tensorflow_is_one_error_line(cli, monkeypatch):
    from gputopo.sources.tf import tf_init

    monkeypatch.setattr(tf_init, "tensorflow_installed", lambda: False)
    result = cli("scan", "--tf")
    assert result.exit_code == EXIT_ENVIRONMENT  # TensorFlow missing: the machine, not the command line
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "needs TensorFlow" in lines[0]


def test_scan_tf_and_tf_log_together_is_refused(cli):
    result = cli("scan", "--tf", "--tf-log", "x.log")
    assert result.exit_code == 2 and "not both" in result.output


def test_child_that_hangs_is_cut_off_and_one_that_dies_is_reported(monkeypatch):
    from gputopo.sources.tf import tf_init

    monkeypatch.setattr(tf_init, "tensorflow_installed", lambda: True)
    with pytest.raises(GputopoError, match="did not finish within 1 s"):
        tf_init.capture_tf_init_log(timeout_s=1, script="import time; time.sleep(30)")
    with pytest.raises(GputopoError, match=r"failed \(exit code 5\): boom"):
        tf_init.capture_tf_init_log(timeout_s=30, script="print('boom'); raise SystemExit(5)")
    with pytest.raises(TensorFlowUnavailable, match="cannot be imported: No module named 'tensorflow_x'"):
        tf_init.capture_tf_init_log(
            timeout_s=30, script=tf_init.CHILD_SCRIPT.replace("import tensorflow as tf", "import tensorflow_x as tf")
        )


def test_the_child_writes_its_temporary_files_into_a_private_folder_that_goes_with_it(monkeypatch, tmp_path):
    from gputopo.sources.tf import tf_init

    monkeypatch.setattr(tf_init, "tensorflow_installed", lambda: True)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # this process's temporary folder (cached)
    script = ("import os, stat, tempfile; f = tempfile.NamedTemporaryFile(prefix='__autograph_generated_file', "
              "delete=False); d = tempfile.gettempdir(); print(d, oct(stat.S_IMODE(os.stat(d).st_mode))); "
              f"print('{tf_init._GPU_COUNT_MARK}', 0)")
    output = tf_init.capture_tf_init_log(timeout_s=60, script=script)
    private, mode = output.split()[:2]
    assert os.path.dirname(private) == str(tmp_path) and mode == "0o700"
    assert list(tmp_path.iterdir()) == []  # the child's file went with its folder


def test_child_environment_asks_for_the_peer_matrix(monkeypatch):
    from gputopo.sources.tf import tf_init

    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "3")
    env = tf_init.child_environment()
    assert env["TF_CPP_MAX_VLOG_LEVEL"] == "1" and env["TF_CPP_MIN_LOG_LEVEL"] == "0"


def test_child_output_with_gpus_is_parsed_and_without_keeps_tfs_reason():
    from gputopo.sources.tf import tf_init

    log = (OWN_LOGS / "tf216_absl_vlog_interleaved.log").read_text()
    view = tf_init.tf_view_from_init_log(f"GPUTOPO_TF_VERSION 2.16.1\nGPUTOPO_TF_GPUS 3\n{log}")
    assert len(view.devices) == 3 and view.peer[0][2] is True and "2.16.1" in view.source
    empty = tf_init.tf_view_from_init_log(
        "E0000 00:00:1 123 cuda_executor.cc:1] failed call to cuInit: CUDA_ERROR_NO_DEVICE\nGPUTOPO_TF_GPUS 0\n"
    )
    assert empty.devices == [] and empty.era == ERA_NO_GPU and empty.visible_ordinals == []
    assert empty.reading_notes[0].code == "tf-no-gpu-reason"
    assert "CUDA_ERROR_NO_DEVICE" in empty.reading_notes[0].facts["said"]
