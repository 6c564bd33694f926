"""Fixtures of the launcher tests: a two-host plan file as `gputopo recommend --save` writes it."""

import pytest
from cluster_plans import cluster_plan, write_plan


@pytest.fixture
def plan_path(tmp_path):
    return write_plan(tmp_path / "plan.json", cluster_plan(["node1", "node2"]))
