"""What the order of TF 0.x-1.4's "cannot peer" lines proves (gputopo/sources/tf/tflog_order.py): TF
walks every ordered pair source by source and logs only those that cannot peer, so pairs it passed
without a line could peer; made only where the lines allow no other reading."""

from __future__ import annotations

import pytest

from gputopo.analysis.notes.reading_notes import note_findings
from gputopo.sources.tf.tflog import parse_tf_log, peer_state

PREFIX = "2017-10-06 10:22:22.441548: I tensorflow/core/common_runtime/gpu/gpu_device.cc:{n}] "


def _found(k: int) -> list[str]:
    return [PREFIX.format(n=955) + f"Found device {k} with properties: ", "name: Tesla P100-SXM2-16GB",
            "major: 6 minor: 0 memoryClockRate (GHz) 1.4805", f"pciBusID 0000:{k + 4:02x}:00.0",
            "Total memory: 15.89GiB", "Free memory: 15.61GiB"]


def _denied(i: int, j: int) -> str:
    return PREFIX.format(n=847) + f"Peer access not supported between device ordinals {i} and {j}"


CREATING = PREFIX.format(n=1045) + "Creating TensorFlow device (/gpu:0) -> (device: 0, name: Tesla P100, pci bus id: 0000:04:00.0)"
# Two islands {0,1} and {2,3}: every cross pair cannot peer, in TF's walk order.
CROSS = [(0, 2), (0, 3), (1, 2), (1, 3), (2, 0), (2, 1), (3, 0), (3, 1)]


def _log(gpus: int, pairs: list[tuple[int, int]], tail: list[str] = ()) -> str:
    lines = [line for k in range(gpus) for line in _found(k)]
    return "\n".join([*lines, *(_denied(i, j) for i, j in pairs), *tail]) + "\n"


def test_a_log_cut_inside_the_walk_proves_the_pairs_passed_and_leaves_the_rest_unknown():
    view = parse_tf_log(_log(4, CROSS[:4]), "cut.log")  # cut after 1->3: sources 2 and 3 not seen
    assert view.peer_inferred
    assert view.peer[0][1] is True and view.peer[1][0] is True  # passed without a line
    assert view.peer[2][3] is None and view.peer[3][2] is None  # after the cut
    assert peer_state(view, 0, 1) is True and peer_state(view, 2, 3) is None and peer_state(view, 0, 2) is False
    words = [f.message for f in note_findings(view.reading_notes)]
    assert any("inferred from the order" in w and "cut after 1->3" in w and "number order" in w for w in words)
    assert any("whether 2-3 can peer is unknown" in w for w in words)


def test_a_gpu_that_can_peer_with_every_other_is_never_named_and_still_inferred():
    """GPU 3 reaches every peer, so no line names it: the whole-log rule cannot infer, the order can."""
    pairs = [(0, 2), (1, 2), (2, 0), (2, 1)]
    view = parse_tf_log(_log(4, pairs, [CREATING]), "full.log")
    assert view.peer_inferred
    assert all(peer_state(view, 3, other) is True for other in (0, 1, 2))
    assert peer_state(view, 0, 1) is True and peer_state(view, 0, 2) is False


@pytest.mark.parametrize("damage", ["swapped", "interleaved", "not-after-listing", "ignored", "ordinal-too-big"])
def test_lines_that_allow_another_reading_infer_nothing(damage):
    pairs = list(CROSS[:4])
    extra_before: list[str] = []
    log_lines = _log(4, pairs).splitlines()
    first = 4 * 6  # the first "cannot peer" line
    if damage == "swapped":
        log_lines[first], log_lines[first + 1] = log_lines[first + 1], log_lines[first]
    elif damage == "interleaved":  # another TF line between two of the walk's lines: one may be lost
        log_lines.insert(first + 2, PREFIX.format(n=100) + "something else")
    elif damage == "not-after-listing":
        log_lines.insert(first, PREFIX.format(n=100) + "something else")
    elif damage == "ignored":
        extra_before = [PREFIX.format(n=1000) + "Ignoring visible gpu device (device: 5, name: GRID K520, "
                        "pci bus id: 0000:00:03.0) with Cuda compute capability 3.0."]
    elif damage == "ordinal-too-big":
        log_lines[first + 3] = _denied(1, 4)  # GPU 4 past the listing's last device (3)
    view = parse_tf_log("\n".join(extra_before + log_lines) + "\n", "damaged.log")
    assert not view.peer_inferred
    assert view.peer[0][1] is None and view.peer[1][0] is None


def test_the_whole_walk_seen_to_its_end_infers_every_unnamed_pair():
    view = parse_tf_log(_log(4, CROSS, [CREATING]), "full.log")
    assert view.peer_inferred and peer_state(view, 0, 1) is True and peer_state(view, 2, 3) is True
