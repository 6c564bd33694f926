"""Nothing exposed, without a namespace or TensorFlow: where the kernel refuses a private network
namespace a local cluster is refused unless --allow-exposed-ports (which names the open ports once);
cross-host workers are warned once; mirrored runs need no namespace. The real namespaces and the
real two-worker run are tests/system/test_security.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import assert_one_error_line

from gputopo.train.launch import netns
from gputopo.train.launch.netns import PrivateNetworkUnavailable


def _no_namespace(monkeypatch):
    def refused(cls=None, python=None):
        raise PrivateNetworkUnavailable("the kernel refused a private network namespace (Operation not permitted)")

    monkeypatch.setattr(netns.PrivateNetwork, "open", classmethod(refused))


def _no_training(monkeypatch, calls: list):
    import gputopo.train.launch.supervise as supervise

    def fake_run_training(processes, config, wrap=None, pass_fds=()):
        calls.append([spec.config for spec in processes])
        return {"schema": "gputopo.train/1", "status": "completed"}

    monkeypatch.setattr(supervise, "run_training", fake_run_training)
    monkeypatch.setattr("gputopo.views.train.render_summary", lambda summary: None)


@pytest.mark.parametrize(
    "args",
    [
        ["--strategy", "multi-worker", "--local-workers", "2", "--batch-size", "32"],
        ["--strategy", "parameter-server", "--workers", "2", "--ps", "1"],
    ],
)
def test_without_a_namespace_a_local_cluster_is_refused(cli, monkeypatch, args, tmp_path: Path):
    _no_namespace(monkeypatch)
    calls: list = []
    _no_training(monkeypatch, calls)
    result = cli("train", "--cpu-devices", "2", "--no-checkpoint", *args)
    line = assert_one_error_line(result, exit_code=3)
    assert "--allow-exposed-ports" in line and "Operation not permitted" in line, line
    assert calls == []  # nothing started


def test_allow_exposed_ports_runs_and_names_the_open_ports_once(cli, monkeypatch):
    _no_namespace(monkeypatch)
    calls: list = []
    _no_training(monkeypatch, calls)
    result = cli("train", "--cpu-devices", "2", "--no-checkpoint", "--strategy", "multi-worker",
                 "--local-workers", "2", "--batch-size", "32", "--allow-exposed-ports", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (configs,) = calls
    ports = [address.rsplit(":", 1)[1] for address in configs[0].workers]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert f"ports {', '.join(ports)}" in warnings[0] and "can run code in the trainer" in warnings[0]

    calls.clear()
    result = cli("train", "--cpu-devices", "2", "--no-checkpoint", "--strategy", "parameter-server",
                 "--allow-exposed-ports", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    (configs,) = calls
    addresses = configs[0].server_addresses
    assert len(addresses) == 3  # 2 workers and 1 parameter server, picked by the parent to be named
    assert f"ports {', '.join(a.rsplit(':', 1)[1] for a in addresses)}" in result.stderr


def test_a_cross_host_worker_is_warned_once_with_its_port(cli, monkeypatch):
    calls: list = []
    _no_training(monkeypatch, calls)
    result = cli("train", "--cpu-devices", "1", "--no-checkpoint", "--strategy", "multi-worker", "--batch-size", "32",
                 "--workers", "127.0.0.1:23456,10.0.0.2:2222", "--task-index", "0", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, result.stderr
    assert "port 23456 on every interface" in warnings[0] and "10.0.0.2:2222" in warnings[0]
    assert "can run code in the trainer" in warnings[0]


def test_mirrored_runs_open_no_server_and_need_no_namespace(monkeypatch):
    from gputopo.train.config import TrainConfig
    from gputopo.train.launch.exposure import guard_network
    from gputopo.train.launch.plan import ProcessSpec

    _no_namespace(monkeypatch)
    guard = guard_network([ProcessSpec("training process", TrainConfig(), {})])
    assert guard.network is None and guard.warning is None
