"""A `bench-p2p --cpu-devices N --save` snapshot read back makes no false finding (issue 24)."""

from __future__ import annotations

from conftest import OWN_FIXTURES

SNAPSHOT = str(OWN_FIXTURES / "snapshots" / "bench_cpu4.json")


def test_logical_cpu_devices_are_not_gpus_of_different_models(cli):
    result = cli("scan", "--from", SNAPSHOT, "--json", "--fail-on", "warning")
    assert result.exit_code == 0, result.output
    assert "mixed-gpu-models" not in result.output


def test_recommend_does_not_call_the_snapshot_a_peering_only_source(cli):
    result = cli("recommend", "--from", SNAPSHOT, "-n", "2")
    assert result.exit_code == 0, result.output
    assert "only which GPUs can peer" not in result.output
