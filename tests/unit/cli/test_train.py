"""`gputopo train` command line: bad input is one clear line before any process starts; --dry-run
prints the exact plan. None of these start TensorFlow."""

from __future__ import annotations

import json
import os
import socket
import sys
from pathlib import Path

import pytest
from conftest import assert_one_error_line
from image_folders import make_image_folder

from gputopo.errors import InputError


def _assert_one_line_error(result, *fragments: str) -> None:
    line = assert_one_error_line(result)
    for fragment in fragments:
        assert fragment in line, line


def test_dry_run_prints_the_exact_child_command(cli, tmp_path: Path):
    result = cli("train", "--cpu-devices", "2", "--batch-size", "32", "--checkpoint-dir", str(tmp_path / "ck"),
                 "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    (process,) = data["processes"]
    assert process["command"][:3] == [sys.executable, "-m", "gputopo.train.child"]
    assert process["env"] == {"CUDA_VISIBLE_DEVICES": ""}
    flags = process["command"][3:]
    assert flags[flags.index("--cpu-devices") + 1] == "2" and flags[flags.index("--batch-size") + 1] == "32"
    assert "--result-file" not in flags  # that one is added only when gputopo itself launches it
    assert not (tmp_path / "ck").exists()  # a dry run writes nothing


def test_dry_run_on_a_reference_machine_sets_cuda_order_and_numactl(cli, monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/numactl" if name == "numactl" else None)
    result = cli("train", "--machine", "two-socket-4gpu", "--devices", "2,3", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    (process,) = json.loads(result.output)["processes"]
    assert process["env"] == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2,3"}
    assert process["command"][:3] == ["/usr/bin/numactl", "--cpunodebind=1", "--membind=1"]
    assert process["shell"].startswith("CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,3 /usr/bin/numactl")
    human = cli("train", "--machine", "dgx1", "--gpus", "4", "--dry-run")
    assert human.exit_code == 0, human.output
    assert "Training plan" in human.output and "CUDA_DEVICE_ORDER=PCI_BUS_ID" in human.output


def test_scaling_dry_run_lists_one_process_per_size(cli):
    result = cli("train", "--cpu-devices", "4", "--batch-size", "64", "--scaling", "1,2,4", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    processes = json.loads(result.output)["processes"]
    from gputopo.train.config import TrainConfig

    configs = [TrainConfig.from_argv(p["command"][3:]) for p in processes]
    assert [c.batch_size for c in configs] == [16, 32, 64]  # the per-replica batch stays 16
    assert [c.cpu_devices for c in configs] == [1, 2, 4]
    assert all(c.checkpoint_dir is None and not c.evaluate for c in configs)


@pytest.mark.parametrize(
    "args, fragments",
    [
        (["--data", "/no/such/folder"], ["data folder /no/such/folder does not exist"]),
        (["--batch-size", "32", "--cpu-devices", "3"], ["does not split evenly over 3 replicas"]),
        (["--model", "vgg"], ["unknown model 'vgg'"]),
        (["--strategy", "ring"], ["unknown strategy"]),
        (["--scaling", "1,8"], ["needs 8 devices"]),
        (["--scaling", "one"], ["--scaling expects"]),
        (["--epochs", "0"], ["--epochs must be at least 1"]),
        (["--strategy", "multi-worker", "--workers", "localhost"], ["not host:port"]),
        (["--resume", "--no-checkpoint"], ["--resume needs"]),
        (["--machine", "dgx1", "--devices", "0,x"], ["bad --devices '0,x'"]),
        (["--machine", "dgx1", "--devices", "0,9"], ["names GPU 9"]),
        (["--batch-size", "1000000000000"], ["--batch-size must be at most"]),
    ],
)
def test_bad_options_are_one_line(cli, tmp_path: Path, args, fragments):
    base = ["train", "--cpu-devices", "2", "--checkpoint-dir", str(tmp_path / "ck")]
    if "--cpu-devices" in args:
        base = ["train", "--checkpoint-dir", str(tmp_path / "ck")]
    _assert_one_line_error(cli(*base, *args), *fragments)


def test_bad_data_folders_are_one_line(cli, tmp_path: Path):
    make_image_folder(tmp_path / "d", classes=("cat", "dog"), train_per_class=2, test_per_class=1)
    (tmp_path / "d" / "test" / "dog").rename(tmp_path / "d" / "test" / "fox")
    _assert_one_line_error(cli("train", "--cpu-devices", "1", "--data", str(tmp_path / "d")), "class folders differ")
    (tmp_path / "empty" / "train").mkdir(parents=True)
    _assert_one_line_error(cli("train", "--cpu-devices", "1", "--data", str(tmp_path / "empty")), "no class folders")


def test_existing_checkpoint_is_never_overwritten_without_resume(cli, tmp_path: Path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "checkpoint").write_text('model_checkpoint_path: "ckpt-12"\n')
    _assert_one_line_error(cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck)), "step 12", "--resume")
    assert (ck / "checkpoint").read_text() == 'model_checkpoint_path: "ckpt-12"\n'
    _assert_one_line_error(
        cli("train", "--cpu-devices", "1", "--resume", "--checkpoint-dir", str(tmp_path / "new")), "no checkpoint in"
    )
    # A dry run only shows the plan: it may be asked for beside an existing checkpoint.
    dry = cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck), "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "Training plan" in dry.output
    assert (ck / "checkpoint").read_text() == 'model_checkpoint_path: "ckpt-12"\n'


def test_worker_port_in_use_is_one_line(cli, tmp_path: Path):
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = cli("train", "--cpu-devices", "1", "--strategy", "multi-worker", "--batch-size", "32",
                     "--workers", f"127.0.0.1:{port},127.0.0.1:1", "--checkpoint-dir", str(tmp_path / "ck"))
    _assert_one_line_error(result, f"port {port} on 127.0.0.1 is in use")


def test_train_needs_gpus_or_cpu_devices(cli, tmp_path: Path):
    result = cli("train", "--machine", "dgx1", "--gpus", "9", "--checkpoint-dir", str(tmp_path / "ck"))
    _assert_one_line_error(result, "only 8 GPUs")


def test_a_checkpoint_folder_that_cannot_be_written_is_refused_before_training(cli, tmp_path: Path):
    (tmp_path / "a-file").write_text("")
    ck = tmp_path / "a-file" / "ck"  # under a file: nothing can be created there
    result = cli("train", "--cpu-devices", "1", "--steps-per-epoch", "2", "--checkpoint-dir", str(ck))
    _assert_one_line_error(result, f"cannot write checkpoints to {ck}")
    assert cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(ck), "--dry-run").exit_code == 0
    fresh = tmp_path / "new" / "ck"
    assert cli("train", "--cpu-devices", "1", "--checkpoint-dir", str(fresh), "--dry-run").exit_code == 0
    assert not fresh.exists()  # a dry run creates nothing


