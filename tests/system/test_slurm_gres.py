"""``recommend --format gres`` read by a real Slurm (Debian's slurmctld, slurmd, munge; the loopback
harness of ``test_slurm.py``): slurmd takes every line as written, ``scontrol`` shows the GRES, and a
job with ``--gres-flags=enforce-binding`` gets the CPUs the file binds its GPUs to.

The GPUs are fake: character devices made with mknod (major 195, NVIDIA's) in the test's folder, not
in /dev (other processes on the machine must not see GPUs that are not there), so the file's
``File=/dev/nvidiaN`` is moved there, the one change made to it. The node is the DGX-1 reference
machine with GPUs 0-3 near CPU 0 and 4-7 near CPU 1 (two one-core sockets: the test node's 2 CPUs).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from system.test_slurm import (  # a sibling test module (tests/ is on sys.path)
    NODE,
    SlurmCluster,
    _free_port_pair,
    _private_network,
    _slurm_conf,
    _tear_down,
    _wait_for,
    _which,
    cluster_root,
    start_munged_and_slurmctld,
)

TYPE = "tesla_v100-sxm2-16gb"


def _gputopo(*args: str) -> str:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(_repo()), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "gputopo", *args], env=env, capture_output=True, text=True,
                          check=True, timeout=120).stdout


def _repo() -> Path:
    return Path(__file__).resolve().parents[2]


def _gres_conf(root) -> str:
    """gputopo's gres.conf for the node, its device files moved into ``root/dev``."""
    snapshot = json.loads(_gputopo("scan", "--machine", "dgx1", "--host", NODE, "--json"))
    for gpu in snapshot["gpus"]:
        gpu["cpu_affinity"] = "0" if gpu["index"] < 4 else "1"
    path = root / "node.json"
    path.write_text(json.dumps(snapshot), encoding="utf-8")
    (root / "dev").mkdir()
    for minor in range(8):
        os.mknod(root / "dev" / f"nvidia{minor}", 0o600 | 0o020000, os.makedev(195, minor))
    return _gputopo("recommend", "--from", str(path), "--format", "gres").replace("/dev/nvidia", f"{root}/dev/nvidia")


@pytest.fixture(scope="module")
def gres_cluster(tmp_path_factory):
    root, key, munge_socket = cluster_root(tmp_path_factory, "slurm-gres")
    gres = _gres_conf(root)
    (root / "gres.conf").write_text(gres, encoding="utf-8")
    conf_text = _slurm_conf(root, munge_socket, _free_port_pair(), _free_port_pair())
    node_line = next(line for line in conf_text.splitlines() if line.startswith("NodeName="))
    conf_text = conf_text.replace(node_line, f"{node_line.replace('CPUs=2', 'CPUs=2 Sockets=2 CoresPerSocket=1 ThreadsPerCore=1')}"
                                             f" Gres=gpu:{TYPE}:8")
    conf = root / "slurm.conf"
    conf.write_text("GresTypes=gpu\n" + conf_text, encoding="utf-8")
    cluster = SlurmCluster(root=root, conf=conf, holder=_private_network())
    try:
        start_munged_and_slurmctld(cluster, key, munge_socket)
        cluster.start("slurmd", [_which("slurmd"), "-D", "-f", str(conf), "-N", NODE])
        _wait_for(f"node {NODE} idle in sinfo",
                  lambda: cluster.run("sinfo", "-h", "-N", "-o", "%t").stdout.strip() == "idle", cluster)  # fmt: skip
        cluster.gres = gres  # type: ignore[attr-defined]
        yield cluster
    finally:
        _tear_down(cluster)


def _written(cluster: SlurmCluster) -> list[str]:
    return [line for line in cluster.gres.splitlines() if line.startswith("NodeName=")]  # type: ignore[attr-defined]


