"""Issue 36's attacks on gathered evidence, each built here: a chain of links that climbs out of an
archive, a folder with links out and a FIFO, header bombs in the tar itself. Each ends in one line
(exit 2) or a report that shows nothing from outside, never a hang, a traceback or a secret."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import tarfile
import zlib
from pathlib import Path

import pytest
from conftest import assert_one_error_line

from gputopo.errors import InputError
from gputopo.sources.archives import archive
from gputopo.sources.archives.archive import GATHER_MARK, is_archive, opened_archive

REPO = Path(__file__).resolve().parents[4]
SECRET = "SECRET-6f1d2c-NOT-FOR-PRINTING"


def _archive(path: Path, links: dict[str, str], files: dict[str, str] | None = None) -> str:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in {GATHER_MARK: "gputopo test gather\n", **(files or {})}.items():
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tar.addfile(info, io.BytesIO(text.encode()))
        for name, target in links.items():
            info = tarfile.TarInfo(name)
            info.type, info.linkname = tarfile.SYMTYPE, target
            tar.addfile(info)
    return str(path)


@pytest.fixture
def secret_file(tmp_path) -> Path:
    secret = tmp_path / "secret.txt"
    secret.write_text(f"{SECRET}\n" * 40)
    return secret


def _chain_to(secret: Path) -> dict[str, str]:
    """``a -> .``, ``b -> a/..`` (lexically ``.``, really the parent), ``c -> b/..`` (``/`` once
    unpacked in ``/tmp/x``), and the outputs doctor and scan read pointing through ``c`` at the
    secret: every target lexically inside the archive."""
    return {"a": ".", "b": "a/..", "c": "b/..",
            "gputopo/nvidia-smi/topo-m.txt": f"../../c{secret}",
            "sys/class/dmi/id/sys_vendor": f"../../../../c{secret}",
            "proc/cmdline": f"../c{secret}"}


def test_a_chain_of_links_out_of_an_archive_is_refused_by_scan_and_doctor(tmp_path, cli, secret_file):
    path = _archive(tmp_path / "box.tar.gz", _chain_to(secret_file))
    for command in ("scan", "doctor"):
        result = cli(command, "--from", path)
        line = assert_one_error_line(result)
        assert "leads out of the archive" in line and SECRET not in result.output


def test_a_link_that_only_looks_inside_is_judged_by_where_it_leads(tmp_path):
    """Each link's text stays inside; only following b through a shows it climbing out."""
    path = _archive(tmp_path / "box.tar.gz", {"a": ".", "b": "a/.."})
    with pytest.raises(InputError, match="'b' is a link that leads out of the archive"):
        opened_archive(path)


def _hostile_folder(tmp_path: Path, secret: Path) -> Path:
    box = tmp_path / "box"
    for folder in ("gputopo/nvidia-smi", "proc", "sys/class/dmi/id", "sys/kernel/iommu_groups/0", "sys/bus/pci/devices"):
        (box / folder).mkdir(parents=True)
    (box / GATHER_MARK).write_text("gputopo test gather\n")
    os.symlink(secret, box / "proc/cmdline")  # absolute, out
    os.symlink(os.path.relpath(secret, box / "sys/class/dmi/id"), box / "sys/class/dmi/id/sys_vendor")  # relative, out
    for name, target in _chain_to(secret).items():
        if not (box / name).exists() and not (box / name).is_symlink():
            os.symlink(target, box / name)
    os.mkfifo(box / "gputopo/nvidia-smi/nvlink-s.txt")  # blocks any plain open() for ever
    os.mkfifo(box / "fifo")
    os.symlink("../fifo", box / "proc/modules")  # a link chain to a FIFO
    os.symlink("../../../../fifo", box / "sys/kernel/iommu_groups/0/type")
    return box


