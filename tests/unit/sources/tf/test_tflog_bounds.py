"""Hostile TF logs stay cheap: a 2 MB line, 30 MB of log, an absurd ordinal (issue 11)."""

from __future__ import annotations

import subprocess
import sys

from conftest import OWN_FIXTURES

from gputopo.sources.tf.tflog import MAX_TF_ORDINAL, parse_tf_log

REAL = (OWN_FIXTURES / "corpus" / "tf_logs" / "tf15_two_workers_one_log_6gpu_power9.log").read_text()


def test_two_megabyte_lines_of_every_shape_are_read_at_once():
    for line in (
        "I tensorflow/core/x.cc:1] " + "a" * 2_000_000,  # the old prefix regex backtracked on this
        "x" + "a." * 1_000_000,
        "Created TensorFlow device (" + "g" * 2_000_000,
        "0:" + " Y" * 1_000_000,  # a "matrix row" longer than any real one is not read as one
        ".cc:" * 500_000,
    ):
        view = parse_tf_log(line + "\n" + REAL, "long.log")
        assert view.startups == 2 and len(view.devices) == 6


def test_thirty_megabytes_of_real_log_parse_in_a_child_well_within_its_time():
    code = (
        "import sys; from gputopo.sources.tf.tflog import parse_tf_log; text = sys.stdin.read(); "
        "v = parse_tf_log(text, 'big.log'); print(v.startups, len(v.devices))"
    )
    copies = 30_000_000 // len(REAL)
    done = subprocess.run(
        [sys.executable, "-c", code], input=(REAL + "\n") * copies, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [str(2 * copies), "6"]


def test_an_absurd_ordinal_is_ignored_with_a_note_and_sizes_nothing():
    view = parse_tf_log(
        "cannot enable peer access from device ordinal 0 to device ordinal 1\n"
        "cannot enable peer access from device ordinal 1 to device ordinal 1023\n",
        "log",
    )
    assert len(view.peer) == 2 and [d.ordinal for d in view.devices] == [0, 1]
    assert view.reading_notes[0].facts["cuts"] == [{"cut": "implausible-ordinal", "ordinal": 1023}]  # ignored
    big = parse_tf_log(f"cannot enable peer access from device ordinal 0 to device ordinal {MAX_TF_ORDINAL}\n", "log")
    assert [d.ordinal for d in big.devices] == [0, MAX_TF_ORDINAL]  # the GPUs named, not 128 of them
