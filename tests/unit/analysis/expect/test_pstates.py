"""What a GPU's performance state says of its PCIe link speed: P0 the best it can train to, P8 and
lower power idle (a lowered link by design), P1-P7 and no state unknown; nothing else is a state."""

from __future__ import annotations

import pytest

from gputopo.analysis.expect import pstates


@pytest.mark.parametrize(("state", "reading"), [
    (0, pstates.TOP),
    *[(s, pstates.UNKNOWN) for s in range(1, 8)],  # P2 (CUDA on GeForce), P5: may lower the link or not
    *[(s, pstates.IDLE) for s in range(8, 16)],
    (None, pstates.UNKNOWN), (32, pstates.UNKNOWN), (16, pstates.UNKNOWN), (-1, pstates.UNKNOWN),
    (True, pstates.UNKNOWN), ("P0", pstates.UNKNOWN),  # a snapshot is checked for types only, not meaning
])
def test_each_state_reads_the_link_as_the_docstring_argues(state, reading):
    assert pstates.link_reading(state) == reading


def test_states_are_worded_as_nvidia_smi_prints_them():
    assert [pstates.word(s) for s in (0, 8, 15, None, 32)] == ["P0", "P8", "P15", "unknown", "unknown"]
    assert pstates.known(0) and not pstates.known(None) and not pstates.known(False)


@pytest.mark.parametrize(("gen", "width", "state", "below"), [
    ((4, 4), (16, 16), 0, None),  # at its max: nothing to say
    ((None, None), (None, None), 0, None),  # not known: nothing to say
    ((1, 4), (16, 16), 0, pstates.BELOW),  # slower at P0: trained down
    ((1, 4), (16, 16), 8, pstates.BELOW_IDLE),  # slower at P8: lowered by design
    ((1, 4), (16, 16), 2, pstates.BELOW),  # P2 cannot tell: shown as read
    ((1, 4), (16, 16), None, pstates.BELOW),
    ((4, 4), (8, 16), 8, pstates.BELOW),  # narrow: a fault in any state
    ((1, 4), (8, 16), 8, pstates.BELOW),
])
def test_a_link_below_its_max_is_by_design_only_when_slower_at_an_idle_state(gen, width, state, below):
    from gputopo.model import Gpu

    gpu = Gpu(index=0, pcie_gen_current=gen[0], pcie_gen_max=gen[1], pcie_width_current=width[0],
              pcie_width_max=width[1], performance_state=state)
    assert pstates.pcie_below(gpu) == below
