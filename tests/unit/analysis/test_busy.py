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


def test_a_tf_logs_short_memory_is_a_past_state_named_for_recommend():
    """Review 4: scan's tf-gpu-memory-short (GPU 6 got 1800 MB of 10481) reaches recommend's busy
    handling as weaker evidence: when the log was written, not now."""
    from conftest import OWN_FIXTURES

    from gputopo.analysis.busy import memory_held
    from gputopo.sources import TopologyRequest, resolve

    log = OWN_FIXTURES / "corpus" / "tf_logs" / "tf15_edge_matrix_two_islands_8gpu_1080ti.log"
    held = memory_held(resolve(TopologyRequest(tf_log=str(log))))
    assert list(held) == [6] and "1800 MB" in held[6] and "past state" in held[6]
    assert memory_held(nvswitch(4, "NV12")) == {}