def test_doctor_from_a_hostile_folder_reads_nothing_outside_and_never_blocks(tmp_path, secret_file):
    """Run as the user would (a process, with a bound: a hang is a failure, not a stuck suite)."""
    box = _hostile_folder(tmp_path, secret_file)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for command in (["doctor", "--from", str(box)], ["doctor", "--from", str(box), "--json"]):
        done = subprocess.run([sys.executable, "-m", "gputopo", *command], capture_output=True, text=True,
                              timeout=120, env=env, stdin=subprocess.DEVNULL)
        assert SECRET not in done.stdout + done.stderr
        assert "Traceback" not in done.stderr and done.returncode in (0, 1), done.stderr
        assert "nvlink-s.txt" in done.stdout  # the FIFO output named as unread, not silently dropped


def _long_header(kind: bytes, size: int) -> bytes:
    info = tarfile.TarInfo("././@LongLink")
    info.type, info.size = kind, size
    return info.tobuf(format=tarfile.GNU_FORMAT)[: tarfile.BLOCKSIZE]


def _gzip_with_header(path: Path, kind: bytes, payload_bytes: int) -> str:
    """A gather mark, then a header of ``kind`` whose payload is ``payload_bytes`` of ``a``: a few
    kilobytes of gzip however large the payload."""
    mark = io.BytesIO()
    with tarfile.open(fileobj=mark, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo(GATHER_MARK)
        info.size = 5
        tar.addfile(info, io.BytesIO(b"mark\n"))
    body = mark.getvalue()
    body = body[: body.rfind(b"mark\n") + tarfile.BLOCKSIZE - (body.rfind(b"mark\n") % tarfile.BLOCKSIZE)]
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    with open(path, "wb") as out:
        out.write(squeeze.compress(body + _long_header(kind, payload_bytes)))
        chunk = b"a" * (1 << 20)
        left = payload_bytes
        while left > 0:
            out.write(squeeze.compress(chunk[: min(left, len(chunk))]))
            left -= len(chunk)
        out.write(squeeze.compress(b"\0" * (-payload_bytes % tarfile.BLOCKSIZE) + b"\0" * 1024))
        out.write(squeeze.flush())
    return str(path)


@pytest.mark.parametrize("kind", [tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE])
def test_a_long_name_or_pax_header_is_refused_before_it_is_read(tmp_path, kind):
    path = _gzip_with_header(tmp_path / "bomb.tar.gz", kind, 8 << 20)
    with pytest.raises(InputError, match="a header of more than") as info:
        opened_archive(path)
    assert "\n" not in str(info.value)


def test_a_stream_that_decompresses_past_the_bound_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(archive, "MAX_STREAM_BYTES", 4 << 20)
    path = _gzip_with_header(tmp_path / "bomb.tar.gz", tarfile.GNUTYPE_LONGNAME, 6 << 20)
    with pytest.raises(InputError, match="once decompressed"):
        opened_archive(path)


def test_a_gigabyte_long_name_header_under_a_memory_limit_is_one_line(tmp_path):
    """The review's tar bomb: a small .tar.gz whose GNU long-name header is a gigabyte. Under an
    address-space limit far below that, scan and doctor answer in one line (tarfile alone would
    try to read the whole header into memory)."""
    path = _gzip_with_header(tmp_path / "bomb.tar.gz", tarfile.GNUTYPE_LONGNAME, 1 << 30)
    assert os.path.getsize(path) < 8 << 20
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (768 << 20, 768 << 20)); "
    for command in ("scan", "doctor"):
        code = f"{limit}import sys; sys.argv = ['gputopo', '{command}', '--from', {path!r}]; from gputopo.cli import main; main()"
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2 and len(lines) == 1 and "tar bomb" in lines[0], done.stderr[-2000:]


def test_a_plain_tar_with_a_huge_first_header_is_recognised_without_reading_it(tmp_path):
    plain = tmp_path / "bomb.tar"
    with open(plain, "wb") as out:
        out.write(_long_header(tarfile.GNUTYPE_LONGNAME, 50 << 20))
        out.truncate(50 << 20)  # sparse on disk: is_archive looks at the first block only
    assert is_archive(str(plain))
    with pytest.raises(InputError, match="a header of more than"):
        opened_archive(str(plain))


