"""The plan file has one schema: what recommend writes is what train reads, field for field."""

from __future__ import annotations

import json

import pytest

from gputopo.analysis.recommend.hosts import plan_hosts
from gputopo.errors import InputError
from gputopo.model.cluster_plan import PLAN_SCHEMA, ClusterPlan, plan_from_json
from gputopo.sources import TopologyRequest, resolve


def written_plan() -> ClusterPlan:
    hosts = [resolve(TopologyRequest(machine="dgx-h100", host=name)) for name in ("node1", "node2")]
    return plan_hosts(hosts, gpus=8, port=23456)


def test_what_recommend_writes_train_reads_back_unchanged():
    plan = written_plan()
    again = plan_from_json(plan.to_json(), "plan.json")
    assert again.to_dict() == plan.to_dict()
    assert again.path == "plan.json" and again.port == again.first_port() == 23456
    assert [h.host_gpus for h in again.hosts] == [8, 8] and again.host_names == ["node1", "node2"]
    assert "shape" not in plan.to_dict()["hosts"][0]  # in memory only


def test_a_plan_without_the_newer_keys_still_loads():
    data = written_plan().to_dict()
    for host in data["hosts"]:
        del host["host_gpus"]
    del data["reason"]
    plan = plan_from_json(json.dumps(data), "old.json")
    assert [h.host_gpus for h in plan.hosts] == [None, None] and plan.reason == ""


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda d: d.update(schema="gputopo.topology/1"), "not 'gputopo.cluster-plan/1'"),
        (lambda d: d["hosts"][0]["nics"].append({"name": "mlx5_0\n", "netdev": None, "path": "PIX", "gpus": [0]}),
         "hosts[0].nics[0].name: control character"),  # fmt: skip
        (lambda d: d["hosts"][0]["nics"].append({"name": "mlx5_0", "netdev": 3, "path": "PIX", "gpus": [0]}),
         "hosts[0].nics[0].netdev must be a string or null"),  # fmt: skip
        (lambda d: d["hosts"][1].update(host_gpus=True), "hosts[1].host_gpus must be a GPU count"),
        (lambda d: d["hosts"][1].update(gpus=[0, 99999]), "hosts[1].gpus[1] must be a GPU index"),
        (lambda d: d.update(reason=["x"]), "reason must be a string"),
    ],
)
def test_fields_are_checked_at_the_door(change, words):
    data = written_plan().to_dict()
    data["hosts"][0]["nics"] = []
    change(data)
    with pytest.raises(InputError, match=words.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(")):
        plan_from_json(json.dumps(data), "plan.json")


def test_schema_constant_is_the_files():
    assert json.loads(written_plan().to_json())["schema"] == PLAN_SCHEMA


@pytest.mark.parametrize(
    ("change", "words"),
    [
        # Review 2: a plan's env reached the training child: PYTHONPATH / LD_PRELOAD ran the plan's code.
        (lambda d: d["hosts"][0]["env"].update(PYTHONPATH="/tmp/evil"), r"env.PYTHONPATH: a plan sets only CUDA_\* and NCCL_\*"),
        (lambda d: d["hosts"][0]["env"].update(LD_PRELOAD="/x.so"), "env.LD_PRELOAD: a plan sets only"),
        (lambda d: d["hosts"][0]["env"].update(NCCL_SOCKET_IFNAME="==eth0,^lo"), "NCCL_SOCKET_IFNAME .* is not NCCL's list"),
        (lambda d: d["hosts"][0].update(cuda_visible_devices="0,1;touch x"), "is not a list of GPU numbers"),
        (lambda d: d["hosts"][0]["env"].update(CUDA_VISIBLE_DEVICES="7"), "is not the entry's cuda_visible_devices"),
        (lambda d: d["hosts"][1].update(host="node1"), r"hosts\[1\] uses GPU 0 of node1, which hosts\[0\] uses too"),
        (lambda d: d["hosts"][1].update(task_index=5), "task_index 5 is not a worker of this plan"),
        (lambda d: d.update(gpus_per_host=10**18), "must be GPU counts"),
    ],
)
def test_what_would_reach_the_child_is_checked(change, words):
    data = written_plan().to_dict()
    change(data)
    with pytest.raises(InputError, match=words):
        plan_from_json(json.dumps(data), "plan.json")


def test_a_nic_name_that_is_no_device_name_is_left_out_of_the_nccl_lists_and_said():
    hosts = [resolve(TopologyRequest(machine="dgx-h100", host=name)) for name in ("node1", "node2")]
    for nic in hosts[0].nics:
        nic.netdev = "^lo"
    plan = plan_hosts(hosts, gpus=8)
    first = plan.hosts[0]
    assert "NCCL_SOCKET_IFNAME" not in first.env and any("not a device name" in w for w in first.warnings)
    assert plan_from_json(plan.to_json(), "p.json").hosts[0].env == first.env


@pytest.mark.parametrize(
    ("name", "value"),
    [
        # Review 3: CUDA_* and NCCL_* still named libraries the child loads and files it writes.
        ("CUDA_INJECTION64_PATH", "/tmp/evil.so"),  # libcuda dlopens it: the plan's code runs as root
        ("CUDA_MPS_PIPE_DIRECTORY", "/tmp/evil"),  # CUDA talks to the plan's MPS server
        ("CUDA_CACHE_PATH", "/etc"),
        ("NCCL_NET_PLUGIN", "/tmp/evil.so"),  # NCCL dlopens it
        ("NCCL_TUNER_PLUGIN", "evil"),
        ("NCCL_PROFILER_PLUGIN", "evil"),
        ("NCCL_DEBUG_FILE", "/etc/shadow"),  # NCCL truncates it (root)
        ("NCCL_TOPO_DUMP_FILE", "/etc/passwd"),
        ("NCCL_GRAPH_DUMP_FILE", "/etc/passwd"),
        ("NCCL_CONF_FILE", "/tmp/evil.conf"),  # sets any NCCL variable, NCCL_NET_PLUGIN included
    ],
)
def test_a_plan_cannot_name_a_library_or_file_for_the_child(name, value):
    data = written_plan().to_dict()
    data["hosts"][0]["env"][name] = value
    with pytest.raises(InputError, match=f"env.{name}: .*names a file"):
        plan_from_json(json.dumps(data), "plan.json")


def test_a_plan_may_still_tune_nccl():
    data = written_plan().to_dict()
    data["hosts"][0]["env"].update(NCCL_DEBUG="INFO", NCCL_P2P_DISABLE="1", NCCL_IB_DISABLE="0", NCCL_P2P_DIRECT_DISABLE="1")
    assert plan_from_json(json.dumps(data), "plan.json").hosts[0].env["NCCL_DEBUG"] == "INFO"