def test_tf_config_that_is_not_json_is_one_line(cli, tmp_path: Path, monkeypatch):
    from gputopo.train.workers import check_tf_config_env

    monkeypatch.setenv("TF_CONFIG", "{nope")
    _assert_one_line_error(cli("train", "--cpu-devices", "1", "--no-checkpoint"), "TF_CONFIG in the environment is not JSON")
    with pytest.raises(InputError, match="not a JSON object"):
        check_tf_config_env({"TF_CONFIG": "[1, 2]"})
    check_tf_config_env({"TF_CONFIG": '{"cluster": {}}'})
    check_tf_config_env({})


def test_an_unreadable_class_folder_is_one_line(cli, tmp_path: Path, monkeypatch):
    folder = make_image_folder(tmp_path / "d", classes=("cat", "dog"), train_per_class=2, test_per_class=1)
    locked = folder / "train" / "dog"
    real_iterdir = Path.iterdir

    def iterdir(self):  # what chmod 000 does to anyone but root (the tests may run as root)
        if self == locked:
            raise PermissionError(13, "Permission denied", str(self))
        return real_iterdir(self)

    monkeypatch.setattr(Path, "iterdir", iterdir)
    _assert_one_line_error(cli("train", "--cpu-devices", "1", "--data", str(folder)),
                           f"cannot read folder {locked}: Permission denied")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a chmod-000 folder anyway")
def test_a_chmod_000_class_folder_is_one_line(cli, tmp_path: Path):
    folder = make_image_folder(tmp_path / "d", classes=("cat", "dog"), train_per_class=2, test_per_class=1)
    locked = folder / "train" / "dog"
    locked.chmod(0)
    try:
        _assert_one_line_error(cli("train", "--cpu-devices", "1", "--data", str(folder)), "cannot read folder")
    finally:
        locked.chmod(0o755)


def test_a_checkpoint_dir_the_system_cannot_look_at_is_one_line_not_a_traceback(cli, tmp_path):
    """A path longer than the kernel takes (ENAMETOOLONG; /proc/1/root/... gives EACCES the same
    way): Path.exists() raised it as a traceback."""
    too_long = str(tmp_path / "/".join(["a"] * 3000))
    result = cli("train", "--machine", "dgx-a100", "--gpus", "2", "--checkpoint-dir", too_long, "--dry-run")
    assert_one_error_line(result, 2)
    assert "File name too long" in result.stderr


