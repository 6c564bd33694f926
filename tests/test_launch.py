"""gputopo.launch: the plan from a recommendation, the child's exact command, worker addresses.

Pure Python: nothing here starts TensorFlow.
"""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from gputopo.errors import InputError, TrainingFailed
from gputopo.launch import (
    TrainConfig,
    build_plan,
    check_batch_split,
    describe_exit,
    latest_checkpoint_step,
    numactl_prefix,
    parse_workers,
    plan_from_devices,
    plan_from_group,
    tf_config,
    training_processes,
)
from gputopo.notation import parse_count_list
from gputopo.numbering import cuda_env
from gputopo.sources.reference import load_reference


def test_config_round_trips_through_child_flags():
    config = TrainConfig(
        data="/data/mnist folders",
        model="mobilenetv2",
        batch_size=96,
        epochs=3,
        steps_per_epoch=7,
        learning_rate=0.05,
        image_size=32,
        evaluate=False,
        cpu_devices=3,
        strategy="multi-worker",
        cross_device_ops="HierarchicalCopyAllReduce",
        checkpoint_dir="/tmp/ck",
        checkpoint_every=0,
        resume=True,
        workers=["127.0.0.1:1000", "127.0.0.1:1001"],
        task_index=1,
        startup_timeout_s=7.5,
        progress=False,
    )
    assert TrainConfig.from_argv(config.to_argv()) == config
    assert TrainConfig.from_argv(TrainConfig().to_argv()) == TrainConfig()
    assert TrainConfig().to_argv() == []  # defaults are left out: the printed command stays short


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"model": "resnet9000"}, "unknown model"),
        ({"strategy": "horovod"}, "unknown strategy"),
        ({"batch_size": 0}, "--batch-size must be at least 1"),
        ({"steps_per_epoch": 0}, "--steps-per-epoch"),
        ({"learning_rate": -1.0}, "--learning-rate"),
        ({"learning_rate": float("inf")}, "--learning-rate"),
        ({"startup_timeout_s": 0.0}, "--startup-timeout"),
        ({"startup_timeout_s": -5.0}, "--startup-timeout"),
        ({"model": "mobilenetv2", "image_size": 16}, "at least 32x32"),
        ({"cross_device_ops": "Carrier pigeon"}, "unknown cross-device op"),
        ({"checkpoint_every": -5}, "--checkpoint-every"),
    ],
)
def test_config_rejects_values_that_cannot_work(changes, message):
    with pytest.raises(InputError, match=message):
        TrainConfig(**changes).validate()


def test_plan_follows_the_recommended_group():
    group = SimpleNamespace(
        gpus=[2, 3, 1, 0],
        cuda_visible_devices="2,3,1,0",
        cross_device_ops="NcclAllReduce",
        numa_node=1,
        ring=[2, 3, 1, 0],
        bottleneck_gbps=50.0,
        reason="NVLink ring",
    )
    plan = plan_from_group(group, numactl_path="/usr/bin/numactl")
    assert plan.env == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "2,3,1,0"}
    assert plan.numactl == ["/usr/bin/numactl", "--cpunodebind=1", "--membind=1"]
    assert plan.replicas == 4 and plan.cross_device_ops == "NcclAllReduce" and plan.ring == [2, 3, 1, 0]
    # The recommendation's cross-device op reaches the child's command line.
    (spec,) = training_processes(plan, TrainConfig(batch_size=64))
    command = spec.command()
    assert command[:3] == ["/usr/bin/numactl", "--cpunodebind=1", "--membind=1"]
    assert command[3:6] == [sys.executable, "-m", "gputopo.tf.train"]
    assert "--cross-device-ops" in command and command[command.index("--cross-device-ops") + 1] == "NcclAllReduce"
    assert spec.shell_line().startswith("CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,3,1,0 /usr/bin/numactl ")


def test_no_numactl_binding_without_a_common_node_or_without_numactl():
    assert numactl_prefix(None, "/usr/bin/numactl") == []
    assert numactl_prefix(0, None) == []
    assert numactl_prefix(0, "/bin/numactl") == ["/bin/numactl", "--cpunodebind=0", "--membind=0"]


