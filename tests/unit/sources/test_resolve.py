"""The resolver: a TopologyRequest becomes one host's topology, or one per host."""

from __future__ import annotations

import json

import pytest
from conftest import SHARED_FIXTURES

from gputopo.errors import InputError, NvmlUnavailable
from gputopo.model import TfView
from gputopo.sources import TopologyRequest, resolve, resolve_hosts

DGX1 = str(SHARED_FIXTURES / "topo" / "dgx1_v100_8gpu_mlx5.txt")
TF0_LOG = str(SHARED_FIXTURES / "tf_logs" / "tf0_gpu_init_cannot_enable_peer_4gpu.log")


def host_snapshot(tmp_path, name: str, machine: str = "dgx1") -> str:
    topology = resolve(TopologyRequest(machine=machine, host=name))
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(topology.to_dict()))
    return str(path)


def test_a_machine_is_a_reference_machine_with_the_host_given():
    topology = resolve(TopologyRequest(machine="dgx1", host="n1"))
    assert topology.is_reference and topology.host == "n1" and len(topology.gpus) == 8


def test_several_files_of_one_host_are_one_topology(tmp_path):
    a = host_snapshot(tmp_path, "node1")
    topologies = resolve_hosts(TopologyRequest(from_files=(a, DGX1)))
    assert len(topologies) == 1 and topologies[0].host == "node1"


def test_snapshots_of_several_hosts_are_several_topologies_in_order(tmp_path):
    a, b = host_snapshot(tmp_path, "node1"), host_snapshot(tmp_path, "node2", "two-socket-4gpu")
    assert [t.host for t in resolve_hosts(TopologyRequest(from_files=(b, a)))] == ["node2", "node1"]


def test_one_host_commands_refuse_several_hosts_and_point_at_the_plan(tmp_path):
    a, b = host_snapshot(tmp_path, "node1"), host_snapshot(tmp_path, "node2")
    with pytest.raises(InputError, match="snapshots of 2 hosts .*--save plan.json.*train --launcher slurm --plan"):
        resolve(TopologyRequest(from_files=(a, b)))


@pytest.mark.parametrize("extra", [{"host": "x"}, {"tf_log": TF0_LOG}])
def test_one_host_options_with_several_hosts_are_refused(tmp_path, extra):
    a, b = host_snapshot(tmp_path, "node1"), host_snapshot(tmp_path, "node2")
    with pytest.raises(InputError, match="is for one host"):
        resolve_hosts(TopologyRequest(from_files=(a, b), **extra))


def test_a_tf_log_joins_the_topology_and_replaces_a_saved_one(tmp_path):
    topology = resolve(TopologyRequest(machine="two-socket-4gpu", tf_log=TF0_LOG))
    assert topology.tf is not None and topology.tf.source.endswith("tf0_gpu_init_cannot_enable_peer_4gpu.log")


def test_without_nvml_a_tf_view_alone_is_the_topology(monkeypatch):
    from gputopo.sources.host import nvml

    def no_driver():
        raise NvmlUnavailable("no NVIDIA driver")

    monkeypatch.setattr(nvml, "probe", no_driver)
    topology = resolve(TopologyRequest(tf_log=TF0_LOG))
    assert topology.source == "tf-log" and "tf-log-alone" in {n.code for n in topology.reading_notes}
    # TensorFlow started now (scan --tf) takes the same road, with the view handed in
    view = resolve(TopologyRequest(tf_log=TF0_LOG)).tf
    assert isinstance(view, TfView)
    live = resolve(TopologyRequest(tf_now=True), tf_now=lambda: view)
    assert live.tf is view and "tf-log-alone" in {n.code for n in live.reading_notes}


def test_without_a_source_this_host_is_probed(monkeypatch):
    from gputopo.model import Topology
    from gputopo.sources.host import nvml

    monkeypatch.setattr(nvml, "probe", lambda: Topology(source="nvml"))
    assert resolve(TopologyRequest(host="me")).host == "me"
