"""`gputopo gather` packs a host's files safely; `doctor --from` reads archives and refuses hostile
ones in one line with nothing written outside its private folder."""

from __future__ import annotations

import io
import os
import sys
import tarfile
import time
from pathlib import Path

import pytest
from conftest import assert_one_error_line, assert_process_ends
from doctor_trees import real_acs_controls, two_gpus_under_root_ports

from gputopo.errors import InputError
from gputopo.sources.archives import archive
from gputopo.sources.archives.archive import GATHER_MARK, opened_archive
from gputopo.sources.archives.gather import gather, run_bounded
from gputopo.sources.host.pcie_health import acs_from_config, gpu_pcie_path, resolve_inside


def _tar(path, members, marked=True):
    """members: (name, kind, payload) with kind file/dir/sym/hard/fifo/chr; ``marked`` adds the
    mark every ``gputopo gather`` archive starts with."""
    with tarfile.open(path, "w:gz") as tar:
        for name, kind, payload in [*([(GATHER_MARK, "file", "gputopo test gather\n")] if marked else []), *members]:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = payload if isinstance(payload, bytes) else str(payload).encode()
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
                continue
            info.type = {"dir": tarfile.DIRTYPE, "sym": tarfile.SYMTYPE, "hard": tarfile.LNKTYPE,
                         "fifo": tarfile.FIFOTYPE, "chr": tarfile.CHRTYPE}[kind]
            if kind in ("sym", "hard"):
                info.linkname = payload
            tar.addfile(info)
    return str(path)


@pytest.mark.parametrize(("members", "why"), [
    ([("../evil", "file", "x")], "'..'"),
    ([("/etc/evil", "file", "x")], "absolute"),
    ([("sys/link", "sym", "/etc/passwd")], "pointing out"),
    ([("sys/link", "sym", "../../etc")], "pointing out"),
    ([("sys/link", "sym", "."), ("sys/link/x", "file", "y")], "below a link"),
    ([("sys/x", "file", "a"), ("sys/x", "file", "b")], "twice"),
    ([("dev/sda", "chr", None)], "special file"),
    ([("fifo", "fifo", None)], "special file"),
    ([("proc/cmdline", "hard", "/etc/shadow")], "special file"),
])
def test_hostile_archives_are_refused_in_one_line_and_nothing_is_written(tmp_path, members, why):
    path = _tar(tmp_path / "box.tar.gz", members)
    before = set(os.listdir(tmp_path))
    with pytest.raises(InputError) as info:
        opened_archive(path)
    message = str(info.value)
    assert "\n" not in message and "refused" in message and why in message
    assert set(os.listdir(tmp_path)) == before
    assert not os.path.exists("/etc/evil") and not (tmp_path.parent / "evil").exists()


def test_a_huge_file_and_a_tar_bomb_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MAX_FILE_BYTES", 1000)
    path = _tar(tmp_path / "big.tar.gz", [("proc/cmdline", "file", b"x" * 1001)])
    with pytest.raises(InputError, match="1001 bytes"):
        opened_archive(path)
    monkeypatch.setattr(archive, "MAX_MEMBERS", 50)
    bomb = _tar(tmp_path / "bomb.tar.gz", [(f"f{n}", "file", "") for n in range(60)])
    with pytest.raises(InputError, match="tar bomb"):
        opened_archive(bomb)
    monkeypatch.setattr(archive, "MAX_TOTAL_BYTES", 2500)
    many = _tar(tmp_path / "many.tar.gz", [(f"f{n}", "file", b"y" * 900) for n in range(3)])
    with pytest.raises(InputError, match="tar bomb"):
        opened_archive(many)


def test_links_resolve_inside_the_root_only(tmp_path):
    (tmp_path / "sys/bus/pci/devices").mkdir(parents=True)
    os.symlink("/etc", tmp_path / "sys/bus/pci/devices/0000:01:00.0")  # absolute: never followed in a given tree
    assert resolve_inside(tmp_path, "sys/bus/pci/devices/0000:01:00.0") is None
    (tmp_path / "etc").mkdir()
    assert resolve_inside(tmp_path, "sys/bus/pci/devices/0000:01:00.0") is None  # not even to <root>/etc
    os.symlink("../../../../etc", tmp_path / "sys/bus/pci/devices/0000:03:00.0")
    assert resolve_inside(tmp_path, "sys/bus/pci/devices/0000:03:00.0") == "etc"  # relative, inside: followed
    os.symlink("../../../../../../../../..", tmp_path / "sys/bus/pci/devices/0000:02:00.0")
    assert resolve_inside(tmp_path, "sys/bus/pci/devices/0000:02:00.0") is None  # above the root: never followed
    os.symlink("loop", tmp_path / "sys/loop")
    assert resolve_inside(tmp_path, "sys/loop") is None
    assert gpu_pcie_path("0000:01:00.0", tmp_path) is None


