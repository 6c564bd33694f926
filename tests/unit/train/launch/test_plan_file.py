"""train.launch.plan_file: a multi-host plan file read entry by entry; a wrong field or a file that
is not JSON is one line naming it (the plan fixture: conftest.py here)."""

import pytest
from cluster_plans import cluster_plan, write_plan

from gputopo.errors import InputError
from gputopo.train.launch.plan_file import load_cluster_plan


def test_a_plan_file_is_read_entry_by_entry(plan_path):
    plan = load_cluster_plan(plan_path)
    assert (plan.gpus, plan.gpus_per_host, plan.host_names, plan.first_port(), plan.port) == (8, 4, ["node1", "node2"], 12345, 12345)
    first, second = plan.hosts
    assert (first.task_index, first.gpus, first.env["NCCL_IB_HCA"]) == (0, [0, 1, 2, 3], "=mlx5_0,mlx5_1")
    assert (second.numactl, second.env["NCCL_SOCKET_IFNAME"]) == (["numactl", "--cpunodebind=1", "--membind=1"], "ens1f0")


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda p: p.update(schema="gputopo.topology/1"), r"schema is \"gputopo.topology/1\", not 'gputopo.cluster-plan/1'"),
        (lambda p: p.pop("hosts"), r"plan.json: hosts is missing$"),
        (lambda p: p.update(hosts=[]), r"hosts is empty$"),
        (lambda p: p["hosts"][1]["env"].pop("NCCL_IB_HCA") and p["hosts"][1].pop("env"), r"hosts\[1\]\.env is missing$"),
        (lambda p: p["hosts"][0]["gpus"].__setitem__(1, "one"), r"hosts\[0\]\.gpus\[1\] must be a GPU index"),
        (lambda p: p["hosts"][0]["env"].update(NCCL_IB_HCA=1), r"hosts\[0\]\.env\.NCCL_IB_HCA must be a string, got 1$"),
        (lambda p: p["hosts"][1].update(task_index=0), r"hosts\[1\]\.task_index 0 repeats hosts\[0\]'s$"),
        (lambda p: p["hosts"][0].update(task_index=True), r"hosts\[0\]\.task_index must be a whole number, got true$"),
        (lambda p: p["hosts"][0]["tf_config"]["cluster"].update(worker=["node1"]), r"worker\[0\] 'node1' is not host:port"),
    ],
)
def test_a_plan_with_a_wrong_field_is_one_line_naming_it(tmp_path, change, message):
    plan = cluster_plan(["node1", "node2"])
    change(plan)
    with pytest.raises(InputError, match=message):
        load_cluster_plan(write_plan(tmp_path / "plan.json", plan))


def test_a_plan_file_that_is_not_json_says_so(tmp_path):
    (tmp_path / "plan.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(InputError, match=r"^plan file .*plan.json is not JSON \("):
        load_cluster_plan(str(tmp_path / "plan.json"))