def test_slurmd_reads_every_line_as_written(gres_cluster):
    result = gres_cluster.run(_which("slurmd"), "-G", "-f", str(gres_cluster.conf), "-N", NODE)
    read = [line.split(": ", 1)[1] for line in (result.stdout + result.stderr).splitlines() if ": Gres Name=gpu" in line]
    assert len(read) == 8, result.stdout + result.stderr
    for index, (line, seen) in enumerate(zip(_written(gres_cluster), read)):
        fields = dict(word.split("=", 1) for word in line.split()[1:])
        seen_fields = dict(word.split("=", 1) for word in seen.split()[1:])
        assert seen_fields["Index"] == str(index)
        for key in ("Type", "File", "Cores", "Links"):
            assert seen_fields[key] == fields[key], (key, line, seen)
    assert [line.split("Links=")[1] for line in read][0] == "-1,1,1,2,2,0,0,0"  # the DGX-1's NV1/NV2 counts


def test_scontrol_shows_the_gres_as_written(gres_cluster):
    text = gres_cluster.run("scontrol", "show", "node", NODE).stdout
    # (S:...) is the sockets of the GPUs' cores as slurmd finds them on this machine's real CPUs.
    assert re.search(rf"Gres=gpu:{re.escape(TYPE)}:8(\(S:[0-9,-]+\))?\s", text), text
    assert "State=IDLE" in text, text  # not drained: the file and slurm.conf agree


def _running(cluster: SlurmCluster, job: str) -> str:
    deadline_s = time.monotonic() + 30
    detail = ""
    while time.monotonic() < deadline_s:
        detail = cluster.run("scontrol", "show", "job", "-d", job).stdout
        if "CPU_IDs=" in detail and "JobState=RUNNING" in detail:
            break
        time.sleep(0.5)
    return detail


def test_enforce_binding_gives_each_job_the_cpu_of_its_gpus(gres_cluster, tmp_path):
    cores_of = {int(line.split("File=")[1].split()[0].rsplit("nvidia", 1)[1]): line.split("Cores=")[1].split()[0]
                for line in _written(gres_cluster)}
    assert set(cores_of.values()) == {"0", "1"}
    jobs = []
    try:
        for _ in range(2):  # the second job gets the other four GPUs, and so the other CPU
            submitted = gres_cluster.run("sbatch", "--parsable", "-n1", "-c1", f"--gres=gpu:{TYPE}:4",
                                         "--gres-flags=enforce-binding", f"--chdir={tmp_path}", "--wrap", "sleep 60")
            assert submitted.returncode == 0, submitted.stderr + gres_cluster.logs()
            jobs.append(submitted.stdout.strip().split(";")[0])
        seen = set()
        for job in jobs:
            detail = _running(gres_cluster, job)
            match = re.search(r"CPU_IDs=(\d+) .*GRES=gpu:[^(]*\(IDX:(\d+)-(\d+)\)", detail)
            assert match, detail
            cpu, first, last = (int(x) for x in match.groups())
            assert last - first == 3 and {cores_of[g] for g in range(first, last + 1)} == {str(cpu)}, detail
            seen.add((cpu, first))
        assert seen == {(0, 0), (1, 4)}
    finally:
        for job in jobs:
            gres_cluster.run("scancel", job)


def test_doctor_finds_slurms_view_and_the_wiring_agree_then_names_a_dropped_gpu(gres_cluster, tmp_path):
    result = gres_cluster.run(_which("slurmd"), "-G", "-f", str(gres_cluster.conf), "-N", NODE)
    said = result.stdout + result.stderr
    (tmp_path / "slurmd-G.txt").write_text(said, encoding="utf-8")
    snapshot = str(gres_cluster.root / "node.json")
    report = json.loads(_gputopo("doctor", "--from", str(tmp_path / "slurmd-G.txt"), "--from", snapshot, "--json"))
    assert not [f for f in report["findings"] if f["code"].startswith("slurm-")], report["findings"]
    assert any("Slurm" in c["name"] and c["status"] == "ok" for c in report["checks"])
    cut = "\n".join(line for line in said.splitlines() if "Index=5 " not in line)
    (tmp_path / "slurmd-G-cut.txt").write_text(cut, encoding="utf-8")
    report = json.loads(_gputopo("doctor", "--from", str(tmp_path / "slurmd-G-cut.txt"), "--from", snapshot, "--json"))
    missing = [f for f in report["findings"] if f["code"] == "slurm-gpu-missing"]
    assert len(missing) == 1 and missing[0]["gpus"] == [5], report["findings"]
