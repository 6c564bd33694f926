"""gputopo.train.launch.plan: the plan from a recommendation, the child's exact command, the processes
of each strategy.

Pure Python: nothing here starts TensorFlow.
"""

from __future__ import annotations

import socket
import sys
from types import SimpleNamespace

import pytest
from linktable import cube_mesh_8, nvswitch, two_socket_4

from gputopo.analysis import with_findings
from gputopo.errors import InputError
from gputopo.sources import TopologyRequest, resolve
from gputopo.train.config import TrainConfig, check_batch_split
from gputopo.train.launch.plan import (
    build_plan,
    numactl_prefix,
    plan_from_devices,
    plan_from_group,
    training_processes,
)



def two_trays():
    """Two hosts of four GPUs in one NVSwitch domain, numbered 0-7 across both."""
    return nvswitch(8, "NV18", "5.0", gpu={"host": ["tray00"] * 4 + ["tray01"] * 4})

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
    assert command[3:6] == [sys.executable, "-m", "gputopo.train.child"]
    assert "--cross-device-ops" in command and command[command.index("--cross-device-ops") + 1] == "NcclAllReduce"
    assert spec.shell_line().startswith("CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA_VISIBLE_DEVICES=2,3,1,0 /usr/bin/numactl ")


def test_no_numactl_binding_without_a_common_node_or_without_numactl():
    assert numactl_prefix(None, "/usr/bin/numactl") == []
    assert numactl_prefix(0, None) == []
    assert numactl_prefix(0, "/bin/numactl") == ["/bin/numactl", "--cpunodebind=0", "--membind=0"]


def test_devices_override_on_a_two_socket_machine():
    topology = two_socket_4()  # GPUs 0,1 on NUMA node 0; 2,3 on node 1
    same_socket = plan_from_devices(topology, [3, 2], numactl_path="/usr/bin/numactl")
    assert same_socket.env["CUDA_VISIBLE_DEVICES"] == "3,2"  # the user's order is kept
    assert same_socket.numactl[1:] == ["--cpunodebind=1", "--membind=1"]
    across = plan_from_devices(topology, [0, 2], numactl_path="/usr/bin/numactl")
    assert across.numactl == [] and across.numa_node is None
    with pytest.raises(InputError, match="names GPU 7"):
        plan_from_devices(topology, [0, 7], None)
    with pytest.raises(InputError, match="twice"):
        plan_from_devices(topology, [1, 1], None)


def test_build_plan_uses_recommend():
    recommend_module = pytest.importorskip("gputopo.analysis.recommend")
    topology = cube_mesh_8()
    expected = recommend_module.recommend(topology, 4).groups[0]
    plan = build_plan(TrainConfig(), with_findings(cube_mesh_8()), gpus=4, numactl_path=None)
    assert sorted(plan.gpus) == sorted(expected.gpus)
    assert plan.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID"
    assert plan.cross_device_ops == expected.cross_device_ops


def test_build_plan_on_cpu_devices_hides_gpus_and_notes_the_gpu_choice():
    plan = build_plan(TrainConfig(cpu_devices=2), None, numactl_path="/usr/bin/numactl")
    assert plan.device_kind == "CPU" and plan.replicas == 2 and plan.env == {"CUDA_VISIBLE_DEVICES": ""}
    noted = build_plan(TrainConfig(cpu_devices=2), with_findings(two_socket_4()), devices="0,1", numactl_path=None)
    assert noted.device_kind == "CPU" and "GPUs 0,1" in noted.notes[0]
    with pytest.raises(InputError, match="either --gpus"):
        build_plan(TrainConfig(), with_findings(cube_mesh_8()), gpus=2, devices="0,1")
    with pytest.raises(InputError, match="only 8 GPUs"):
        build_plan(TrainConfig(), with_findings(cube_mesh_8()), gpus=9)


def test_batch_must_split_over_replicas():
    check_batch_split(64, 4)
    with pytest.raises(InputError, match=r"global batch 30 does not split evenly over 4 replicas.*--batch-size 32"):
        check_batch_split(30, 4)
    plan = build_plan(TrainConfig(cpu_devices=3), None)
    with pytest.raises(InputError, match="does not split evenly over 3"):
        training_processes(plan, TrainConfig(cpu_devices=3, batch_size=64))


def test_local_workers_get_distinct_free_loopback_ports():
    plan = build_plan(TrainConfig(cpu_devices=1), None)
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
        plan = build_plan(TrainConfig(cpu_devices=1), None)
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
        training_processes(build_plan(config, None), config, **kwargs)


def test_parameter_server_is_one_coordinator_process():
    config = TrainConfig(cpu_devices=1, strategy="parameter-server")
    (spec,) = training_processes(build_plan(config, None), config, workers="3", ps=2)
    assert (spec.config.ps_workers, spec.config.ps) == (3, 2)
    assert ["--ps", "2"] == spec.command()[spec.command().index("--ps") :][:2]


def test_gpus_of_several_hosts_are_refused_and_one_host_gets_its_own_numbers():
    # As on a GB200 NVL72: GPUs numbered across hosts of 4; CUDA on each host counts its own from 0.
    with pytest.raises(InputError, match=r"span several hosts \(tray00, tray01\).*one host"):
        build_plan(TrainConfig(), with_findings(two_trays()), gpus=8, numactl_path=None)
    with pytest.raises(InputError, match=r"--devices names GPUs 3,4 span several hosts"):
        build_plan(TrainConfig(), with_findings(two_trays()), devices="3,4", numactl_path=None)
    second_host = build_plan(TrainConfig(), with_findings(two_trays()), devices="5,4", numactl_path=None)
    assert second_host.gpus == [5, 4] and second_host.env["CUDA_VISIBLE_DEVICES"] == "1,0"
    one_host = build_plan(TrainConfig(), with_findings(two_trays()), gpus=4, numactl_path=None)
    assert one_host.env["CUDA_VISIBLE_DEVICES"] == ",".join(str(g % 4) for g in one_host.gpus)


def test_local_workers_on_gpus_each_get_gpus_of_their_own():
    config = TrainConfig(strategy="multi-worker", batch_size=64)
    plan = build_plan(config, with_findings(cube_mesh_8()), gpus=4, numactl_path=None)
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
    from gputopo.train.config import TrainConfig
    from gputopo.train.launch.plan import build_plan

    log = str(REPO / "tests" / "fixtures" / "tf_logs" / "tf15_edge_matrix_visible_order_differs.log")
    plan = build_plan(TrainConfig(batch_size=64), with_findings(resolve(TopologyRequest(tf_log=log))), gpus=2, devices=None, numactl_path=None)
    best = recommend(resolve(TopologyRequest(tf_log=log)), 2).best
    assert plan.gpus == [0, 2]
    assert plan.env["CUDA_VISIBLE_DEVICES"] == best.cuda_visible_devices == "1,2"

