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


def _fake_tensorflow(root, body: str):
    package = root / "tensorflow"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(body)
    return root


def test_missing_tensorflow_says_install_it(monkeypatch):
    import sys

    import pytest

    from gputopo.errors import EXIT_ENVIRONMENT, TensorFlowUnavailable
    from gputopo.tfruntime import import_tensorflow

    monkeypatch.setitem(sys.modules, "tensorflow", None)  # as if not installed
    with pytest.raises(TensorFlowUnavailable, match=r"install it with `pip install 'gputopo\[tf\]'`") as caught:
        import_tensorflow()
    assert caught.value.exit_code == EXIT_ENVIRONMENT


def test_installed_but_broken_tensorflow_is_not_told_to_install(tmp_path):
    """A TensorFlow whose import fails (a missing CUDA library, a dependency missing) is one line,
    exit 3, saying it is installed: run where no real TensorFlow is imported (a fake on the path)."""
    import subprocess
    import sys

    from conftest import REPO

    cases = {
        "cuda": "raise ImportError('libcudart.so.12: cannot open shared object file: No such file or directory')",
        "dependency": "import tensorflow_no_such_dependency_module",
        "other": "raise AttributeError(\"module 'numpy' has no attribute 'complex_'\")",
    }
    for name, body in cases.items():
        root = _fake_tensorflow(tmp_path / name, body)
        proc = subprocess.run(
            [sys.executable, "-m", "gputopo", "bench-p2p", "--cpu-devices", "2"],
            capture_output=True, text=True, cwd=REPO, timeout=60,
            env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{REPO}"},
        )  # fmt: skip
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 3, proc.stderr
        assert len(lines) == 1 and lines[0].startswith("gputopo: error: TensorFlow is installed but failed to import: ")
        assert "pip install" not in lines[0]
    assert "libcudart.so.12" in _last_error(tmp_path / "cuda")


def _last_error(root) -> str:
    import subprocess
    import sys

    from conftest import REPO

    proc = subprocess.run(
        [sys.executable, "-c", "from gputopo.tfruntime import import_tensorflow\n"
         "try:\n    import_tensorflow()\nexcept Exception as exc:\n    print(exc)"],
        capture_output=True, text=True, cwd=REPO, timeout=60, env={**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{REPO}"},
    )  # fmt: skip
    return proc.stdout