def test_devices_override_on_a_two_socket_machine():
    topology = load_reference("two-socket-4gpu")  # GPUs 0,1 on NUMA node 0; 2,3 on node 1
    same_socket = plan_from_devices(topology, [3, 2], numactl_path="/usr/bin/numactl")
    assert same_socket.env["CUDA_VISIBLE_DEVICES"] == "3,2"  # the user's order is kept
    assert same_socket.numactl[1:] == ["--cpunodebind=1", "--membind=1"]
    across = plan_from_devices(topology, [0, 2], numactl_path="/usr/bin/numactl")
    assert across.numactl == [] and across.numa_node is None
    with pytest.raises(InputError, match="names GPU 7"):
        plan_from_devices(topology, [0, 7], None)
    with pytest.raises(InputError, match="twice"):
        plan_from_devices(topology, [1, 1], None)


def test_build_plan_uses_recommend_on_a_reference_machine():
    recommend_module = pytest.importorskip("gputopo.analysis.recommend")
    topology = load_reference("dgx1")
    expected = recommend_module.recommend(topology, 4).groups[0]
    plan = build_plan(TrainConfig(), gpus=4, machine="dgx1", numactl_path=None)
    assert sorted(plan.gpus) == sorted(expected.gpus)
    assert plan.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert plan.cross_device_ops == expected.cross_device_ops


def test_build_plan_on_cpu_devices_hides_gpus_and_notes_the_gpu_choice():
    plan = build_plan(TrainConfig(cpu_devices=2), numactl_path="/usr/bin/numactl")
    assert plan.device_kind == "CPU" and plan.replicas == 2 and plan.env == {"CUDA_VISIBLE_DEVICES": ""}
    noted = build_plan(TrainConfig(cpu_devices=2), devices="0,1", machine="two-socket-4gpu", numactl_path=None)
    assert noted.device_kind == "CPU" and "GPUs 0,1" in noted.notes[0]
    with pytest.raises(InputError, match="either --gpus"):
        build_plan(TrainConfig(), gpus=2, devices="0,1", machine="dgx1")
    with pytest.raises(InputError, match="only 8 GPUs"):
        build_plan(TrainConfig(), gpus=9, machine="dgx1")


def test_batch_must_split_over_replicas():
    check_batch_split(64, 4)
    with pytest.raises(InputError, match=r"global batch 30 does not split evenly over 4 replicas.*--batch-size 32"):
        check_batch_split(30, 4)
    plan = build_plan(TrainConfig(cpu_devices=3))
    with pytest.raises(InputError, match="does not split evenly over 3"):
        training_processes(plan, TrainConfig(cpu_devices=3, batch_size=64))


def test_local_workers_get_distinct_free_loopback_ports():
    plan = build_plan(TrainConfig(cpu_devices=1))
    config = TrainConfig(cpu_devices=1, strategy="multi-worker", batch_size=32)
    specs = training_processes(plan, config, local_workers=2)
    assert [s.config.task_index for s in specs] == [0, 1]
    addresses = specs[0].config.workers
    assert addresses == specs[1].config.workers and len(set(addresses)) == 2
    assert all(a.startswith("127.0.0.1:") for a in addresses)
    assert "worker 1 (" + addresses[1] + ")" == specs[1].label
    # Multi-worker on CPU is one replica per worker, so the batch must split over the workers.
    with pytest.raises(InputError, match="over 2 replicas across all workers"):
        training_processes(plan, TrainConfig(cpu_devices=1, strategy="multi-worker", batch_size=33), local_workers=2)


