"""Every real TensorFlow log of the corpus, decorated the way logs are pasted (quoted, CRLF, blank
lines, one rank's mpirun prefix, timestamps stripped, a shell prompt before), reads to the same
view: start-ups, GPUs, the implied count, peers."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, SHARED_FIXTURES, corpus_known_gaps

from gputopo.sources.tf.tflog import parse_tf_log

# A log gputopo does not read yet (KNOWN_GAPS.md; test_tflog_corpus holds it as a strict xfail) is left out.
LOGS = sorted(p for p in [*(OWN_FIXTURES / "corpus" / "tf_logs").glob("*.log"), *(SHARED_FIXTURES / "tf_logs").glob("*.log")]
              if p.name not in corpus_known_gaps())
MANGLINGS = {
    "quoted": lambda t: "\n".join("> " + line for line in t.split("\n")),
    "crlf": lambda t: t.replace("\n", "\r\n"),
    "blank lines": lambda t: t.replace("\n", "\n\n"),
    "one mpirun rank": lambda t: "\n".join("[1,0]<stderr>:" + line for line in t.split("\n")),
    "indented": lambda t: "\n".join("    " + line for line in t.split("\n")),
    "timestamps stripped": lambda t: re.sub(r"(?m)^(\s*)\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ", r"\1", t),
    "shell prompt first": lambda t: "(venv) user@gpu-host:~/run$ python train.py 2>&1 | tee log.txt\n" + t,
}


def _view(text: str, name: str):
    view = parse_tf_log(text, name)
    return (view.startups, view.startup, view.era, view.gpu_count, view.gpu_count_at_least,
            [(d.ordinal, d.name, d.pci_bus_id) for d in view.devices], view.peer, view.enable_failed)


@pytest.mark.parametrize("mangling", sorted(MANGLINGS))
@pytest.mark.parametrize("path", LOGS, ids=[p.name for p in LOGS])
def test_a_decorated_log_reads_the_same(path: Path, mangling: str) -> None:
    text = path.read_text()
    assert _view(MANGLINGS[mangling](text), path.name) == _view(text, path.name)
