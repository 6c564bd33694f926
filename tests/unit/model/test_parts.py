"""model.parts: what a link's P2P words say."""

import pytest

from gputopo.model import make_link


@pytest.mark.parametrize(
    ("read", "write", "expected"),
    [("ok", "ok", True), ("ok", None, True), (None, "ok", True), ("ok", "NS", False), ("TNS", None, False),
     (None, "DR", False), (None, None, None)],
)
def test_can_peer_judges_by_the_capabilities_known(read, write, expected):
    """A `nvidia-smi topo -p2p w` matrix alone (read unknown) must not read as 'cannot peer'."""
    assert make_link(0, 1, "PIX", p2p_read=read, p2p_write=write).can_peer is expected
