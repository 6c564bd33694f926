"""What a TF log says on its own (gputopo/analysis/causes/tf_log_findings.py): here, a GPU on which
TensorFlow got far less memory than on the others of its model."""

from __future__ import annotations

from conftest import OWN_FIXTURES

from gputopo.analysis.causes.tf_log_findings import memory_short_findings
from gputopo.model import TfDevice, TfView
from gputopo.sources.tf.tflog import parse_tf_log

LOGS = OWN_FIXTURES / "corpus" / "tf_logs"


def test_a_gpu_with_far_less_memory_than_its_twins_was_in_use_when_tensorflow_started():
    # 8x GTX 1080 Ti: TF got 10481 MB on seven and 1800 MB on GPU 6 (the log's Created lines).
    view = parse_tf_log((LOGS / "tf15_edge_matrix_two_islands_8gpu_1080ti.log").read_text(encoding="utf-8"), "tf.log")
    (finding,) = memory_short_findings(view)
    assert finding.gpus == [6] and "1800 MB on GPU 6 against up to 10481 MB" in finding.message
    assert "read from the figures alone" in finding.message and "nvidia-smi" in finding.fix


def test_other_models_a_lone_gpu_and_a_small_difference_say_nothing():
    view = TfView(devices=[TfDevice(0, "A", memory_mb=10000), TfDevice(1, "A", memory_mb=9000),
                           TfDevice(2, "B", memory_mb=2000), TfDevice(3, None, memory_mb=100)])
    assert memory_short_findings(view) == []


def test_pairs_denied_on_windows_point_at_the_driver_model_not_the_sockets():
    from gputopo.analysis.causes.tf_crosscheck import tf_findings
    from gputopo.sources.tf.tflog import parse_tf_log, topology_from_tf_view

    name = "tf14_windows_aq91_peer_not_supported_sources_1_2_6gpu_cut.log"
    text = (OWN_FIXTURES / "corpus" / "tf_logs" / name).read_text()
    codes = {f.code: f for f in tf_findings(topology_from_tf_view(parse_tf_log(text, name)))}
    assert "TCC driver model" in codes["tf-peer-groups"].fix and "most often" not in codes["tf-peer-groups"].fix
    linux = text.replace("c:\\users\\u\\bin\\tensorflow\\tensorflow\\core\\common_runtime\\gpu\\", "tensorflow/core/common_runtime/gpu/")
    linux_codes = {f.code: f for f in tf_findings(topology_from_tf_view(parse_tf_log(linux, name)))}
    assert "tf-log-windows" not in linux_codes and "different CPU sockets" in linux_codes["tf-peer-groups"].fix
    from gputopo.analysis.notes.reading_notes import note_finding
    from gputopo.model import ReadingNote

    said = note_finding(ReadingNote("tf-log-windows", {"line": 7}))
    assert said.severity == "info" and "(line 7:" in said.message and "TCC driver model" in said.message
    assert "nvidia-smi -g N -dm 1" in said.fix
