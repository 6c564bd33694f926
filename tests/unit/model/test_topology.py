"""model.topology: looking links up."""

import pytest
from linktable import cube_mesh_8

from gputopo.model import make_link


def test_link_lookup_is_symmetric_and_make_link_orders_ends():
    link = make_link(3, 1, "NV2")
    assert (link.a, link.b, link.nvlink_count) == (1, 3, 2)
    topo = cube_mesh_8()
    assert topo.link(0, 3) is topo.link(3, 0)
    assert topo.link(0, 3).type == "NV2"
    with pytest.raises(KeyError):
        topo.link(2, 2)