def test_own_worker_port_in_use_is_refused():
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        plan = build_plan(TrainConfig(cpu_devices=1))
        config = TrainConfig(cpu_devices=1, strategy="multi-worker", batch_size=32, task_index=0)
        with pytest.raises(InputError, match=f"port {port} on 127.0.0.1 is in use"):
            training_processes(plan, config, workers=f"127.0.0.1:{port},127.0.0.1:1")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"workers": "127.0.0.1:1"}, "need --strategy multi-worker"),
        ({"strategy": "multi-worker"}, "needs --workers"),
        ({"strategy": "multi-worker", "workers": "nohost", "local_workers": None}, "not host:port"),
        ({"strategy": "multi-worker", "workers": "127.0.0.1:1", "local_workers": 2}, "either --workers"),
        ({"strategy": "multi-worker", "workers": "127.0.0.1:1,127.0.0.1:2", "task_index": 5}, "--task-index 5"),
        ({"strategy": "parameter-server", "workers": "two"}, "a count"),
        ({"strategy": "parameter-server", "local_workers": 2}, "--local-workers is for"),
        ({"strategy": "multi-worker", "local_workers": 2, "ps": 1}, "--ps is for"),
    ],
)
def test_bad_cluster_options(kwargs, message):
    strategy = kwargs.pop("strategy", "mirrored")
    task_index = kwargs.pop("task_index", 0)
    config = TrainConfig(cpu_devices=1, strategy=strategy, batch_size=32, task_index=task_index)
    with pytest.raises(InputError, match=message):
        training_processes(build_plan(config), config, **kwargs)


def test_parameter_server_is_one_coordinator_process():
    config = TrainConfig(cpu_devices=1, strategy="parameter-server")
    (spec,) = training_processes(build_plan(config), config, workers="3", ps=2)
    assert (spec.config.ps_workers, spec.config.ps) == (3, 2)
    assert ["--ps", "2"] == spec.command()[spec.command().index("--ps") :][:2]


