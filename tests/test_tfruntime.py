"""gputopo.tfruntime: TensorFlow's start-up chatter held back, its errors kept (no TensorFlow needed)."""

from __future__ import annotations

import os

from gputopo.tfruntime import ABSL_PREAMBLE, filter_startup_log, startup_log_filtered

# As TensorFlow 2.21 prints them during `import tensorflow`, before absl is initialised.
ONEDNN_INFO = (
    "I0000 00:00:1795308550.939190   22071 port.cc:153] oneDNN custom operations are on. You may see slightly "
    "different numerical results due to floating-point round-off errors from different computation orders.\n"
)
WARNING = "W0000 00:00:1795308550.939190   22071 cpu_feature_guard.cc:210] some warning\n"
ERROR = "E0000 00:00:1795308553.585728   22071 cuda_dnn.cc:8310] Unable to register cuDNN factory\n"
FATAL = "F0000 00:00:1795308553.585728   22071 gpu_device.cc:99] Check failed: ok\n"
OTHER = "/usr/lib/python3/numpy/__init__.py:1: UserWarning: something Python says\n"
STARTUP = ABSL_PREAMBLE + "\n" + ONEDNN_INFO + WARNING + ERROR + FATAL + OTHER


def test_levels_hide_what_tf_cpp_min_log_level_says_and_nothing_else():
    assert filter_startup_log(STARTUP, 0) == STARTUP
    assert filter_startup_log(STARTUP, 1) == WARNING + ERROR + FATAL + OTHER
    assert filter_startup_log(STARTUP, 2) == ERROR + FATAL + OTHER
    assert filter_startup_log(STARTUP, 3) == FATAL + OTHER


def test_what_cpp_writes_to_stderr_meanwhile_comes_out_filtered(capfd):
    with startup_log_filtered(2):
        os.write(2, STARTUP.encode())
        assert capfd.readouterr().err == ""  # held back until the import is over
    assert capfd.readouterr().err == ERROR + FATAL + OTHER