def test_acs_from_config_reads_the_chain_and_says_not_root():
    from doctor_trees import config_bytes

    assert acs_from_config(config_bytes(0x1D)).control == 0x1D
    assert acs_from_config(config_bytes(0x1D, root_readable=False)).status == "not-root"
    assert acs_from_config(config_bytes(None)).status == "absent"
    looping = bytearray(config_bytes(None))
    looping[0x100:0x104] = (0x0001 | 1 << 16 | 0x100 << 20).to_bytes(4, "little")  # points at itself
    assert acs_from_config(bytes(looping)).status == "absent"


def test_gather_then_doctor_from_the_archive_round_trip(tmp_path, cli):
    host_root = tmp_path / "host"
    two_gpus_under_root_ports(host_root, real_acs_controls()["on"])
    (host_root / "proc").mkdir(exist_ok=True)
    (host_root / "proc/cmdline").write_text("BOOT_IMAGE=/vmlinuz ro quiet nfsroot=10.0.0.1:/x,token=s3cret iommu=pt\n")
    (host_root / "proc/self").mkdir()  # as on Linux: /proc/mounts is a link to self/mounts
    (host_root / "proc/self/mounts").write_text("/dev/sda1 / ext4 rw 0 0\nshm /dev/shm tmpfs rw,size=65536k 0 0\n")
    os.symlink("self/mounts", host_root / "proc/mounts")
    (host_root / "secret.txt").write_text("do not pack")
    os.symlink("/etc/passwd", host_root / "sys/bus/pci/devices/0000:99:00.0")  # a link out: left out
    out = tmp_path / "box.tar.gz"
    buffer = io.BytesIO()
    packer = gather(buffer, root=str(host_root), env={"NCCL_P2P_DISABLE": "1", "AWS_SECRET_ACCESS_KEY": "k"}, smi=None)
    out.write_bytes(buffer.getvalue())
    assert any("0000:99:00.0" in s for s in packer.skipped)
    with tarfile.open(out) as tar:
        names = tar.getnames()
        env = tar.extractfile("gputopo/env").read().decode()
        mounts = tar.extractfile("proc/mounts").read().decode()
        cmdline = tar.extractfile("proc/cmdline").read().decode()
        marked = "gputopo/gathered-by" in names
    assert "secret.txt" not in names and "AWS_SECRET" not in env and "NCCL_P2P_DISABLE=1" in env
    assert mounts == "shm /dev/shm tmpfs rw,size=65536k 0 0\n" and marked  # the file, not the link
    assert cmdline == "iommu=pt gputopo.left_out=4\n"  # boot options doctor reads, nothing else
    result = cli("doctor", "--from", str(out), "--json")
    assert result.exit_code == 0, result.output
    import json

    report = json.loads(result.output)
    codes = [f["code"] for f in report["findings"]]
    assert report["schema"] == "gputopo.doctor/1" and report["source"] == "box.tar.gz"
    assert codes.count("acs-redirect") == 2 and "env-nccl-p2p-disable" in codes and "shm-too-small" in codes
    assert report["pairs"] == [{"a": "0000:41:00.0", "b": "0000:61:00.0", "problems": ["acs", "p2p-disabled"]}]
    assert cli("doctor", "--from", str(out), "--fail-on", "error").exit_code == 1


@pytest.mark.skipif(sys.platform != "linux", reason="process groups")
def test_a_hanging_command_is_killed_with_its_children(tmp_path):
    marker = tmp_path / "child.pid"
    script = f"sleep 60 & echo $! > {marker}; wait"
    started = time.monotonic()
    assert run_bounded(["sh", "-c", script], timeout_s=1.0) is None
    assert time.monotonic() - started < 30
    child = int(marker.read_text())
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the grandchild survived its parent's timeout")