def test_dry_run_says_when_the_work_budget_stopped_the_pick(cli, monkeypatch):
    import gputopo.analysis.recommend.budget as budget_module

    monkeypatch.setattr(budget_module, "WORK_BUDGET", 50)
    result = cli("train", "--machine", "dgx1", "--gpus", "5", "--batch-size", "60", "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert any(note.startswith("search stopped after") for note in data["plan"]["notes"]), data
    text = cli("train", "--machine", "dgx1", "--gpus", "5", "--batch-size", "60", "--dry-run")
    assert "search stopped after" in text.output


def _fake_training(monkeypatch, counters=None):
    from fake_nvml import FakeNvml

    from gputopo.sources.host import nvml_counters
    from gputopo.sources.reference import load_reference
    from gputopo.train.launch import run

    monkeypatch.setattr(nvml_counters, "reader", lambda: nvml_counters.CounterReader(
        FakeNvml(load_reference("dgx1"), counters={"gpus": counters or {}})))
    monkeypatch.setattr(run, "run_locally", lambda *args, **kwargs: {"status": "completed", "steps": 1})


def test_watch_file_gets_json_lines_and_the_result_the_summary(cli, tmp_path: Path, monkeypatch):
    _fake_training(monkeypatch, {"0": {"nvlink_tx_bytes_per_s": {"0": 10e9}}})
    target = tmp_path / "watch.jsonl"
    target.write_text('{"schema": "gputopo.watch/1"}\n')  # appended to, never truncated
    result = cli("train", "--cpu-devices", "2", "--no-checkpoint", "--json", "--watch-file", str(target))
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["watch"]["recorded"] is True and summary["watch"]["schema"] == "gputopo.watch-summary/1"
    lines = target.read_text().splitlines()
    assert len(lines) == 2 and json.loads(lines[1])["schema"] == "gputopo.watch/1"


def test_watch_without_nvml_is_one_note_and_training_goes_on(cli, tmp_path: Path, monkeypatch):
    from gputopo.errors import NvmlUnavailable
    from gputopo.sources.host import nvml_counters
    from gputopo.train.launch import run

    def no_nvml():
        raise NvmlUnavailable("cannot read this host's GPUs through NVML: no driver")

    monkeypatch.setattr(nvml_counters, "reader", no_nvml)
    monkeypatch.setattr(run, "run_locally", lambda *args, **kwargs: {"status": "completed"})
    result = cli("train", "--cpu-devices", "2", "--no-checkpoint", "--json", "--watch")
    assert result.exit_code == 0, result.output
    assert result.stderr.count("link traffic not recorded") == 1
    assert json.loads(result.stdout)["watch"] == {
        "recorded": False, "reason": "link traffic not recorded: cannot read this host's GPUs through NVML: no driver"}


@pytest.mark.parametrize("kind", ["symlink", "folder", "fifo"])
def test_watch_file_not_a_regular_file_is_refused_before_training(cli, tmp_path: Path, monkeypatch, kind):
    _fake_training(monkeypatch)
    from gputopo.train.launch import run

    monkeypatch.setattr(run, "run_locally", lambda *a, **k: pytest.fail("training started"))
    target = tmp_path / "watch.jsonl"
    if kind == "symlink":
        (tmp_path / "real").write_text("")
        target.symlink_to(tmp_path / "real")
    elif kind == "folder":
        target.mkdir()
    else:
        os.mkfifo(target)
    result = cli("train", "--cpu-devices", "2", "--no-checkpoint", "--watch-file", str(target))
    _assert_one_line_error(result, str(target))
    assert result.exit_code == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another user needs root to make")
def test_watch_file_of_another_user_in_a_sticky_folder_is_not_appended_to(cli, tmp_path: Path, monkeypatch):
    # As `--save` (fs.protected_regular, whatever the sysctl says): root appending to a file another
    # user owns in /tmp hands them what root writes, and they may swap it at will.
    _fake_training(monkeypatch)
    from gputopo.train.launch import run

    monkeypatch.setattr(run, "run_locally", lambda *a, **k: pytest.fail("training started"))
    public = tmp_path / "public"
    public.mkdir()
    public.chmod(0o1777)
    target = public / "watch.jsonl"
    target.write_text("theirs\n")
    os.chown(target, 65534, 65534)
    result = cli("train", "--cpu-devices", "2", "--no-checkpoint", "--watch-file", str(target))
    assert str(target) in assert_one_error_line(result, 3)
    assert target.read_text() == "theirs\n"
