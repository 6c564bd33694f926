"""The one confined view of a host's files (``gputopo.sources.host.tree``): paths resolved inside the
root only, through chains of links; regular files only, never a FIFO or device; reads bounded."""

from __future__ import annotations

import ast
import os
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputopo.sources.host.tree import FILE, FOLDER, MAX_LINK_HOPS, FolderTree, MemoryTree, as_tree

PACKAGE = Path(__file__).resolve().parents[4] / "gputopo"


def _chain(root: Path) -> None:
    """The attack of issue 36: each link lexically inside, together climbing out of the root."""
    os.symlink(".", root / "a")
    os.symlink("a/..", root / "b")  # lexically ".", really the parent of root
    os.symlink("b/..", root / "c")


def test_a_chain_of_links_that_climbs_out_is_never_followed_on_disk(tmp_path):
    outside = tmp_path / "secret"
    outside.write_text("SECRET\n")
    root = tmp_path / "box"
    (root / "gputopo").mkdir(parents=True)
    _chain(root)
    os.symlink("../c/secret", root / "gputopo/topo-m.txt")
    tree = FolderTree(root)
    assert tree.why_unresolved("c") == "outside" and tree.resolve("b") is None
    assert tree.read_bytes("gputopo/topo-m.txt") is None and tree.kind("gputopo/topo-m.txt") is None
    assert tree.resolve("a") == () and tree.listdir("a") == ["a", "b", "c", "gputopo"]