@pytest.mark.skipif(sys.platform != "linux", reason="process groups")
def test_sigterm_during_gather_stops_nvidia_smi_and_its_children_and_writes_nothing(tmp_path):
    """Review finding: `gather` stopped with SIGTERM left a hanging nvidia-smi and its children running."""
    import signal
    import subprocess

    marker = tmp_path / "grandchild.pid"
    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(f"#!/bin/sh\nsleep 120 &\necho $! > {marker}\nwait\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{fake.parent}:{os.environ['PATH']}"}
    out = tmp_path / "box.tar.gz"
    proc = subprocess.Popen([sys.executable, "-m", "gputopo", "gather", "-o", str(out)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(300):  # until the fake nvidia-smi has started its child
        if marker.exists() and marker.read_text().strip():
            break
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail("the fake nvidia-smi never started")
    grandchild = int(marker.read_text())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.count("\n") == 1 and "terminated (SIGTERM)" in err, err
    assert not out.exists()
    assert_process_ends(grandchild, 5, "nvidia-smi's child outlived gather")


def test_scan_reads_the_topology_a_gather_archive_holds(tmp_path, cli):
    """The nvidia-smi output packed by gather (here a real `topo -m` capture standing in for the
    command's output) is read through the registry; the host files add the NUMA distances."""
    import json

    capture_text = (Path(__file__).resolve().parents[3] / "fixtures/shared/topo/dgx1_v100_8gpu_mlx5.txt").read_bytes()
    path = _tar(tmp_path / "box.tar.gz", [
        ("gputopo/nvidia-smi/topo-m.txt", "file", capture_text),
        ("sys/devices/system/node/online", "file", "0-1\n"),
        ("sys/devices/system/node/node0/distance", "file", "10 21\n"),
        ("sys/devices/system/node/node1/distance", "file", "21 10\n"),
    ])
    result = cli("scan", "--from", path, "--json")
    assert result.exit_code == 0, result.output
    topo = json.loads(result.output)
    assert len(topo["gpus"]) == 8 and topo["numa_distances"] == {"0": {"0": 10, "1": 21}, "1": {"0": 21, "1": 10}}
    empty = _tar(tmp_path / "empty.tar.gz", [("proc/cmdline", "file", "ro\n")])
    line = cli("scan", "--from", empty)
    assert line.exit_code == 2 and "holds no `nvidia-smi topo -m` output" in line.output


def test_gather_never_reads_through_a_link_out_of_the_tree(tmp_path):
    outside = tmp_path / "outside"
    (outside / "proc").mkdir(parents=True)
    (outside / "proc/cmdline").write_text("SECRET_OUTSIDE\n")
    (outside / "dev").mkdir()
    (outside / "dev/nvidia7").write_text("")
    root = tmp_path / "root"
    root.mkdir()
    os.symlink(outside / "proc", root / "proc")  # a folder link pointing out
    os.symlink("../outside/dev", root / "dev")
    buffer = io.BytesIO()
    packer = gather(buffer, root=str(root), env={}, smi=None)
    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as tar:
        names = tar.getnames()
        data = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isreg())
    assert b"SECRET_OUTSIDE" not in data and "dev/nvidia7" not in names
    assert any("proc/cmdline" in s for s in packer.skipped)


def test_a_tar_that_is_not_a_gather_archive_is_refused_not_read_as_a_healthy_host(tmp_path, cli):
    """Review finding: any tar read as a host whose every check passed, its files simply missing."""
    path = _tar(tmp_path / "other.tar.gz", [("proc/cmdline", "file", "ro\n")], marked=False)
    for command in ("doctor", "scan"):
        line = assert_one_error_line(cli(command, "--from", path))
        assert "is not a `gputopo gather` archive" in line


@pytest.mark.parametrize("damage", ["cut", "gzip of text"])
def test_a_damaged_archive_is_one_line_and_exit_2(tmp_path, cli, damage):
    """Review finding: a cut .tar.gz exited 1 ('aborted'), which a Slurm prolog reads as a bad node."""
    import gzip

    if damage == "cut":
        data = Path(_tar(tmp_path / "ok.tar.gz", [("proc/cmdline", "file", "ro\n" * 500)])).read_bytes()
        payload = data[:89]
    else:
        payload = gzip.compress(b"hello\n")
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(payload)
    for command in ("doctor", "scan"):
        assert "cannot read the archive" in assert_one_error_line(cli(command, "--from", str(bad)))


def test_an_archive_is_read_in_memory_and_a_truncated_archive_is_one_line(tmp_path, monkeypatch):
    """Nothing is unpacked to disk (no temporary folder to leave behind on SIGTERM)."""
    import tempfile

    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    path = _tar(tmp_path / "ok.tar.gz", [("proc/cmdline", "file", "ro\n"), ("sys", "dir", None)])
    tree = opened_archive(path)
    assert tree.read_text("proc/cmdline") == "ro\n" and tree.is_folder("sys") and tree.listdir("proc") == ["cmdline"]
    assert list(scratch.iterdir()) == []
    data = Path(path).read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError) as info:
        opened_archive(str(cut))
    assert "\n" not in str(info.value)


