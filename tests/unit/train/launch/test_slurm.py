"""train.launch.slurm: which plan entry is this Slurm task's, the addresses TensorFlow's Slurm
resolver will use, and the sbatch script of a dry run. The real Slurm run is
tests/system/test_slurm.py."""

import pytest
from cluster_plans import cluster_plan, slurm_env, write_plan

from gputopo.errors import InputError
from gputopo.train.config import TrainConfig
from gputopo.train.launch.plan_file import load_cluster_plan
from gputopo.train.launch.slurm import SLURM_VARIABLES, expected_cluster, sbatch_script, slurm_entry, slurm_task


@pytest.mark.parametrize("missing", SLURM_VARIABLES)
def test_a_missing_slurm_variable_is_named(missing):
    env = slurm_env("node1", 0, 0)
    del env[missing]
    with pytest.raises(InputError, match=rf"^{missing} is not set: --launcher slurm runs as a task of a Slurm job step"):
        slurm_task(env)


def test_a_slurm_number_that_is_not_one_is_named():
    with pytest.raises(InputError, match=r"^SLURM_LOCALID is 'x', not a number$"):
        slurm_task({**slurm_env("node1", 0, 0), "SLURM_LOCALID": "x"})


def test_each_node_takes_its_entries_by_slurm_localid(tmp_path):
    plan = load_cluster_plan(write_plan(tmp_path / "plan.json", cluster_plan(["n1", "n1", "n2"])))
    picked = [slurm_entry(plan, slurm_task(slurm_env(node, procid, localid, "n[1-2]", "2,1", 3))).task_index
              for procid, (node, localid) in enumerate([("n1", 0), ("n1", 1), ("n2", 0)])]  # fmt: skip
    assert picked == [0, 1, 2]
    with pytest.raises(InputError, match=r"^task 3 is task 2 on n2, but .*plan.json has one entry for n2; start 1 task"):
        slurm_entry(plan, slurm_task(slurm_env("n2", 3, 1, "n[1-2]", "2(x2)", 4)))


def test_a_task_on_a_host_not_in_the_plan_is_one_line(plan_path):
    plan = load_cluster_plan(plan_path)
    with pytest.raises(InputError) as caught:
        slurm_entry(plan, slurm_task(slurm_env("node3", 1, 0)))
    assert str(caught.value) == f"task 1 runs on node3, which is not in {plan_path} (hosts: node1, node2)"


def test_the_dry_run_predicts_the_resolvers_addresses_and_prints_the_sbatch_script(tmp_path):
    path = write_plan(tmp_path / "plan.json", cluster_plan(["node2", "node1", "node1"], port=2222))
    plan = load_cluster_plan(path)
    workers, placed = expected_cluster(plan, 2222)
    assert workers == ["node1:2222", "node1:2223", "node2:2222"]  # by node name, as SlurmClusterResolver lists them
    assert [(e.host, localid, index) for e, localid, index in placed] == [("node2", 0, 2), ("node1", 0, 0), ("node1", 1, 1)]
    script = sbatch_script(plan, TrainConfig(cpu_devices=1, steps_per_epoch=4, checkpoint_dir="/shared/ckpt"), 2222)
    assert "#SBATCH --nodes=2\n#SBATCH --nodelist=node2,node1\n#SBATCH --ntasks=3\n" in script
    assert "gRPC port(s) 2222-2223 must be open between these nodes and closed to everyone else" in script
    assert script.endswith(
        f"srun --kill-on-bad-exit=1 gputopo train --launcher slurm --plan {path} --port 2222 --steps-per-epoch 4 "
        "--cpu-devices 1 --checkpoint-dir /shared/ckpt\n"
    )
