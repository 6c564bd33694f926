"""The drawing's inferred tree (``views/svg_tree``): costs that a snapshot's counts set."""

from __future__ import annotations

from walk_counting import WalkCountingList

from gputopo.model import Gpu, Nic, NicLink, Topology
from gputopo.views.svg_tree import nic_items


class _CountedLinks(WalkCountingList):
    pass


def test_nics_find_their_nearest_gpus_in_one_walk_of_the_nic_links():
    """(Each NIC walked every NIC link: 4,096 NICs x 16 GPUs, a 5 MB snapshot, took 13 s to draw.)"""
    nics = [Nic(name=f"mlx5_{k}") for k in range(200)]
    links = _CountedLinks(NicLink(nic=f"mlx5_{k}", gpu=g, type="PIX" if g == k % 4 else "SYS")
                          for k in range(200) for g in range(4))
    topology = Topology(source="test", gpus=[Gpu(index=g) for g in range(4)], nics=nics, nic_links=links)
    items = nic_items(topology)
    assert [(item.name, item.nearest, item.path) for item in items[:5]] == [
        ("mlx5_0", [0], "PIX"), ("mlx5_1", [1], "PIX"), ("mlx5_2", [2], "PIX"), ("mlx5_3", [3], "PIX"), ("mlx5_4", [0], "PIX")]
    assert _CountedLinks.walks <= 2