def test_a_gathered_topo_m_becomes_doctors_topology_and_its_p2p_words_are_judged(tmp_path):
    """The archive's real DGX-1 `topo -m` is read into the evidence's topology (it has no `-p2p`
    matrix, so no P2P words); the P2P check on such a topology is shown with a reference machine
    whose pairs across sockets are TNS (no real capture here holds both matrices of one host)."""
    from gputopo.analysis.causes.doctor import doctor
    from gputopo.sources.doctor_input import evidence_from_files
    from gputopo.sources.evidence.health import HealthEvidence
    from gputopo.sources.reference import load_reference

    text = (Path(__file__).resolve().parents[3] / "fixtures/shared/topo/dgx1_v100_8gpu_mlx5.txt").read_bytes()
    path = _tar(tmp_path / "box.tar.gz", [("gputopo/nvidia-smi/topo-m.txt", "file", text)])
    with evidence_from_files([path]) as evidence:
        assert evidence.topology is not None and len(evidence.topology.gpus) == 8
        report = doctor(evidence)
    assert not [c for c in report.checks if c.name == "p2p-status"]
    report = doctor(HealthEvidence(source="x", root=str(tmp_path / "empty"), topology=load_reference("pcie-8gpu")))
    tns = next(f for f in report.findings if f.code == "p2p-status-tns")
    assert tns.severity == "info" and "topo -p2p r (gathered)" in tns.evidence[0] and 0 in tns.gpus


def test_an_archive_is_what_tarfile_takes_for_one_in_every_format(tmp_path):
    """is_archive tries a plain tar and an xz opener (which also takes a bare lzma stream) after the
    compression magic: the same answers as tarfile.is_tarfile, without its four opens per file."""
    import lzma
    import tarfile

    from gputopo.sources.archives.archive import is_archive

    member = tmp_path / "a.txt"
    member.write_text("x")
    for mode, name in (("w", "p.tar"), ("w:gz", "g.tgz"), ("w:bz2", "b.tbz"), ("w:xz", "x.txz")):
        with tarfile.open(tmp_path / name, mode) as archive:
            archive.add(member, "a.txt")
    (tmp_path / "alone.lzma").write_bytes(lzma.compress((tmp_path / "p.tar").read_bytes(), format=lzma.FORMAT_ALONE))
    (tmp_path / "snapshot.json").write_text('{"schema": "gputopo.topology/1"}')
    (tmp_path / "cut.tgz").write_bytes((tmp_path / "g.tgz").read_bytes()[:12])
    (tmp_path / "empty").write_bytes(b"")
    for path in sorted(tmp_path.iterdir()):
        expected = path.name == "cut.tgz" or tarfile.is_tarfile(path)  # a cut gzip: read, and refused as damaged
        assert is_archive(str(path)) == expected, path.name


def test_an_nvidia_smi_that_times_out_or_fails_is_named_in_the_archive_and_by_doctor(tmp_path, cli, monkeypatch):
    """Review note: gather dropped a timed-out nvidia-smi output silently; doctor then said nothing."""
    from gputopo.sources.archives import gather as gather_module

    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\ncase \"$1\" in topo) exec sleep 30;; nvlink) exit 9;; esac\necho '==== NVSMI LOG ===='\n")
    smi.chmod(0o755)
    monkeypatch.setattr(gather_module, "SMI_TIMEOUT_S", 0.5)
    buffer = io.BytesIO()
    gather(buffer, root=str(tmp_path / "empty"), env={}, smi=str(smi))
    out = tmp_path / "box.tar.gz"
    out.write_bytes(buffer.getvalue())
    with tarfile.open(out) as tar:
        failures = tar.extractfile("gputopo/smi-failures").read().decode()
    assert "topo-m: `nvidia-smi topo -m` timed out after 0.5 s" in failures
    assert "nvlink-s: `nvidia-smi nvlink -s` exited with status 9" in failures
    result = cli("doctor", "--from", str(out), "--json")
    import json

    checks = {c["name"]: c for c in json.loads(result.output)["checks"]}
    assert checks["read the other outputs in box.tar.gz:gputopo/nvidia-smi/topo-m.txt"]["status"] == "not-made"
    assert "timed out" in checks["read the other outputs in box.tar.gz:gputopo/nvidia-smi/topo-m.txt"]["detail"]


def test_a_variable_whose_value_breaks_the_line_is_left_out_of_the_env_file(tmp_path):
    # `NCCL_X="1<newline>NCCL_P2P_DISABLE=1"` would add a setting line doctor reads from the archive.
    buffer = io.BytesIO()
    gather(buffer, root=str(tmp_path), env={"NCCL_X": "1\nNCCL_P2P_DISABLE=1", "NCCL_Y": "a\rb", "NCCL_DEBUG": "INFO"},
           smi=None)
    with tarfile.open(fileobj=io.BytesIO(buffer.getvalue())) as tar:
        env = tar.extractfile("gputopo/env").read().decode()
    assert env == "NCCL_DEBUG=INFO\n"
