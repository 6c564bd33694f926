"""TF 0.x-1.4 'cannot peer' lines alone: infer the unnamed pairs only when every GPU is named on both
sides, say so, and never rank a pair the log says cannot peer above one it does not name; headerless
matrices are read."""

from __future__ import annotations

import re

import pytest
from conftest import OWN_FIXTURES

from gputopo.analysis.causes.tf_crosscheck import peer_group_summary, tf_findings
from gputopo.analysis.recommend import recommend
from gputopo.sources.tf.tflog import parse_tf_log, peer_state, peer_word, topology_from_tf_view

CORPUS = OWN_FIXTURES / "corpus" / "tf_logs"
OWN_LOGS = OWN_FIXTURES / "tf_logs"
EIGHT_LINES = (CORPUS / "tf0_cannot_enable_peer_only_4gpu.log").read_text()


def _renumbered(text: str, mapping: dict[int, int]) -> str:
    return re.sub(r"ordinal (\d+)", lambda m: f"ordinal {mapping[int(m.group(1))]}", text)


def test_eight_lines_infer_the_unnamed_pairs_and_say_so():
    view = parse_tf_log(EIGHT_LINES, "train.log")
    assert view.peer_inferred
    assert peer_state(view, 0, 1) is True and peer_state(view, 2, 3) is True
    assert all(peer_state(view, a, b) is False for a in (0, 1) for b in (2, 3))
    topology = topology_from_tf_view(view)
    assert {(l.a, l.b): l.p2p_read for l in topology.links}[(0, 1)] == "ok"
    assert peer_word(view, 1, 3) == "NS"
    assert [g.gpus for g in recommend(topology, 2).groups[:2]] == [[0, 1], [2, 3]]


def test_renumbered_ordinals_pick_a_pair_that_can_peer():
    # 0<->2 and 1<->3 can peer: the log names 0-1, 0-3, 1-2, 2-3 (both ways).
    view = parse_tf_log(_renumbered(EIGHT_LINES, {0: 0, 1: 2, 2: 1, 3: 3}), "train.log")
    assert view.peer_inferred and peer_state(view, 0, 2) is True and peer_state(view, 0, 1) is False
    assert recommend(topology_from_tf_view(view), 2).groups[0].gpus in ([0, 2], [1, 3])
    assert peer_group_summary(view).startswith("GPUs 0,2 and 1,3 can peer (inferred")


@pytest.mark.parametrize("keep", [3, 5])
def test_a_cut_log_infers_nothing_and_never_ranks_a_denied_pair_first(keep):
    lines = _renumbered(EIGHT_LINES, {0: 0, 1: 2, 2: 1, 3: 3}).splitlines()[:keep]
    view = parse_tf_log("\n".join(lines), "cut.log")
    assert not view.peer_inferred
    unknown = [(a, b) for a in range(4) for b in range(a + 1, 4) if peer_state(view, a, b) is None]
    assert unknown  # what the cut log does not say stays unknown
    best = recommend(topology_from_tf_view(view), 2).groups[0].gpus
    assert peer_state(view, *best) is not False
    findings = {f.code: f for f in tf_findings(topology_from_tf_view(view))}
    assert "TensorFlow logs only the pairs that cannot peer" in findings["tf-peer-unknown"].message
    assert "is unknown" in findings["tf-peer-unknown"].message
    assert "no pair can peer" not in findings["tf-peer-groups"].message


def test_losing_only_the_last_line_loses_one_direction_not_the_conclusion():
    full = parse_tf_log(EIGHT_LINES, "full.log")
    view = parse_tf_log("\n".join(EIGHT_LINES.splitlines()[:7]), "cut.log")  # 3->1 lost; 1->3 still there
    states = [[peer_state(v, a, b) for a in range(4) for b in range(4)] for v in (full, view)]
    assert view.peer_inferred and states[0] == states[1]


def test_a_matrix_states_facts_no_inference_needed():
    view = parse_tf_log((CORPUS / "tf12_peer_not_supported_2gpu_1080ti.log").read_text(), "log")
    assert not view.peer_inferred and peer_state(view, 0, 1) is False


@pytest.mark.parametrize(
    "name",
    ["tf15_edge_matrix_no_header_8gpu_1080ti.log", "tf15_edge_matrix_rows_only_8gpu_1080ti.log"],
)
def test_headerless_and_titleless_8gpu_matrices_keep_all_rows(name):
    view = parse_tf_log((OWN_LOGS / name).read_text(), name)
    whole = parse_tf_log((CORPUS / "tf15_edge_matrix_two_islands_8gpu_1080ti.log").read_text(), "whole")
    assert len(view.peer) == 8 and view.peer == whole.peer
    assert view.reading_notes[0].facts["cuts"] == [{"cut": "matrix-header", "line": 3, "columns": [0, 7]}]  # no header line


def test_headerless_matrix_with_fewer_created_lines_than_rows():
    name = "tf15_edge_matrix_no_header_4gpu_2080ti_cut.log"
    view = parse_tf_log((OWN_LOGS / name).read_text(), name)
    assert [d.ordinal for d in view.devices] == [0, 1, 2, 3]
    assert all(peer_state(view, a, b) is False for a in range(4) for b in range(a + 1, 4))
    assert [d.pci_bus_id for d in view.devices] == ["0000:05:00.0", "0000:06:00.0", None, None]
    assert view.reading_notes[0].facts["cuts"][-1] == {"cut": "not-created", "gpus": [2, 3]}  # the log ends before


_ROWS_3_TO_9 = "".join(
    f"2017-11-21 13:54:16.7366{k}: I tensorflow/core/common_runtime/gpu/gpu_device.cc:1061] {k}:   Y Y Y Y Y Y Y Y Y Y \n"
    for k in range(3, 10)
)


def test_rows_of_a_matrix_whose_top_was_cut_are_read():
    """TF's own matrix rows (gpu_device.cc) with no title, header or first rows: each row k with more
    than k entries is a row of the matrix; its width gives the GPU count, the lost rows stay unknown."""
    view = parse_tf_log(_ROWS_3_TO_9, "rows.log")
    assert view.gpu_count == 10
    assert peer_state(view, 0, 3) is True and peer_state(view, 8, 9) is True
    assert peer_state(view, 0, 1) is None and peer_state(view, 1, 2) is None  # their rows are not there
    cuts = [c for n in view.reading_notes if n.code == "tf-log-cut" for c in n.facts["cuts"]]
    assert {"cut": "matrix-rows", "line": 1, "gpus": [0, 1, 2]} in cuts
    assert recommend(topology_from_tf_view(view), 2).groups[0].gpus not in ([0, 1], [0, 2], [1, 2])


@pytest.mark.parametrize("text", [
    "3:   Y Y Y Y Y Y Y Y Y Y\n4:   Y Y Y Y Y Y Y Y Y Y\n",  # no TF prefix: any "N: Y" text
    "I tensorflow/core/common_runtime/gpu/gpu_device.cc:1061] 3:   Y Y\n",  # row 3 of a 2-wide matrix: not one
    "I tensorflow/core/kernels/other_op.cc:12] 3:   Y Y Y Y\n",  # another file's line
])
def test_a_stray_row_still_begins_no_matrix(text):
    with pytest.raises(Exception, match="no GPU lines"):
        parse_tf_log(text, "stray.log")
