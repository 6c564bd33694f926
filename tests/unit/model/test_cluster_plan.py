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
