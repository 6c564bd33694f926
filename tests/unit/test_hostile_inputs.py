"""Hostile and unlucky inputs: each is one `gputopo: error:` line with the right exit code, never a
traceback, a hang or a damaged file.

Every row runs a command on an input (a file written from bytes, or a device such as /dev/zero); the
scan rows also ask for `--save` onto an existing file, which must be left exactly as it was.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any, Callable

import pytest
from conftest import assert_one_error_line

from gputopo.sources.reference import load_reference

OLD_SNAPSHOT_TEXT = "old contents\n"


def _snapshot(change: Callable[[dict[str, Any]], Any] | None = None) -> bytes:
    """A valid snapshot of a small reference machine, changed by ``change``, as JSON bytes."""
    data = load_reference("two-socket-4gpu").to_dict()
    data["links"][0]["measured"] = {"a_to_b_gbps": 10.0}
    if change is not None:
        change(data)
    return json.dumps(data).encode()


def _replace(where: str, value: Any) -> Callable[[dict[str, Any]], None]:
    """A change that sets ``data[k1][k2]...`` (``where`` as ``gpus.1.index``) to ``value``."""

    def change(data: dict[str, Any]) -> None:
        *path, last = [int(k) if k.isdigit() else k for k in where.split(".")]
        target = data
        for key in path:
            target = target[key]
        target[last] = value

    return change


def _raw(text_of_value: str, where: str) -> bytes:
    """A snapshot whose field ``where`` holds JSON text json.dumps would not write (NaN, 1e400)."""
    marker = "__RAW__"
    return _snapshot(_replace(where, marker)).replace(json.dumps(marker).encode(), text_of_value.encode())


def _with_tf(ordinal: int) -> Callable[[dict[str, Any]], None]:
    def change(data: dict[str, Any]) -> None:
        data["tf"] = {"devices": [{"ordinal": ordinal}], "peer": [[True]]}

    return change


def _foreign_folder_link(tmp_path: Path) -> dict[str, str]:
    """/tmp's case: the sticky world-writable ``public`` holds ``out``, another user's link to root's
    own folder ``private`` (``{public}`` in the row's arguments)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to chown the link to another user")
    public = tmp_path / "public"
    public.mkdir()
    os.chmod(public, 0o1777)
    private = tmp_path / "private"
    private.mkdir(mode=0o700)
    (private / "box.json").write_text("root's own\n")
    (public / "out").symlink_to(private)
    os.lchown(public / "out", 54321, 54321)
    return {"public": str(public)}


def _deep_nesting(depth: int) -> bytes:
    return b'{"schema": "gputopo.topology/1", "gpus": ' + b"[" * depth + b"]" * depth + b"}"


# (id, command args with {input}, input bytes or a device path, exit code, fragment of the error line)
HOSTILE = [
    ("dev-zero-as-topology", ["scan", "--from", "{input}"], "/dev/zero", 2, "is binary, not text"),
    ("dev-zero-as-tf-log", ["scan", "--machine", "dgx1", "--tf-log", "{input}"], "/dev/zero", 2, "binary"),
    ("nested-200000-deep", ["scan", "--from", "{input}"], _deep_nesting(200_000), 2, "nested too deeply"),
    ("integer-10-to-the-400", ["scan", "--from", "{input}"], _raw(str(10**400), "gpus.0.memory_total_bytes"), 2,
     "gpus[0].memory_total_bytes: 1000000000000000000000000000000000000... is out of range"),
    ("integer-of-5000-digits", ["scan", "--from", "{input}"], _raw("9" * 5000, "gpus.0.memory_total_bytes"), 2,
     "not a usable snapshot: Exceeds the limit"),
    ("float-1e400", ["scan", "--from", "{input}"], _raw("1e400", "links.0.measured.a_to_b_gbps"), 2,
     "links[0].measured.a_to_b_gbps: must be a finite number or null, got Infinity"),
    ("figure-integer-10-to-the-400", ["scan", "--from", "{input}"], _raw(str(10**400), "links.0.measured.a_to_b_gbps"), 2,
     "links[0].measured.a_to_b_gbps: 1000000000000000000000000000000000000... is out of range"),  # was OverflowError
    ("nan-figure", ["scan", "--from", "{input}"], _raw("NaN", "links.0.measured.a_to_b_gbps"), 2,
     "links[0].measured.a_to_b_gbps: must be a finite number or null, got NaN"),
    ("infinity-figure", ["scan", "--from", "{input}"], _raw("-Infinity", "links.0.measured.latency_us"), 2,
     "links[0].measured.latency_us: must be a finite number or null, got -Infinity"),
    ("negative-gpu-index", ["scan", "--from", "{input}"], _snapshot(_replace("gpus.0.index", -5)), 2,
     "gpus[0].index: GPU indices are not negative, got -5"),
    ("duplicate-gpu-index", ["scan", "--from", "{input}"], _snapshot(_replace("gpus.3.index", 2)), 2,
     "gpus[3].index: duplicate GPU index 2"),
    ("gpu-index-too-large", ["scan", "--from", "{input}"],
     _snapshot(lambda d: d.update(gpus=[{"index": 99999}], links=[], nic_links=[], diagnostics=[])), 2,
     "gpus[0].index: 99999 is above the largest allowed, 4095"),
    ("link-to-a-missing-gpu", ["scan", "--from", "{input}"], _snapshot(_replace("links.0.b", 9)), 2,
     "links[0].b: GPU 9 is not in gpus"),
    ("unknown-p2p-word", ["scan", "--from", "{input}"], _snapshot(_replace("links.0.p2p_read", "MAYBE")), 2,
     "links[0].p2p_read: unknown P2P word 'MAYBE'"),
    ("huge-nvlink-count", ["scan", "--from", "{input}"], _snapshot(_replace("links.0.type", "NV99999999999999999999")),
     2, "links[0].type: unknown link type 'NV99999999999999999999'"),
    ("negative-tf-ordinal", ["scan", "--from", "{input}"], _snapshot(_with_tf(-1)), 2,
     "tf.devices[0].ordinal: must not be negative, got -1"),
    ("endless-cpu-list", ["scan", "--from", "{input}"], _snapshot(_replace("gpus.0.cpu_affinity", "0-99999999999")), 2,
     "gpus[0].cpu_affinity: 99999999999 is above the largest allowed number"),
    ("missing-gpu-index", ["scan", "--from", "{input}"], _snapshot(lambda d: d["gpus"][0].pop("index")), 2,
     "gpus[0].index: missing"),
    ("gpus-not-a-list", ["scan", "--from", "{input}"], _snapshot(_replace("gpus", {"0": {}})), 2,
     "gpus: must be a list of Gpu, got"),
    ("70000-duplicate-gpus-not-even-parsed", ["scan", "--from", "{input}"],
     json.dumps({"schema": "gputopo.topology/1", "gpus": [{"index": 0}] * 70000}).encode(), 2,
     '70000 "index" keys, more GPUs than gputopo reads (4096'),
    ("recommend-require-endless-range", ["recommend", "--from", "{input}", "--gpus", "2", "--require", "0-99999999999"],
     _snapshot(), 2, "bad --require '0-99999999999': 99999999999 is above the largest allowed number, 4095"),
    ("recommend-exclude-endless-range", ["recommend", "--from", "{input}", "--gpus", "2", "--exclude", "0-4096"],
     _snapshot(), 2, "bad --exclude '0-4096'"),
    ("recommend-huge-gpu-count", ["recommend", "--from", "{input}", "--gpus", "100000"], _snapshot(), 2,
     "asked for 100000 GPUs"),
    # Names are one line of text: a newline in a host would become a shell line of `--format env`.
    ("host-with-a-newline", ["scan", "--from", "{input}"], _snapshot(_replace("host", "box\ntouch /tmp/owned")), 2,
     "host: control character '\\n' in 'box\\ntouch /tmp/owned'"),
    ("gpu-host-with-a-newline", ["recommend", "--from", "{input}", "--gpus", "2", "--format", "env"],
     _snapshot(_replace("gpus.0.host", "n1\nrm -rf ~")), 2, "gpus[0].host: control character '\\n'"),
    ("gpu-name-with-an-escape", ["scan", "--from", "{input}"], _snapshot(_replace("gpus.0.name", "V100\x1b[2J")), 2,
     "gpus[0].name: control character '\\x1b'"),
    ("numa-key-with-a-newline", ["scan", "--from", "{input}"],
     _snapshot(_replace("numa_distances", {"0\n": {"0": 10}})), 2, "numa_distances key: control character"),
    # Numbers: finite, in range, ASCII digits only; counts refused before anything is built.
    ("measured-1e308", ["recommend", "--from", "{input}", "--gpus", "2"],
     _raw("1e308", "links.0.measured.a_to_b_gbps"), 2, "links[0].measured.a_to_b_gbps: 1e+308 is outside 0..1e+06"),
    ("5000-gpus", ["scan", "--from", "{input}"],
     _snapshot(lambda d: d.update(gpus=[{"index": 0}] * 5000, links=[], nic_links=[])), 2,
     "gpus: 5000 entries, more than the 4096"),
    ("links-beyond-the-pairs", ["scan", "--from", "{input}"],
     _snapshot(lambda d: d.update(links=d["links"] * 3)), 2, "links: 18 entries, more than the 6"),
    # Reading notes: their facts are plain JSON, bounded like the rest (docs/json.md).
    ("reading-note-gpu-too-large", ["scan", "--from", "{input}"],
     _snapshot(_replace("reading_notes", [{"code": "x", "gpus": [99999]}])), 2,
     "reading_notes[0].gpus[0]: 99999 is above the largest allowed, 4095"),
    ("reading-note-facts-nested-too-deep", ["scan", "--from", "{input}"],
     _snapshot(_replace("reading_notes", [{"code": "x", "facts": {"a": json.loads("[" * 20 + "]" * 20)}}])), 2,
     "reading_notes[0].facts.a[0][0][0][0][0][0][0][0]: nested more than 8 deep"),
    ("reading-note-nan-fact", ["scan", "--from", "{input}"],
     _snapshot(_replace("reading_notes", [{"code": "x", "facts": {"ratio": "__NAN__"}}])).replace(b'"__NAN__"', b"NaN"), 2,
     "reading_notes[0].facts.ratio: must be a finite number, got NaN"),
    ("70000-reading-notes", ["scan", "--from", "{input}"],
     _snapshot(_replace("reading_notes", [{"code": "x"}] * 70000)), 2, "reading_notes: 70000 entries, more than the 65536"),
    ("tf-note-of-an-older-snapshot-without-its-words", ["scan", "--from", "{input}"],
     _snapshot(_replace("tf", {"devices": [{"ordinal": 0}], "peer": [[True]], "notes": [{"severity": "info", "code": "x"}]})),
     2, "tf.notes[0].message: missing"),
    ("sizes-of-400-digits", ["bench-p2p", "--machine", "dgx1", "--sizes", "9" * 400], _snapshot(), 2, "bad size"),
    ("sizes-superscript", ["bench-p2p", "--machine", "dgx1", "--sizes", "²KiB"], _snapshot(), 2, "bad size"),
    ("seed-minus-one", ["train", "--cpu-devices", "1", "--seed", "-1", "--dry-run"], _snapshot(), 2,
     "--seed must be from 0 to 4294967295, got -1"),
    ("empty-checkpoint-dir", ["train", "--cpu-devices", "1", "--checkpoint-dir", "", "--dry-run"], _snapshot(), 2,
     "--checkpoint-dir is empty"),
    ("ps-100000-workers", ["train", "--cpu-devices", "1", "--strategy", "parameter-server", "--workers", "100000",
                           "--dry-run"], _snapshot(), 2, "at most 64 workers"),
    ("ps-superscript-workers", ["train", "--cpu-devices", "1", "--strategy", "parameter-server", "--workers", "²",
                                "--dry-run"], _snapshot(), 2, "takes --workers N (a count), got '²'"),
    ("plan-nested-100000-deep", ["train", "--cpu-devices", "1", "--launcher", "slurm", "--plan", "{input}",
                                 "--dry-run"], _deep_nesting(100_000), 2, "nested too deeply"),
    ("recommend-env-and-json", ["recommend", "--from", "{input}", "--gpus", "2", "--format", "env", "--json"],
     _snapshot(), 2, "--json and --format env"),
    # When a snapshot's live state was read: a UTC time in ISO 8601, or nothing (older snapshots).
    ("captured-at-in-words", ["recommend", "--from", "{input}", "--gpus", "2"], _snapshot(_replace("captured_at", "now")),
     2, "captured_at: not a UTC time in ISO 8601 (such as 2025-06-01T10:00:00Z), got 'now'"),
    ("captured-at-local-time", ["scan", "--from", "{input}"],
     _snapshot(_replace("captured_at", "2025-06-01T10:00:00+02:00")), 2, "captured_at: not a UTC time in ISO 8601"),
    ("captured-at-month-13", ["scan", "--from", "{input}"], _snapshot(_replace("captured_at", "2025-13-01T10:00:00Z")),
     2, "captured_at: not a UTC time in ISO 8601"),
    ("captured-at-a-number", ["scan", "--from", "{input}"], _snapshot(_replace("captured_at", 1748772000)), 2,
     "captured_at: must be"),
    ("captured-at-with-an-escape", ["scan", "--from", "{input}"],
     _snapshot(_replace("captured_at", "2025-06-01T10:00:00Z\x1b[2J")), 2, "captured_at: control character '\\x1b'"),
    # Paths through another user's link in a sticky world-writable folder (fs.protected_symlinks),
    # the link a folder of the path: nothing is written where it leads.
    ("save-through-another-users-folder-link", ["scan", "--machine", "dgx1", "--save", "{public}/out/box.json"],
     _foreign_folder_link, 3, "/public/out is a symbolic link in the sticky world-writable folder"),
    ("report-through-another-users-folder-link", ["report", "--machine", "dgx1", "-o", "{public}/out/page.html"],
     _foreign_folder_link, 3, "owned by uid 54321 (neither the folder's owner nor you): not followed"),
    ("checkpoint-dir-through-another-users-link", ["train", "--cpu-devices", "1", "--checkpoint-dir",
                                                   "{public}/out/ck", "--dry-run"], _foreign_folder_link, 2,
     "/public/out is a symbolic link in the sticky world-writable folder"),
]


@pytest.mark.parametrize(("args", "given", "exit_code", "fragment"), [row[1:] for row in HOSTILE],
                         ids=[row[0] for row in HOSTILE])
def test_hostile_input_is_one_error_line_and_writes_nothing(cli, tmp_path, args, given, exit_code, fragment):
    places: dict[str, str] = {}
    if isinstance(given, bytes):
        source = tmp_path / "input.json"
        source.write_bytes(given)
    elif callable(given):  # a hostile layout of files: its places are named in the arguments
        places = given(tmp_path)
        source = None
    else:
        source = given
    command = [str(source) if a == "{input}" else a.format(**places) if places else a for a in args]
    saved = tmp_path / "saved.json"
    saved.write_text(OLD_SNAPSHOT_TEXT)
    if command[0] == "scan" and "--save" not in command:
        command += ["--save", str(saved)]
    before = _tree(tmp_path)
    line = assert_one_error_line(cli(*command), exit_code)
    assert fragment in line, line
    assert saved.read_text() == OLD_SNAPSHOT_TEXT
    assert _tree(tmp_path) == before  # nothing written, replaced or left behind, through links neither


def _tree(root: Path) -> dict[str, tuple[int, bytes | str]]:
    """Every entry under ``root`` (links not followed): its type and its bytes or link target."""
    entries = {}
    for folder, names, files in os.walk(root):
        for name in names + files:
            path = Path(folder) / name
            mode = os.lstat(path).st_mode
            content = os.readlink(path) if stat.S_ISLNK(mode) else path.read_bytes() if stat.S_ISREG(mode) else b""
            entries[str(path.relative_to(root))] = (stat.S_IFMT(mode), content)
    return entries


def test_a_tf_config_of_the_wrong_shape_is_one_line_not_tensorflows_traceback(cli, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", '{"cluster": 5}')
    line = assert_one_error_line(cli("train", "--cpu-devices", "1", "--dry-run"))
    assert "TF_CONFIG in the environment: cluster must be an object" in line


def test_a_long_input_is_refused_at_the_bound_not_read_to_the_end(cli, tmp_path, monkeypatch):
    import gputopo.fileio

    monkeypatch.setattr(gputopo.fileio, "MAX_INPUT_BYTES", 64 * 1024)
    big = tmp_path / "topo.txt"
    big.write_bytes(b"GPU0\tX\n" * 20_000)
    line = assert_one_error_line(cli("scan", "--from", str(big)))
    assert f"topology file {big} is larger than the 0 MiB limit" in line or "larger than" in line
    line = assert_one_error_line(cli("scan", "--from", "-", input="GPU0\tX\n" * 20_000))
    assert "standard input is larger than" in line


@pytest.mark.parametrize("encoding", ["utf-8-sig", "utf-16"])
def test_snapshots_with_a_byte_order_mark_are_read(cli, tmp_path, encoding):
    """PowerShell's `>` writes UTF-16 with a BOM; Notepad may add a UTF-8 BOM."""
    source = tmp_path / "box.json"
    source.write_bytes(_snapshot().decode().encode(encoding))
    result = cli("scan", "--from", str(source), "--json")
    assert result.exit_code == 0, result.output
    assert len(json.loads(result.stdout)["gpus"]) == 4


@pytest.mark.parametrize(
    ("make_target", "kind"),
    [(lambda p: os.mkfifo(p), "a named pipe (FIFO)"), (lambda p: p.mkdir(), "folder")],
    ids=["fifo", "folder"],
)
def test_save_onto_something_that_is_not_a_regular_file_is_refused_and_left_alone(cli, tmp_path, make_target, kind):
    target = tmp_path / "target"
    make_target(target)
    mode_before = os.lstat(target).st_mode
    line = assert_one_error_line(cli("scan", "--machine", "dgx1", "--save", str(target)))
    assert kind in line
    assert os.lstat(target).st_mode == mode_before and stat.S_IFMT(mode_before) != stat.S_IFREG
    assert [p.name for p in tmp_path.iterdir()] == ["target"]


def test_a_snapshot_with_terminal_escapes_is_shown_without_them(cli, tmp_path):
    """Names with escape codes are refused at the door (the rows above); a finding's free text
    carrying them is shown without them, so it cannot drive the user's terminal."""

    def hostile_strings(data: dict[str, Any]) -> None:
        data["diagnostics"] = [{"severity": "warning", "code": "x", "message": "look\x1b[5m here\x1b]0;owned\x07\r\x9b1m",
                                "gpus": [0]}]

    source = tmp_path / "box.json"
    source.write_bytes(_snapshot(hostile_strings))
    result = cli("scan", "--from", str(source))
    assert result.exit_code == 0, result.output
    assert "look[5m here]0;owned1m" in result.stdout
    assert not any(c in result.stdout for c in "\x1b\x07\r\x9b")
    as_json = cli("scan", "--from", str(source), "--json")
    assert "\\u001b" in as_json.stdout and "\x1b" not in as_json.stdout


@pytest.mark.parametrize("option", ["--save", "--svg"])
def test_an_empty_output_name_is_one_error_not_a_silent_skip(cli, tmp_path, monkeypatch, option):
    monkeypatch.chdir(tmp_path)
    assert "the output file name is empty" in assert_one_error_line(cli("scan", "--machine", "dgx1", option, ""))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("command", "extra"),
    [("report", ["-o", "page.html"]), ("train", ["--data", "synthetic", "--dry-run"]), ("bench-p2p", [])],
)
def test_commands_that_read_one_topology_refuse_a_second_host(cli, tmp_path, monkeypatch, command, extra):
    """A second host's --from must not silently replace the first (it did: the report drew the last
    host); files of one host are merged instead (tests/unit/sources/test_resolve.py)."""
    monkeypatch.chdir(tmp_path)
    for host in ("node1", "node2"):
        assert cli("scan", "--machine", "dgx1", "--host", host, "--save", f"{host}.json").exit_code == 0
    line = assert_one_error_line(cli(command, "--from", "node1.json", "--from", "node2.json", *extra))
    assert "the --from files are snapshots of 2 hosts (node1, node2); this command reads one host" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["node1.json", "node2.json"]


def test_tf_is_refused_with_a_reference_machine(cli):
    """--tf checks this host's TensorFlow; a reference machine is not this host."""
    assert "--machine is a reference machine" in assert_one_error_line(cli("scan", "--machine", "dgx-h100", "--tf"))


def test_a_hand_edited_worded_note_of_the_wrong_types_is_left_out_not_a_traceback(cli, tmp_path):
    """A worded reading note whose severity is a list made ``scan`` sort findings by an unhashable key."""
    source = tmp_path / "notes.json"
    source.write_bytes(_snapshot(_replace("reading_notes", [
        {"code": "hand-edited", "facts": {"worded": {"severity": ["error"], "message": 5}}, "gpus": [0]}])))
    result = cli("scan", "--from", str(source))
    assert result.exit_code == 0, result.output
    assert "hand-edited" not in result.output


def test_a_link_with_nvlinks_under_a_pcie_word_is_summarised_not_a_traceback(cli, tmp_path):
    """``type: PIX`` with ``nvlink_count: 1`` passes the door (each value is plausible); the NVLink
    summary sorted its words by ``int(word[2:])`` and raised ValueError on ``'X'``."""
    source = tmp_path / "mixed.json"
    source.write_bytes(_snapshot(lambda d: d["links"][0].update(type="PIX", nvlink_count=1)))
    for command in (["scan"], ["recommend", "--gpus", "2", "--format", "env"]):
        result = cli(*command, "--from", str(source))
        assert result.exit_code == 0, result.output
        assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
