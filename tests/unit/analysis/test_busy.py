"""Which GPUs to leave out: busy ones by policy, lost ones always, and unknown said as unknown."""

from __future__ import annotations

import pytest
from linktable import nvswitch

from gputopo.analysis.busy import BusyLimits, choose_skipped, lost_gpus
from gputopo.errors import InputError
from gputopo.model import Finding


def with_lost(gpu: int):
    topo = nvswitch(8)
    topo.add_finding(Finding("warning", "gpu-lost", f"GPU {gpu} fell off the bus (NVML: GPU is lost)", gpus=[gpu]))
    return topo


@pytest.mark.parametrize("policy", ["skip", "include", "free-only"])
def test_a_lost_gpu_is_left_out_whatever_the_policy_and_said(policy):
    """Review 2 (high): a GPU NVML calls lost was chosen, silently, even with --free-only."""
    skipped, _busy, notes = choose_skipped(with_lost(2), 4, [], [], BusyLimits(), policy)
    assert 2 in skipped and any(note.startswith("left out: GPU 2 is lost") for note in notes)


def test_a_required_lost_gpu_is_one_error():
    with pytest.raises(InputError, match="required GPU 2 is lost"):
        choose_skipped(with_lost(2), 4, [2], [], BusyLimits(), "skip")


def test_free_only_without_live_state_says_it_cannot_tell():
    """Review 2: --free-only passed silently on a source with no live state (text, --machine)."""
    skipped, busy, notes = choose_skipped(nvswitch(8), 4, [], [], BusyLimits(), "free-only")
    assert (skipped, busy) == ([], {}) and any("whether the GPUs are free is not known" in n for n in notes)
    assert lost_gpus(nvswitch(8)) == {}
