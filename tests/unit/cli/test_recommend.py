"""`gputopo recommend` end to end: every format, the shared source options, and one-line errors."""

import json
import subprocess

import pytest
from conftest import SHARED_FIXTURES, assert_one_error_line

DGX1_TEXT = str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt")
PCIE_TEXT = str(SHARED_FIXTURES / "topo" / "pcie_8gpu_dual_socket_pix_node_sys.txt")
TF0_LOG = str(SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log")


def test_text_shows_the_best_group_ring_and_paste_ready_lines(cli):
    result = cli("recommend", "--machine", "dgx1", "--gpus", "4")
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich wraps long lines
    assert "GPUs 0,1,2,3" in text
    assert "ring 0-1-2-3-0, slowest hop NV1 ~ 20 GB/s" in text
    assert "CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=0,1,2,3 numactl --cpunodebind=0 --membind=0" in text
    assert "tf.distribute.MirroredStrategy(devices=['/gpu:0', '/gpu:1', '/gpu:2', '/gpu:3']" in text
    assert "cross_device_ops=tf.distribute.NcclAllReduce()" in text
    assert "4,5,6,7" in text  # the runner-up is listed
    assert "proven optimal" in text


@pytest.mark.parametrize("args", [["--machine", "dgx1"], ["--from", DGX1_TEXT]])
def test_json_picks_an_nvlinked_quad_on_the_dgx1(cli, args):
    result = cli("recommend", *args, "--gpus", "4", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["groups"][0]["gpus"]) in ({0, 1, 2, 3}, {4, 5, 6, 7})
    assert data["groups"][0]["cuda_visible_devices"] in ("0,1,2,3", "4,5,6,7")
    assert data["proven_optimal"] is True


def test_json_alias_equals_format_json(cli):
    a = cli("recommend", "--from", PCIE_TEXT, "--gpus", "3", "--json")
    b = cli("recommend", "--from", PCIE_TEXT, "--gpus", "3", "--format", "json")
    assert a.exit_code == b.exit_code == 0
    assert json.loads(a.output) == json.loads(b.output)
    assert json.loads(a.output)["groups"][0]["same_socket"] is True


def test_tf_log_alone_picks_a_peering_pair(cli):
    result = cli("recommend", "--tf-log", TF0_LOG, "--gpus", "2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["groups"][0]["gpus"]) in ({0, 1}, {2, 3})
    assert data["groups"][0]["hops"][0]["label"] == "TF:P2P"


def test_env_format_can_be_evaluated_by_a_shell(cli):
    result = cli("recommend", "--machine", "dgx1", "--gpus", "2", "--jobs", "2", "--format", "env")
    assert result.exit_code == 0, result.output
    shell = subprocess.run(
        ["sh", "-c", 'eval "$(cat)"; echo "$CUDA_DEVICE_ORDER|$CUDA_VISIBLE_DEVICES|$CUDA_VISIBLE_DEVICES_JOB2|$GPUTOPO_NUMACTL"'],
        input=result.output, capture_output=True, text=True, timeout=10,
    )
    assert shell.returncode == 0, shell.stderr
    order, visible, job2, numactl = shell.stdout.strip().split("|")
    assert order == "PCI_BUS_ID"
    assert visible == "0,3" and job2 == "1,2"  # the two NV2 pairs on socket 0
    assert numactl == "numactl --cpunodebind=0 --membind=0"


def test_python_format_is_valid_python_with_the_strategy(cli):
    result = cli("recommend", "--machine", "dgx1", "--gpus", "8", "--format", "python")
    assert result.exit_code == 0, result.output
    compile(result.output, "<snippet>", "exec")  # raises on a syntax error
    assert "os.environ[\"CUDA_VISIBLE_DEVICES\"] = '0,1,2,3,4,5,6,7'" in result.output
    assert "cross_device_ops=tf.distribute.NcclAllReduce()" in result.output
    assert result.output.index("CUDA_VISIBLE_DEVICES") < result.output.index("import tensorflow")


def test_nvswitch_machine_says_any_group_is_as_good(cli):
    result = cli("recommend", "--machine", "dgx-h100", "--gpus", "4")
    assert result.exit_code == 0, result.output
    assert "as good" in result.output and "NVSwitch" in result.output


def test_jobs_table_lists_every_job(cli):
    result = cli("recommend", "--machine", "pcie-8gpu", "--gpus", "2", "--jobs", "4")
    assert result.exit_code == 0, result.output
    for pair in ("0,1", "2,3", "4,5", "6,7"):
        assert f"CUDA_VISIBLE_DEVICES={pair}" in result.output


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["--machine", "dgx1", "--gpus", "0"], "at least 1"),
        (["--machine", "dgx1", "--gpus", "99"], "only 8"),
        (["--machine", "dgx1", "--gpus", "2", "--require", "zero"], "bad --require 'zero'"),
        (["--machine", "dgx1", "--gpus", "2", "--exclude", "1,,x"], "bad --exclude '1,,x'"),
        (["--machine", "dgx1", "--gpus", "2", "--require", "3", "--exclude", "3"], "both required and excluded"),
        (["--machine", "dgx1", "--gpus", "4", "--jobs", "3"], "3 jobs x 4 GPUs"),
        (["--machine", "dgx1", "--gpus", "4", "--format", "yaml"], "--format must be one of"),
        (["--machine", "no-such-box", "--gpus", "2"], "unknown reference machine"),
        (["--from", "/nonexistent/topo.txt", "--gpus", "2"], "does not exist"),
    ],
)
def test_impossible_or_garbage_asks_fail_in_one_line(cli, args, fragment):
    line = assert_one_error_line(cli("recommend", *args))
    assert fragment in line


