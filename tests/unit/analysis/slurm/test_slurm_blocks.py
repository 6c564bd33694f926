"""topology.conf blocks: one per NVLink domain (fabric ids, NVLinks between hosts), else per host."""

import pytest
from linktable import nvl72, pcie_8
from walk_counting import WalkCountingList

from gputopo.analysis.slurm.slurm_blocks import block_topology
from gputopo.errors import InputError


def host(name, **gpu):
    return pcie_8(host=name, gpu=gpu)


def test_hosts_with_no_fabric_ids_are_one_block_each_and_said():
    result = block_topology([host("node1"), host("node2")])
    assert [(b.name, b.nodes) for b in result.blocks] == [("b1", ["node1"]), ("b2", ["node2"])]
    assert result.sizes == [1]
    assert any("one block each" in note for note in result.notes)


def test_hosts_sharing_a_fabric_cluster_and_clique_are_one_block():
    uuid = "4a7d5c0e-1111-2222-3333-444455556666"
    result = block_topology([
        host("n1", fabric_cluster_uuid=uuid, fabric_clique_id=1),
        host("n2", fabric_cluster_uuid=uuid, fabric_clique_id=1),
        host("n3", fabric_cluster_uuid=uuid, fabric_clique_id=2),
        host("n4", fabric_cluster_uuid=uuid, fabric_clique_id=2),
    ])
    assert [b.nodes for b in result.blocks] == [["n1", "n2"], ["n3", "n4"]]
    assert result.sizes == [2]
    assert "clique 1" in result.blocks[0].why


def test_a_zero_cluster_uuid_says_nothing():
    zero = "00000000-0000-0000-0000-000000000000"
    result = block_topology([host("n1", fabric_cluster_uuid=zero, fabric_clique_id=0),
                             host("n2", fabric_cluster_uuid=zero, fabric_clique_id=0)])
    assert [b.nodes for b in result.blocks] == [["n1"], ["n2"]]


def test_a_rack_read_as_one_topology_is_one_block():
    result = block_topology([nvl72(trays=18)])
    assert len(result.blocks) == 1
    assert result.blocks[0].nodes == [f"tray{i:02d}" for i in range(18)]
    assert result.sizes == [18]


def test_a_host_without_a_name_or_twice_is_refused():
    with pytest.raises(InputError, match="without a host name"):
        block_topology([pcie_8()])
    with pytest.raises(InputError, match="given twice"):
        block_topology([host("n1"), host("n1")])
    with pytest.raises(InputError, match="not a Slurm node name"):
        block_topology([host("n1\nBlockName=x")])


class _CountedGpus(WalkCountingList):
    pass


def test_one_snapshot_of_many_one_gpu_hosts_walks_its_gpus_a_few_times_not_once_per_host():
    """(Each host walked every GPU for its fabric ids: a snapshot of 4,096 one-GPU hosts took 3 s.)"""
    from gputopo.model import Gpu, Topology

    uuid = "4a7d5c0e-1111-2222-3333-444455556666"
    gpus = _CountedGpus(Gpu(index=k, host=f"n{k}", fabric_cluster_uuid=uuid, fabric_clique_id=k % 2) for k in range(300))
    result = block_topology([Topology(source="test", gpus=gpus)])
    assert [len(b.nodes) for b in result.blocks] == [150, 150]
    assert _CountedGpus.walks < 10
