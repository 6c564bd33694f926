"""The examples in README.md and docs/*.md run, so a doc cannot drift from the tool (issue 24).

Convention (docs/development.md): a ```sh fence holds commands that are meant to run. The docs
tests run every such block, in order, one scratch folder per document, as one bash script
(``set -eo pipefail``), with ``gputopo`` this checkout and ``nvidia-smi`` a stand-in that prints a
real DGX-1 capture for ``topo -m``. A block whose fence says ``not-run`` after the language
(```` ```sh not-run (needs a GPU) ````: a reader sees the commands, not the marker) is left out
whole, as is one whose first line is ``# not run ...``; a line whose comment says ``not run: REASON``
is left out. Other fences (``console``, ``bash``
for a file's content, plain) are shown, not run. Files the examples read (topo.txt, train.log,
p2p.txt, box.json, node1.json, ...) are copied or written into the scratch folder first.

And every repository path a document names exists."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import OWN_FIXTURES, REPO, SHARED_FIXTURES

DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SH_BLOCK = re.compile(r"^```sh([^\n]*)\n(.*?)^```", re.S | re.M)  # (the fence's words after sh, the block)
NOT_RUN = re.compile(r"#.*\bnot run\b")
CAPTURE = SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt"
TF_LOG = SHARED_FIXTURES / "tf_logs" / "tf2_created_device_4gpu_3090.log"
PAIR = OWN_FIXTURES / "corpus" / "pairs"  # nvidia-smi topo -m and p2pBandwidthLatencyTest of one box


def runnable(block: str, fence: str = "") -> str | None:
    """The block as a script, lines marked ``not run`` left out; None for a block marked whole (in
    its fence, hidden from readers, or in its first line)."""
    if "not-run" in fence.split(" ", 1)[0] or fence.strip().startswith("not-run"):
        return None
    lines = block.splitlines()
    first = next((line for line in lines if line.strip()), "")
    if first.lstrip().startswith("# not run"):
        return None
    kept = [line for line in lines if not NOT_RUN.search(line)]
    return "\n".join(kept) if any(line.strip() and not line.lstrip().startswith("#") for line in kept) else None


def _gputopo_json(*args: str, cwd: Path) -> None:
    subprocess.run([sys.executable, "-m", "gputopo", *args], cwd=cwd, check=True, capture_output=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(REPO)})


def _scratch(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder with what the examples read, and an environment whose PATH finds gputopo there."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    tools = {
        "gputopo": f'#!/bin/sh\nexec "{sys.executable}" -m gputopo "$@"\n',
        # Only `nvidia-smi topo -m`, answered with a real capture: the -p2p forms are marked not run.
        "nvidia-smi": f'#!/bin/sh\nif [ "$1 $2" = "topo -m" ]; then cat "{CAPTURE}"; exit 0; fi\n'
                      'echo "nvidia-smi stand-in: only topo -m" >&2; exit 1\n',
    }
    for name, text in tools.items():
        path = bin_dir / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(PAIR / "asus_esc8000a_4x_rtx6000ada_topo.txt", work / "topo.txt")  # p2p.txt is the same box
    shutil.copy(CAPTURE, work / "node2-topo.txt")
    shutil.copy(TF_LOG, work / "train.log")
    shutil.copy(PAIR / "asus_esc8000a_4x_rtx6000ada_p2pbw.txt", work / "p2p.txt")
    # What `scan --save` (NVML, not run here) would have written on a GPU host.
    _gputopo_json("scan", "--machine", "dgx1", "--save", "box.json", "--json", cwd=work)
    shutil.copy(work / "box.json", work / "snap.json")
    _bench_of(work / "box.json", work / "bench.json")
    for host in ("node1", "node2"):
        _gputopo_json("scan", "--machine", "dgx1", "--host", host, "--save", f"{host}.json", "--json", cwd=work)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}", "PYTHONPATH": str(REPO),
           "COLUMNS": "100"}
    return work, env


def _bench_of(box: Path, bench: Path) -> None:
    """What `bench-p2p --save` (TensorFlow on GPUs, not run here) would have written on that host:
    its GPUs with their bus ids, a pair measured (a bench of logical CPU devices is refused on GPUs)."""
    from gputopo.model import Measurement, Topology

    topology = Topology.from_dict(json.loads(box.read_text()))
    topology.source, topology.diagnostics = "bench-p2p", []
    topology.link(0, 1).measured = Measurement(a_to_b_gbps=23.1, b_to_a_gbps=22.9, method="bench-p2p")
    bench.write_text(topology.to_json_text())


def _documents_with_examples() -> list[Path]:
    return [doc for doc in DOCS if any(runnable(b, fence) for fence, b in SH_BLOCK.findall(doc.read_text()))]


@pytest.mark.parametrize("doc", _documents_with_examples(), ids=lambda p: p.name)
def test_the_examples_of_each_document_run(doc: Path, tmp_path: Path) -> None:
    work, env = _scratch(tmp_path)
    for number, (fence, block) in enumerate(SH_BLOCK.findall(doc.read_text()), start=1):
        script = runnable(block, fence)
        if script is None:
            continue
        run = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", script], cwd=work, env=env, text=True,
                             capture_output=True, timeout=600)
        assert run.returncode == 0, f"{doc.name} block {number} exit {run.returncode}:\n{script}\n{run.stderr[-2000:]}"


def test_the_convention_keeps_and_drops_what_it_says():
    block = "# a comment\ngputopo machines\ngputopo scan   # this host (not run: needs a GPU)\n"
    assert runnable(block) == "# a comment\ngputopo machines"
    assert runnable("# not run by the docs tests: needs root\nnft list ruleset\n") is None
    assert runnable("gputopo scan\n", " not-run (needs a GPU)") is None
    assert runnable("gputopo machines\n", "") == "gputopo machines"


# Paths a document names: `docs/x.md`, `gputopo/...`, `tests/...`, `benchmarks/...`, `.ci/...`, and
# relative Markdown links.
REPO_PATH = re.compile(r"`((?:docs|gputopo|tests|benchmarks|\.ci)/[\w./-]+?|Makefile|pyproject\.toml)`")
MD_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)#\s]+)")


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_a_document_names_exists(doc: Path) -> None:
    text = doc.read_text()
    missing = []
    for name in REPO_PATH.findall(text):
        name = name.rstrip(".")
        last = name.rstrip("/").rsplit("/", 1)[-1]
        if "*" in name or "<" in name or not (name.endswith("/") or "." in last or "/" not in name):
            continue  # not a repository file or folder (`gputopo/env`: a member of a `gather` archive)
        if not (REPO / name).exists():
            missing.append(name)
    for target in MD_LINK.findall(text):
        if not (doc.parent / target).exists():
            missing.append(target)
    assert not missing, f"{doc.name} names paths that do not exist: {missing}"


def test_each_training_example_has_its_own_checkpoint_folder_or_none():
    """A folder that already holds a checkpoint is refused without --resume: examples that train
    (TensorFlow, so not run above) must not share one, or the second of them fails."""
    folders: list[str] = []
    for doc in DOCS:
        for _, block in SH_BLOCK.findall(doc.read_text()):
            for line in block.splitlines():
                command = line.split("#")[0]
                if "gputopo train" not in command or "--dry-run" in command or "--launcher" in command:
                    continue
                if "--scaling" in command or "--no-checkpoint" in command:
                    continue
                found = re.search(r"--checkpoint-dir\s+(\S+)", command)
                folders.append(found.group(1) if found else "gputopo-checkpoints (the default)")
    assert len(folders) == len(set(folders)), folders


def test_the_readme_shows_readers_no_test_markers():
    """The README is read first: what marks a block for the docs tests stays in its fence's hidden
    words, never in a comment a reader sees."""
    text = (REPO / "README.md").read_text()
    for fence, block in SH_BLOCK.findall(text):
        assert not re.search(r"not run|docs tests", block), block


def test_the_readme_says_which_commands_take_which_options():
    """Each `--option` the README ties to commands (`--gpus N` / `-n N` (`recommend`, `train`, ...))
    is in those commands' --help, and every `gputopo CMD ... --option` it shows is CMD's."""
    text = (REPO / "README.md").read_text()
    claims: list[tuple[str, str]] = []
    for options, commands in re.findall(r"((?:`-[-\w]+(?: [A-Z]+)?`(?:\s/\s)?)+)\s\(((?:`[a-z0-9-]+`(?:,\s|\sor\s|\sand\s)?)+)\)", text):
        for option in re.findall(r"`(-[-\w]+)", options):
            claims += [(command, option) for command in re.findall(r"`([a-z0-9-]+)`", commands)]
    assert ("recommend", "-n") in claims and ("bench-p2p", "--devices") in claims
    for line in re.findall(r"gputopo ([a-z0-9-]+)((?: [^#\n;|>`]*)?)", text):
        command, rest = line
        claims += [(command, option) for option in re.findall(r"(?<!\S)(--?[a-zA-Z][-\w]*)", rest)]
    helps: dict[str, str] = {}
    for command, option in claims:
        if command not in helps:
            run = subprocess.run([sys.executable, "-m", "gputopo", command, "--help"], capture_output=True, text=True,
                                 timeout=120, env={**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200"}, cwd=REPO)
            assert run.returncode == 0, (command, run.stderr)
            helps[command] = run.stdout
        assert re.search(rf"(?<![-\w]){re.escape(option)}(?![-\w])", helps[command]), (command, option)