def test_garbage_topology_text_fails_in_one_line(cli, tmp_path):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\nthis is not nvidia-smi output\n")
    assert_one_error_line(cli("recommend", "--from", str(junk), "--gpus", "2"))


def test_recommend_diagnoses_nothing_yet_leaves_a_lost_gpu_out(cli, monkeypatch, tmp_path):
    """Issue 21: recommend shows no finding, so it does not diagnose (a sixth of a 576-GPU domain's
    run); the one finding it reads, a lost GPU, is a reader's, and still keeps that GPU out."""
    import gputopo.analysis.causes.diagnose
    from gputopo.sources.reference import load_reference

    def refuse(topology):
        raise AssertionError("recommend diagnosed the topology")

    monkeypatch.setattr(gputopo.analysis.causes.diagnose, "diagnose", refuse)
    data = load_reference("dgx1").to_dict()
    data["reading_notes"] = [{"code": "gpu-lost", "facts": {"bus_id": None}, "gpus": [1]}]
    path = tmp_path / "box.json"
    path.write_text(json.dumps(data))
    result = cli("recommend", "--from", str(path), "--gpus", "4", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert all(1 not in group["gpus"] for group in data["groups"])
    assert any(note.startswith("left out: GPU 1 is lost") for note in data["notes"])
    assert cli("scan", "--from", str(path)).exit_code != 0  # scan still diagnoses (and meets the refusal)


def test_a_search_the_work_budget_stops_says_so_in_text_and_json(cli, monkeypatch):
    import gputopo.analysis.recommend.budget as budget_module

    monkeypatch.setattr(budget_module, "WORK_BUDGET", 50)
    text = cli("recommend", "--machine", "dgx1", "--gpus", "5")
    assert text.exit_code == 0, text.output
    assert "search stopped after" in text.stdout and "best found, not proven" in text.stdout
    data = json.loads(cli("recommend", "--machine", "dgx1", "--gpus", "5", "--json").stdout)
    assert data["search_stopped"] is True and data["search_budget"] == 50 and data["proven_optimal"] is False
    assert data["notes"][0].startswith("search stopped after")


def test_the_reference_machines_finish_within_the_budget(cli):
    data = json.loads(cli("recommend", "--machine", "dgx1", "--gpus", "5", "--json").stdout)
    assert data["search_stopped"] is False and data["proven_optimal"] is True
    assert 0 < data["search_steps"] < data["search_budget"]


def test_too_many_alternatives_is_one_error_line(cli):
    result = cli("recommend", "--machine", "dgx1", "--gpus", "2", "--alternatives", "1000000")
    assert result.exit_code == 2
    assert "--alternatives must be from 0 to 100 (got 1000000)" in assert_one_error_line(result)


def test_python_format_keeps_the_numactl_binding(cli):
    text = cli("recommend", "--machine", "dgx1", "-n", "4", "--format", "python").output
    compile(text, "<recommend>", "exec")
    assert "# Start this script bound next to the GPUs: numactl --cpunodebind=0 --membind=0 python train.py" in text


def test_a_saved_plan_is_not_asked_to_be_saved(cli, tmp_path):
    snapshots = []
    for host in ("node1", "node2"):
        path = tmp_path / f"{host}.json"
        assert cli("scan", "--machine", "dgx1", "--host", host, "--save", str(path)).exit_code == 0
        snapshots += ["--from", str(path)]
    unsaved = cli("recommend", *snapshots, "-n", "16").stdout
    assert "save it with --save plan.json" in unsaved
    saved = " ".join(cli("recommend", *snapshots, "-n", "16", "--save", str(tmp_path / "plan.json")).stdout.split())
    assert "save it with" not in saved and "saved as " in saved and "--plan " in saved


def test_a_gpu_a_tf_log_shows_short_of_memory_loses_the_tie_and_is_named(cli):
    """Review 4: {0,1,2,3} and {4,5,6,7} tie on what the log shows of the links; GPU 6's memory was held
    by something else when the log was written, so {0,1,2,3} is first for that, said so, as a past state."""
    from conftest import OWN_FIXTURES

    log = str(OWN_FIXTURES / "corpus" / "tf_logs" / "tf15_edge_matrix_two_islands_8gpu_1080ti.log")
    data = json.loads(cli("recommend", "--tf-log", log, "--gpus", "4", "--json").output)
    assert data["groups"][0]["gpus"] == [0, 1, 2, 3] and list(data["memory_held"]) == ["6"]
    reason = data["groups"][0]["reason"]
    assert "as good as {4,5,6,7}" not in reason and "may not be free" in reason and "past state" in reason
    assert any(note.startswith("GPU 6 may be busy") for note in data["notes"])
    kept = json.loads(cli("recommend", "--tf-log", log, "--gpus", "4", "--require", "6", "--json").output)
    assert 6 in kept["groups"][0]["gpus"] and any("kept in the best group" in n for n in kept["notes"])