def test_names_and_link_targets_longer_than_path_max_are_refused(tmp_path):
    path = _archive(tmp_path / "long.tar.gz", {}, {"x/" * 2100 + "f": "1"})
    with pytest.raises(InputError, match="a name of more than 4096 bytes"):
        opened_archive(path)
    path = _archive(tmp_path / "longlink.tar.gz", {"l": "a/" * 2100})
    with pytest.raises(InputError, match="a link of more than 4096 bytes"):
        opened_archive(path)


def _sparse_header(name: str, extended: bool) -> bytes:
    """A GNU sparse (``S``) header, its isextended byte (offset 482) set, the checksum made again."""
    info = tarfile.TarInfo(name)
    info.type, info.size = tarfile.GNUTYPE_SPARSE, 0
    block = bytearray(info.tobuf(format=tarfile.GNU_FORMAT)[: tarfile.BLOCKSIZE])
    block[482] = 1 if extended else 0
    block[148:156] = b"        "
    block[148:156] = b"%06o\0 " % sum(block)
    return bytes(block)


def _marked() -> bytes:
    mark = tarfile.TarInfo(GATHER_MARK)
    mark.size = 2
    return mark.tobuf(format=tarfile.GNU_FORMAT) + b"x\n" + b"\0" * 510


@pytest.mark.parametrize("extension_blocks", [None, 2000])
def test_a_sparse_member_is_refused_before_tarfile_reads_its_extensions(tmp_path, extension_blocks):
    """Review: a cut sparse header ended in an IndexError traceback (exit 1); 180,000 extension blocks
    (321 KB of gzip) took 380 MB before the refusal. Now refused at its header."""
    import gzip

    body = _marked() + _sparse_header("s", True)
    if extension_blocks:
        block = bytearray(512)
        block[504] = 1  # every block says another follows
        body += bytes(block) * extension_blocks + b"\0" * 1024
    path = tmp_path / "sparse.tar.gz"
    path.write_bytes(gzip.compress(body))
    with pytest.raises(InputError, match="a sparse member"):
        opened_archive(str(path))


def test_links_that_walk_each_other_too_long_are_refused_in_bounded_work(tmp_path):
    """Review: 38 links whose 4 KB targets of `d/..` lead to the next, and thousands of links to the
    first: each walk stayed under 40 hops but visited ~60,000 names (10 minutes for 49,000 links).
    A walk visits at most MAX_WALK_NAMES names, and the archive's check a budget in all."""
    from gputopo.sources.host.tree import MAX_WALK_NAMES

    climb = "/".join(["d/.."] * 800)
    links = {f"k{i}": f"{climb}/k{i + 1}" for i in range(38)}
    links["k38"] = f"{climb}/d"
    links.update({f"l{i}": "k0" for i in range(300)})
    path = _archive(tmp_path / "walk.tar.gz", links, {"d/f": "x"})
    with pytest.raises(InputError, match="loops|too deeply"):
        opened_archive(path)
    assert 800 * 2 * 3 > MAX_WALK_NAMES  # (three such hops already pass the bound)


def test_a_pcie_path_deeper_than_any_machine_places_no_gpu(tmp_path):
    """Review: 290 bridges above each of 200 GPUs cost 83 s (every level read again from the root)."""
    from gputopo.sources.host.pcie_health import MAX_PCI_DEPTH, gpu_pcie_path

    def bdf(n: int) -> str:
        return f"0000:{n % 256:02x}:{n // 256:02x}.0"

    deep = tmp_path / "sys/devices/pci0000:00"
    for n in range(MAX_PCI_DEPTH + 2):
        deep = deep / bdf(n)
    deep.mkdir(parents=True)
    devices = tmp_path / "sys/bus/pci/devices"
    devices.mkdir(parents=True)
    last = bdf(MAX_PCI_DEPTH + 1)
    os.symlink(os.path.relpath(deep, devices), devices / last)
    assert gpu_pcie_path(last, tmp_path) is None
    shallow = tmp_path / "sys/devices/pci0000:00" / bdf(300)
    shallow.mkdir()
    os.symlink(os.path.relpath(shallow, devices), devices / bdf(300))
    assert gpu_pcie_path(bdf(300), tmp_path) is not None
