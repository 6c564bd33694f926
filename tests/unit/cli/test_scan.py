"""End-to-end tests of `gputopo scan` / `gputopo machines` on reference machines and snapshots."""

import json
from pathlib import Path

import pytest
from conftest import assert_one_error_line

from gputopo.model import Topology
from gputopo.sources.reference import MACHINES, load_reference


@pytest.mark.parametrize("name", list(MACHINES))
def test_scan_json_follows_the_contract_for_every_reference_machine(cli, name):
    result = cli("scan", "--machine", name, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["schema"] == "gputopo.topology/1"
    assert data["source"] == "reference"
    ref = load_reference(name)
    assert len(data["gpus"]) == len(ref.gpus)
    for gpu in data["gpus"]:
        assert {"index", "name", "pci_bus_id", "numa_node", "cpu_affinity"} <= set(gpu)
    for link in data["links"]:
        assert {"a", "b", "type", "p2p_read", "p2p_write", "p2p_atomics"} <= set(link)
        assert link["p2p_read"] in ("ok", "CNS", "GNS", "TNS", "DR", "NS", "U")
    for finding in data["diagnostics"]:
        assert {"severity", "code", "message"} <= set(finding)


def test_scan_table_labels_the_reference_machine_and_shows_link_words(cli):
    result = cli("scan", "--machine", "dgx1")
    assert result.exit_code == 0, result.output
    assert "reference machine" in result.output and "not this host" in result.output
    for word in ("NV1", "NV2", "SYS", "GPU7", "mlx5_0"):
        assert word in result.output
    assert "TNS" in result.output and "topology not supported" in result.output


def test_scan_of_72_gpus_summarises_instead_of_a_matrix(cli):
    result = cli("scan", "--machine", "gb200-nvl72")
    assert result.exit_code == 0, result.output
    assert "summary" in result.output and "2556" in result.output  # 72*71/2 NV18 pairs


def test_save_writes_a_snapshot_that_scan_from_reads_back_identically(cli, tmp_path):
    snap = tmp_path / "dgx1.json"
    first = cli("scan", "--machine", "dgx1", "--json", "--save", str(snap))
    assert first.exit_code == 0, first.output
    assert Topology.from_dict(json.loads(snap.read_text())) == Topology.from_dict(json.loads(first.stdout))
    again = cli("scan", "--from", str(snap), "--json")
    assert again.exit_code == 0, again.output
    assert json.loads(again.output) == json.loads(first.stdout)
    assert [p.name for p in tmp_path.iterdir()] == ["dgx1.json"]  # no temp file left behind


def test_what_scan_save_writes_of_a_live_host_scan_from_reads_back_whatever_nvml_says(cli, tmp_path, monkeypatch):
    """NVML text that is not UTF-8 or holds control characters (a GPU name, a process name any user
    can set) is one line of text at the NVML door: saved, then read back by --from, which refuses
    control characters."""
    from fake_nvml import FakeNvml

    import gputopo.sources.host.nvml as nvml

    fake = FakeNvml(load_reference("two-socket-4gpu"), processes={0: [(4242, b"\xff\x1b]0;x\x07run\n", 1 << 20)]},
                    raw_text={"nvmlDeviceGetName": b"Tesla\xff V100\x1b[31m\nRED", ("nvmlDeviceGetUUID", 2): b"GPU-\x00\xfe"})
    probe = nvml.probe
    monkeypatch.setattr(nvml, "probe", lambda: probe(fake))
    snap = tmp_path / "live.json"
    first = cli("scan", "--json", "--save", str(snap))
    assert first.exit_code == 0, first.output
    again = cli("scan", "--from", str(snap), "--json")
    assert again.exit_code == 0, again.output
    gpus = json.loads(again.output)["gpus"]
    assert gpus == json.loads(first.stdout)["gpus"]
    assert {g["name"] for g in gpus} == {"Tesla\ufffd V100[31mRED"} and gpus[2]["uuid"] == "GPU-\ufffd"
    assert [p["name"] for p in gpus[0]["processes"]] == ["\ufffd]0;xrun"]


def test_save_into_a_missing_folder_is_one_error_line_and_writes_nothing(cli, tmp_path):
    target = tmp_path / "no" / "such" / "dir.json"
    line = assert_one_error_line(cli("scan", "--machine", "dgx1", "--save", str(target)))
    assert "does not exist" in line
    assert not target.exists()


@pytest.mark.parametrize(
    "args, expect",
    [
        (["--machine", "dgx-9000"], "unknown reference machine"),
        (["--machine", "dgx1", "--from", "x.txt"], "either --machine or --from"),
        (["--from", "/nonexistent/topo.txt"], "does not exist"),
    ],
)
def test_bad_scan_options_giveassert_one_error_line(cli, args, expect):
    assert expect in assert_one_error_line(cli("scan", *args))


@pytest.mark.parametrize(
    "content, expect",
    [
        (b"", "empty"),
        (b"\x00\x01\x02binary\xff", "binary"),
        (b'{"schema": "gputopo.topology/1", "gpus": [{"index": "zero"', "not valid JSON"),
        (b'{"schema": "someone-else/2"}', "unsupported snapshot schema"),
    ],
)
def test_garbage_snapshots_giveassert_one_error_line(cli, tmp_path, content, expect):
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    assert expect in assert_one_error_line(cli("scan", "--from", str(bad)))


def test_machines_lists_every_reference_machine(cli):
    result = cli("machines", "--json")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data["schema"] == "gputopo.machines/1" and [m["name"] for m in data["machines"]] == list(MACHINES)


def test_scan_never_imports_tensorflow():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gputopo.cli import app\n"
        "try:\n"
        "    app(['scan', '--machine', 'dgx1', '--json'], standalone_mode=False)\n"
        "finally:\n"
        "    print('TF-IMPORTED' if 'tensorflow' in sys.modules else 'TF-NOT-IMPORTED', file=sys.stderr)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "TF-NOT-IMPORTED" in proc.stderr


def test_version(cli):
    from gputopo import __version__

    result = cli("--version")
    assert result.exit_code == 0 and result.output.strip() == f"gputopo {__version__}"


def test_scan_from_a_topo_m_and_an_nccl_log_of_one_host_names_why_nccl_used_host_memory(cli):
    """Two files of one host (the Vast.ai README's topo -m and NCCL log), merged: the SHM pairs are
    NODE, which the finding reads as NCCL's P2P level, an inference."""
    from conftest import OWN_FIXTURES

    corpus = OWN_FIXTURES / "corpus"
    result = cli("scan", "--json", "--from", str(corpus / "topo" / "vastai_4x_a100_nv12_nv10_pairs_node_no_affinity_columns.txt"),
                 "--from", str(corpus / "nccl_log" / "vastai_4x_a100_shm_between_nvlink_pairs_p2p_cumem_read.log"))
    assert result.exit_code == 0, result.output
    (shm,) = [d for d in json.loads(result.output)["diagnostics"] if d["code"] == "nccl-shm-between-gpus"]
    assert shm["severity"] == "info" and shm["gpus"] == [0, 1, 2, 3]
    assert "GPUs 0-3, 1-2 (NODE)" in shm["message"] and "(inferred" in shm["message"]


# --- --fail-on counts faults (analysis/causes/finding_kinds.py); issue 32 ------------------------------

@pytest.mark.parametrize("name", sorted(MACHINES))
def test_fail_on_warning_passes_every_healthy_reference_machine(cli, name):
    """A Slurm prolog must not drain a healthy DGX-1: cross-socket pairs and TNS are its design."""
    result = cli("scan", "--machine", name, "--fail-on", "warning", "--json")
    assert result.exit_code == 0, result.output
    kinds = {f["code"]: f["kind"] for f in json.loads(result.stdout)["diagnostics"]}
    assert FAULT_KIND not in kinds.values(), kinds


def test_fail_on_design_opts_the_design_findings_in(cli):
    result = cli("scan", "--machine", "dgx1", "--fail-on", "warning", "--fail-on-design")
    assert result.exit_code == 1
    assert result.stderr.splitlines()[-1] == ("gputopo: error: 2 fault or design findings at or above warning "
                                              "(cross-socket, p2p-tns; --fail-on warning --fail-on-design)")
    assert cli("scan", "--machine", "dgx-h100", "--fail-on", "warning", "--fail-on-design").exit_code == 0  # info only


FAULT_KIND = "fault"
CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "corpus" / "topo"


def test_fail_on_warning_fails_a_corpus_capture_with_a_fault(cli):
    capture = str(CORPUS / "vllm16336_8x_b200_gpu2_no_nvlink_rows_only_cut_after_gpu5.txt")  # GPU 2's NVLinks down
    result = cli("scan", "--from", capture, "--fail-on", "warning")
    assert result.exit_code == 1 and "(nvlink-links-down; --fail-on warning)" in result.stderr


def test_design_findings_are_marked_in_the_text(cli):
    out = cli("scan", "--machine", "two-socket-4gpu").stdout
    assert "WARNING cross-socket (design): GPUs 0,1 and 2,3 are on different" in out


@pytest.mark.parametrize(("variables", "expect"), [
    ({"SLURM_JOB_GPUS": "0,1,2,3,4,5,6,7,8,9"}, 1),
    ({"SLURM_JOB_GPUS": "0,1"}, 0),
    ({"SLURM_GPUS_ON_NODE": "16"}, 1),
    ({"SLURM_JOB_ID": "7", "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(9)))}, 1),
    ({"CUDA_VISIBLE_DEVICES": ",".join(map(str, range(9)))}, 0),  # outside Slurm nothing is expected
])
def test_expect_gpus_from_slurm_applies_to_this_host_only(cli, monkeypatch, variables, expect):
    import gputopo.sources.host.nvml

    for name in ("SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE", "SLURM_JOB_ID", "CUDA_VISIBLE_DEVICES"):
        monkeypatch.delenv(name, raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(gputopo.sources.host.nvml, "probe", lambda: load_reference("dgx1"))  # this host: 8 GPUs
    live = cli("scan", "--fail-on", "error")
    assert live.exit_code == expect, live.output
    assert cli("scan", "--machine", "dgx1", "--fail-on", "error").exit_code == 0  # a file is no host's prolog
    assert cli("scan", "--expect-gpus", "0", "--fail-on", "error").exit_code == 0  # 0: no check


def test_expect_gpus_fails_a_machine_showing_fewer(cli):
    result = cli("scan", "--machine", "dgx1", "--expect-gpus", "16", "--fail-on", "error", "--json")
    assert result.exit_code == 1
    (missing,) = [f for f in json.loads(result.stdout)["diagnostics"] if f["code"] == "gpus-missing"]
    assert missing["kind"] == "fault" and missing["severity"] == "error"
    assert missing["message"].startswith("8 GPUs visible, 16 expected: expected by --expect-gpus 16")
    assert cli("scan", "--machine", "dgx1", "--expect-gpus", "8", "--fail-on", "error").exit_code == 0


def _no_nvml(monkeypatch):
    import gputopo.sources.host.nvml as nvml_source
    from gputopo.errors import NvmlUnavailable

    def no_driver():
        raise NvmlUnavailable("no driver")

    monkeypatch.setattr(nvml_source, "probe", no_driver)


def test_a_cut_tf_log_says_at_least_how_many_gpus_in_json_and_text(cli, tmp_path, monkeypatch):
    """Issue 31: a real log cut to its 'Created ... GPU:7' line. The JSON lists the one GPU it
    names, and says how many the log implies and that it is a lower bound; the screen says so."""
    from conftest import OWN_FIXTURES

    _no_nvml(monkeypatch)
    log = OWN_FIXTURES / "corpus" / "tf_logs" / "tf15_edge_matrix_two_islands_8gpu_1080ti.log"
    cut = tmp_path / "cut.log"
    cut.write_text("".join(line for line in log.read_text().splitlines(keepends=True) if "device:GPU:7" in line))
    result = cli("scan", "--tf-log", str(cut), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert [g["index"] for g in doc["gpus"]] == [7] and [d["ordinal"] for d in doc["tf"]["devices"]] == [7]
    assert (doc["tf"]["gpu_count"], doc["tf"]["gpu_count_at_least"]) == (8, True)
    text = cli("scan", "--tf-log", str(cut)).stdout
    assert "TensorFlow had at least 8 GPUs; the log names GPU 7" in text


def test_a_rocm_log_whose_gpu_tf_ignores_says_why_in_json_and_text(cli, monkeypatch):
    from conftest import OWN_FIXTURES

    _no_nvml(monkeypatch)
    log = OWN_FIXTURES / "corpus" / "tf_logs" / "rocm_tf214_ignoring_visible_gpu_gfx1100_rx7900xtx.log"
    doc = json.loads(cli("scan", "--tf-log", str(log), "--json").stdout)
    assert doc["gpus"] == []  # no GPU to train on
    (device,) = doc["tf"]["devices"]
    assert (device["name"], device["pci_bus_id"]) == ("Radeon RX 7900 XTX", "0000:03:00.0")
    assert device["ignored"].startswith("AMDGPU version gfx1100 (TensorFlow supports gfx1030gfx1100, gfx900")
    assert (doc["tf"]["gpu_count"], doc["tf"]["gpu_count_at_least"]) == (1, True)
    assert "tf-gpu-ignored" in {f["code"] for f in doc["findings"]}
    text = cli("scan", "--tf-log", str(log)).stdout
    assert "TensorFlow had at least 1 GPU; the log names GPU 0; it ignores GPU 0" in text
