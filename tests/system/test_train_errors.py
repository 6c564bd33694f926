"""The training child's errors: TensorFlow's runtime errors become one line, in process (no training)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.tf


def test_a_tensorflow_error_outside_the_step_is_one_line_not_a_traceback(tf_cpu_devices, monkeypatch):
    import tensorflow as tf

    from gputopo.errors import InputError, TrainingFailed
    from gputopo.train.child import main as child
    from gputopo.train.config import TrainConfig

    def out_of_memory(tf_module, config):  # as building the model on a full GPU fails
        raise tf.errors.ResourceExhaustedError(None, None, "OOM when allocating tensor with shape[4096,4096]")

    monkeypatch.setattr(child, "setup_devices", out_of_memory)
    with pytest.raises(TrainingFailed, match=r"^training failed with ResourceExhaustedError: OOM when allocating"):
        child.train(TrainConfig(cpu_devices=1))

    def bad_png(tf_module, config):  # as a parameter-server worker reports a bad image at join()
        raise tf.errors.InvalidArgumentError(
            None, None, "Graph execution error:\n\nError in user-defined function passed to ParallelMapDatasetV2:6 "
            "transformation with iterator: Iterator::Root::ParallelMapV2: Invalid PNG. Failed to initialize decoder.\n"
            "\t [[{{node decode_image/DecodeImage}}]]")

    monkeypatch.setattr(child, "setup_devices", bad_png)
    with pytest.raises(InputError, match=r"could not be decoded \(Invalid PNG. Failed to initialize decoder.\)$"):
        child.train(TrainConfig(cpu_devices=1, data="synthetic"))