def test_the_same_chain_in_memory_and_in_a_folder_resolve_alike(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/x").write_text("inside")
    _chain(tmp_path)
    memory = MemoryTree("m", {"etc/x": b"inside"}, {"a": ".", "b": "a/..", "c": "b/.."})
    for tree in (FolderTree(tmp_path), memory):
        assert tree.read_bytes("a/a/a/etc/x") == b"inside"
        assert [tree.why_unresolved(p) for p in ("a", "b", "c", "c/etc/x", "nope")] == [
            None, "outside", "outside", "outside", "missing"]


def test_absolute_targets_are_followed_only_on_the_live_host(tmp_path):
    (tmp_path / "etc").mkdir()
    (tmp_path / "etc/hostname").write_text("inside\n")
    os.symlink("/etc/hostname", tmp_path / "abs")
    assert FolderTree(tmp_path).why_unresolved("abs") == "outside"
    assert MemoryTree("m", {"etc/hostname": b"x"}, {"abs": "/etc/hostname"}).why_unresolved("abs") == "outside"
    live = FolderTree("/")
    assert live.is_live_host and live.display("proc/cmdline") == "/proc/cmdline"
    if os.path.islink("/proc/self"):  # the kernel's own magic link is relative ("1234")
        assert live.is_folder("proc/self")


def test_a_loop_and_a_long_chain_stop_at_the_kernels_limit(tmp_path):
    os.symlink("loop", tmp_path / "loop")
    for k in range(MAX_LINK_HOPS + 1):
        os.symlink(f"l{k + 1}", tmp_path / f"l{k}")
    (tmp_path / f"l{MAX_LINK_HOPS + 1}").write_text("end")
    tree = FolderTree(tmp_path)
    assert tree.why_unresolved("loop") == "loop" and tree.why_unresolved("l0") == "loop"
    assert tree.read_bytes("l1") == b"end"  # 40 links: as far as the kernel goes


def test_a_fifo_a_device_and_a_folder_are_never_read_and_never_block(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    os.symlink("fifo", tmp_path / "to-fifo")
    os.symlink("/dev/zero", tmp_path / "zero")
    (tmp_path / "folder").mkdir()
    tree = FolderTree(tmp_path)
    done = threading.Event()

    def read_all() -> None:
        assert [tree.read_bytes(p) for p in ("fifo", "to-fifo", "zero", "folder")] == [None] * 4
        done.set()

    worker = threading.Thread(target=read_all, daemon=True)
    worker.start()
    worker.join(20)
    assert done.is_set(), "a read blocked on a FIFO"
    assert tree.kind("fifo") == "other" and tree.kind("folder") == FOLDER


def test_reads_are_bounded_and_text_is_decoded_as_inputs_are(tmp_path):
    (tmp_path / "big").write_bytes(b"x" * 5000)
    (tmp_path / "utf16").write_bytes("\ufeffGPU0".encode("utf-16-le"))
    (tmp_path / "binary").write_bytes(b"\x00\x01\x02")
    tree = FolderTree(tmp_path)
    assert len(tree.read_bytes("big", 100)) == 100
    assert tree.read_text("utf16") == "GPU0" and tree.read_text("binary") is None


def test_a_name_swapped_for_a_link_after_the_walk_is_not_followed(tmp_path, monkeypatch):
    """The walk checks with lstat; the open goes one name at a time with O_NOFOLLOW, so a folder
    replaced by a link between the two fails the read instead of leaving the root."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f").write_text("SECRET")
    root = tmp_path / "root"
    (root / "d").mkdir(parents=True)
    (root / "d/f").write_text("ok")
    tree = FolderTree(root)
    real_lookup = tree._lookup

    def swapping_lookup(parts):
        found = real_lookup(parts)
        if parts == ("d", "f") and (root / "d").is_dir() and not (root / "d").is_symlink():
            (root / "d/f").unlink()
            (root / "d").rmdir()
            os.symlink(outside, root / "d")  # the swap, after "d" was seen as a folder
        return found

    monkeypatch.setattr(tree, "_lookup", swapping_lookup)
    assert tree.read_bytes("d/f") is None


def test_memory_tree_folders_come_from_members_and_their_parents():
    tree = MemoryTree("box.tar.gz", {"sys/bus/x": b"1"}, {"sys/l": "bus"}, folders=["proc"])
    assert tree.listdir("") == ["proc", "sys"] and tree.listdir("sys") == ["bus", "l"]
    assert tree.kind("sys/l/x") == FILE and tree.listdir("sys/l") == ["x"] and tree.listdir("proc") == []
    assert tree.is_link("sys/l") and tree.read_link("sys/l") == "bus" and not tree.is_link("sys/bus")
    assert tree.display("sys/bus/x") == "box.tar.gz:sys/bus/x"


_names = st.sampled_from(["a", "b", "c", "..", ".", "etc", ""])


@settings(max_examples=300, deadline=None)
@given(links=st.dictionaries(st.sampled_from(["a", "b", "c", "d/e"]),
                             st.lists(_names, min_size=1, max_size=5).map("/".join), max_size=4),
       path=st.lists(_names, min_size=1, max_size=6).map("/".join))
def test_no_link_graph_resolves_a_path_out_of_the_memory_tree(links, path):
    """Whatever the links say, a resolved path is made of the tree's own names, never a ``..``,
    and reading through it gives only the tree's own bytes."""
    tree = MemoryTree("m", {"etc/x": b"inside", "d/f": b"d"}, links)
    parts = tree.resolve(path)
    if parts is not None:
        assert ".." not in parts and "." not in parts and "" not in parts
        data = tree.read_bytes(path)
        assert data in (None, b"inside", b"d")


def test_as_tree_keeps_a_tree_and_wraps_a_folder(tmp_path):
    tree = MemoryTree("m", {}, {})
    assert as_tree(tree) is tree and isinstance(as_tree(tmp_path), FolderTree)


# Every module that reads a host's files, live or gathered, reads them through a Tree. The calls
# below open, list or follow paths on their own; where one is right, the reason is given.
TREE_READERS = ["sources/host/host_health.py", "sources/host/pcie_health.py", "sources/host/sysfs.py", "sources/evidence/health.py",
                "sources/doctor_input.py", "sources/archives/gathered.py", "sources/archives/gather.py", "sources/archives/archive.py"]
PATH_CALLS = {"open", "listdir", "scandir", "readlink", "realpath", "islink", "isfile", "isdir", "exists", "lexists",
              "read_text", "read_bytes", "iterdir", "glob", "rglob", "walk"}
ALLOWED = {
    ("sources/doctor_input.py", "isdir"): "which --from path is a folder: the user's own argument",
    ("sources/doctor_input.py", "isfile"): "whether a --from path is a regular file (a pipe is read once): the user's own argument",
    ("sources/archives/archive.py", "isfile"): "is_archive: the user's own --from argument",
    ("sources/archives/archive.py", "open"): "the user's --from archive file itself (tarfile reads from memory)",
    ("sources/archives/gather.py", "open"): "tarfile.open of the archive being written, not a host file",
}


def _is_tree(node: ast.expr) -> bool:
    """A receiver that is a Tree: ``tree``, ``self.tree``, ``packer.tree``, ``as_tree(...)``."""
    if isinstance(node, ast.Name):
        return node.id == "tree"
    if isinstance(node, ast.Attribute):
        return node.attr == "tree"
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "as_tree"


def _path_calls(path: Path) -> set[str]:
    """``open(...)``, ``os.*``/``os.path.*`` calls that touch paths, and ``.read_text()``-like calls
    on anything but a Tree (a ``Path``)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id == "open":
            found.add("open")
        elif isinstance(func, ast.Attribute) and func.attr in PATH_CALLS:
            owner = func.value
            on_os = (isinstance(owner, ast.Name) and owner.id in ("os", "shutil", "tarfile")) or (
                isinstance(owner, ast.Attribute) and owner.attr == "path")
            path_method = func.attr in ("read_text", "read_bytes", "iterdir", "glob", "rglob", "open") and not _is_tree(owner)
            if on_os or path_method:
                found.add(func.attr)
    return found


@pytest.mark.parametrize("module", TREE_READERS)
def test_host_files_are_read_only_through_a_tree(module):
    unexplained = {name for name in _path_calls(PACKAGE / module) if (module, name) not in ALLOWED}
    assert not unexplained, f"{module} opens or follows paths itself ({sorted(unexplained)}): read through a Tree"


def test_the_contract_sees_a_plain_open(tmp_path):
    sample = tmp_path / "m.py"
    sample.write_text("import os\ndef f(root):\n    with open(os.path.join(root, 'x')) as f:\n        return os.listdir(root)\n"
                      "def g(tree, root):\n    return tree.read_text('x'), as_tree(root).listdir('y'), os.path.realpath(root)\n"
                      "def h(root):\n    return (Path(root) / 'x').read_text()\n")
    assert _path_calls(sample) == {"open", "listdir", "realpath", "read_text"}