def test_tf_config_and_parsers():
    assert json.loads(tf_config(["a:1", "b:2"], 1)) == {
        "cluster": {"worker": ["a:1", "b:2"]},
        "task": {"type": "worker", "index": 1},
    }
    assert parse_workers("10.0.0.1:2222, 10.0.0.2:2222") == ["10.0.0.1:2222", "10.0.0.2:2222"]
    with pytest.raises(InputError, match="same address twice"):
        parse_workers("a:1,a:1")
    with pytest.raises(InputError, match="not host:port"):
        parse_workers("a:99999")
    assert parse_count_list("4,1,2,2") == [1, 2, 4]
    with pytest.raises(InputError):
        parse_count_list("1,x")
    with pytest.raises(InputError):
        parse_count_list("0,2")
    assert cuda_env([1, 0]) == {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": "1,0"}


def test_exit_descriptions_and_checkpoint_state(tmp_path: Path):
    assert describe_exit(-signal.SIGKILL) == "was killed by SIGKILL"
    assert describe_exit(3) == "exited with status 3"
    assert latest_checkpoint_step(tmp_path) is None
    (tmp_path / "checkpoint").write_text(
        'model_checkpoint_path: "ckpt-40"\nall_model_checkpoint_paths: "ckpt-20"\nall_model_checkpoint_paths: "ckpt-40"\n'
    )
    assert latest_checkpoint_step(tmp_path) == 40


def _sleeper() -> list[str]:
    return [sys.executable, "-c", "import time; time.sleep(60)"]


def test_a_killed_worker_is_named_and_the_others_are_stopped(tmp_path: Path):
    from gputopo.tf.distributed import run_processes, start_child

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-30"\n')
    children = [
        start_child(f"worker {i} (127.0.0.1:{1000 + i})", _sleeper(), {}, tmp_path / f"r{i}.json") for i in range(2)
    ]
    children[1].process.send_signal(signal.SIGKILL)
    with pytest.raises(TrainingFailed) as caught:
        run_processes(children, str(tmp_path))
    message = str(caught.value)
    assert "worker 1 (127.0.0.1:1001) was killed by SIGKILL" in message
    assert "last checkpoint is at step 30" in message and "--resume" in message
    assert children[0].process.poll() is not None  # the survivor was stopped, not left hanging


def test_a_child_error_result_becomes_the_same_error(tmp_path: Path):
    from gputopo.tf.distributed import run_processes, start_child

    result = tmp_path / "r.json"
    script = (
        "import json, sys; json.dump({'error': 'an image in d could not be decoded', 'error_type': 'InputError'},"
        f" open({str(result)!r}, 'w')); sys.exit(2)"
    )
    child = start_child("training process", [sys.executable, "-c", script], {}, result)
    with pytest.raises(InputError, match="could not be decoded"):
        run_processes([child], None)
    ok = start_child("training process", [sys.executable, "-c", "pass"], {}, tmp_path / "none.json")
    assert run_processes([ok], None) == [{}]


def test_workers_that_never_start_are_named_after_the_startup_timeout(tmp_path: Path):
    from gputopo.launch import free_local_ports
    from gputopo.tf.distributed import run_processes, start_child

    (silent_port,) = free_local_ports(1)
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        answering = f"127.0.0.1:{listening.getsockname()[1]}"
        child = start_child("worker 0", _sleeper(), {}, tmp_path / "r0.json")
        with pytest.raises(TrainingFailed, match=rf"^worker 127.0.0.1:{silent_port} does not answer after 0.5 s"):
            run_processes([child], None, startup_timeout_s=0.5, peers=[answering, f"127.0.0.1:{silent_port}"])
    assert child.process.returncode == -signal.SIGKILL  # not left waiting for a cluster that never forms


def test_startup_timeout_does_not_apply_once_started(tmp_path: Path):
    import time

    from gputopo.tf.distributed import run_processes, start_child, started_marker

    result = tmp_path / "r.json"
    script = f"import time, pathlib; pathlib.Path({str(started_marker(result))!r}).touch(); time.sleep(1.0)"
    child = start_child("worker 0", [sys.executable, "-c", script], {}, result)
    # The timeout counts from run_processes; wait for the child to have started first (a Python
    # start-up on a loaded machine can take longer than the timeout, which this test is not about).
    deadline = time.monotonic() + 30
    while not child.started and child.process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert child.started
    assert run_processes([child], None, startup_timeout_s=0.3, peers=["127.0.0.1:1"]) == [{}]


def test_gpus_of_several_hosts_are_refused_and_one_host_gets_its_own_numbers():
    # GB200 NVL72: 72 GPUs numbered across 18 hosts of 4; CUDA on each host counts its own from 0.
    with pytest.raises(InputError, match=r"span several hosts \(tray00, tray01\).*one host"):
        build_plan(TrainConfig(), gpus=8, machine="gb200-nvl72", numactl_path=None)
    with pytest.raises(InputError, match=r"--devices names GPUs 3,4 span several hosts"):
        build_plan(TrainConfig(), devices="3,4", machine="gb200-nvl72", numactl_path=None)
    second_host = build_plan(TrainConfig(), devices="5,4", machine="gb200-nvl72", numactl_path=None)
    assert second_host.gpus == [5, 4] and second_host.env["CUDA_VISIBLE_DEVICES"] == "1,0"
    one_host = build_plan(TrainConfig(), gpus=4, machine="gb200-nvl72", numactl_path=None)
    assert one_host.env["CUDA_VISIBLE_DEVICES"] == ",".join(str(g % 4) for g in one_host.gpus)


_CHILD_UNTIL_SIGNALLED = """
import pathlib, signal, sys, time
from gputopo.tf.distributed import stop_with_parent
received = []
def stop(signum, frame):
    received.append(signal.Signals(signum).name)
    time.sleep(0.5)  # time for a second signal, if any, to arrive
    pathlib.Path(sys.argv[1]).write_text(" ".join(received))
    sys.exit(130)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
stop_with_parent()
time.sleep(60)
"""

_PARENT = """
import sys
from pathlib import Path
from gputopo.tf.distributed import run_processes, start_child
tmp = Path(sys.argv[1])
child = start_child("training process", [sys.executable, "-c", sys.argv[2], str(tmp / "stopped-by")], {}, tmp / "r.json")
print(child.process.pid, flush=True)
run_processes([child], None)
"""


def _stopped_child(tmp_path: Path, parent_signal: int, whole_group: bool = False) -> tuple[int, str]:
    """Start a parent that runs one child, signal the parent (or, as a terminal's Ctrl-C does, its
    whole process group); return the parent's status and the signals that reached the child (the
    child must not outlive its parent)."""
    import os
    import subprocess
    import time

    parent = subprocess.Popen([sys.executable, "-c", _PARENT, str(tmp_path), _CHILD_UNTIL_SIGNALLED],
                              stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        child_pid = int(parent.stdout.readline())
        time.sleep(0.5)  # the child has installed its handlers
        if whole_group:
            os.killpg(parent.pid, parent_signal)
        else:
            parent.send_signal(parent_signal)
        parent.wait(timeout=20)
        deadline = time.monotonic() + 10
        while Path(f"/proc/{child_pid}").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        alive = Path(f"/proc/{child_pid}").exists()
        if alive:
            os.kill(child_pid, signal.SIGKILL)
        assert not alive, "the training child outlived its parent"
    finally:
        parent.kill()
        parent.wait()
    return parent.returncode, (tmp_path / "stopped-by").read_text()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and PR_SET_PDEATHSIG are Linux's")
def test_a_terminated_or_killed_parent_leaves_no_training_child_behind(tmp_path: Path):
    # SIGTERM (kill) or SIGHUP (terminal closed) to gputopo: forwarded as Ctrl-C, the child saves and stops.
    for parent_signal in (signal.SIGTERM, signal.SIGHUP):
        (tmp_path / "stopped-by").unlink(missing_ok=True)
        assert _stopped_child(tmp_path, parent_signal) == (0, "SIGINT")
    # SIGKILL cannot be caught: the child is told by the kernel (SIGTERM) that its parent died.
    (tmp_path / "stopped-by").unlink(missing_ok=True)
    assert _stopped_child(tmp_path, signal.SIGKILL) == (-signal.SIGKILL, "SIGTERM")


def test_ctrl_c_in_the_terminal_reaches_the_training_child_once(tmp_path: Path):
    # The terminal signals its whole foreground process group; the parent forwards Ctrl-C itself, so
    # a child in that group would get two SIGINTs, and a second one means "stop at once".
    assert _stopped_child(tmp_path, signal.SIGINT, whole_group=True) == (0, "SIGINT")


def test_local_workers_on_gpus_each_get_gpus_of_their_own():
    config = TrainConfig(strategy="multi-worker", batch_size=64)
    plan = build_plan(config, gpus=4, machine="dgx1", numactl_path=None)
    visible = plan.env["CUDA_VISIBLE_DEVICES"].split(",")
    specs = training_processes(plan, config, local_workers=2)
    shares = [spec.env["CUDA_VISIBLE_DEVICES"].split(",") for spec in specs]
    assert shares == [visible[:2], visible[2:]]  # not every worker on all four (each would take their memory)
    assert all(spec.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" for spec in specs)
    assert len(training_processes(plan, TrainConfig(strategy="multi-worker", batch_size=4), local_workers=4)) == 4
    with pytest.raises(InputError, match="--local-workers 3 cannot share out the 4 GPUs"):
        training_processes(plan, config, local_workers=3)
    with pytest.raises(InputError, match="does not split evenly over 4 replicas across all workers"):
        training_processes(plan, TrainConfig(strategy="multi-worker", batch_size=6), local_workers=2)


def test_a_tf_log_in_fastest_first_order_launches_the_gpus_recommend_names():
    """TF's ordinals 0,2 in this log are nvidia-smi's 1,2: the child must see what `recommend` prints."""
    from conftest import REPO

    from gputopo.analysis.recommend import recommend
    from gputopo.launch import TrainConfig, build_plan

    log = str(REPO / "tests" / "fixtures" / "tf_logs" / "tf15_edge_matrix_visible_order_differs.log")
    plan = build_plan(TrainConfig(batch_size=64), gpus=2, devices=None, from_file=None, machine=None, tf_log=log,
                      numactl_path=None)
    from gputopo.sources import load_topology

    best = recommend(load_topology(tf_log=log), 2).best
    assert plan.gpus == [0, 2]
    assert plan.env["CUDA_VISIBLE_DEVICES"] == best.cuda_visible_devices == "1,2"
