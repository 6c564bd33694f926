"""Every real TensorFlow log of the corpus against an expert's reading of it (EXPECTED.json).

For each file: how many start-ups, how many GPUs, each pair the expert states (true/false exactly;
every pair the expert does not state must stay unknown), whether "can peer" is inferred, the PCI
bus ids, CUDA's peer limit, the best pair, and that no finding claims what the file does not show.
"""

from __future__ import annotations

import json

import pytest
from conftest import OWN_FIXTURES, corpus_known_gaps

from gputopo.analysis.recommend import recommend
from gputopo.analysis.causes.tf_crosscheck import tf_findings
from gputopo.sources.tf.tflog import (
    ERA_CUDA_PEER_LIMIT,
    ERA_TF0,
    ERA_TF12,
    ERA_TF15,
    ERA_TF25,
    ERA_TF_ABSL,
    parse_tf_log,
    peer_state,
    topology_from_tf_view,
)

CORPUS = OWN_FIXTURES / "corpus" / "tf_logs"
EXPECTED = json.loads((CORPUS / "EXPECTED.json").read_text())
# Logs gputopo does not read right yet (tests/fixtures/corpus/KNOWN_GAPS.md): checked as a whole by
# test_known_gap_is_still_open, left out of the per-check tests below.
KNOWN_GAPS = {name: why for name, why in corpus_known_gaps().items() if name.endswith(".log")}
READ = [name for name in sorted(EXPECTED) if name not in KNOWN_GAPS]
ERAS = {"none": None, "tf0": ERA_TF0, "tf1.2": ERA_TF12, "tf1.5": ERA_TF15, "tf2.5": ERA_TF25, "absl": ERA_TF_ABSL, "cuda-peer-limit": ERA_CUDA_PEER_LIMIT}


def _read(name: str):
    view = parse_tf_log((CORPUS / name).read_text(), name)
    topology = topology_from_tf_view(view)
    return view, topology, tf_findings(topology)


def test_every_corpus_log_has_an_expert_reading():
    assert sorted(p.name for p in CORPUS.glob("*.log")) == sorted(EXPECTED)
    assert len(EXPECTED) >= 30
    assert set(KNOWN_GAPS) <= set(EXPECTED)  # no stale line


@pytest.mark.parametrize("name", READ)
def test_reading_matches_the_expert(name):
    expected = EXPECTED[name]
    view, _, _ = _read(name)
    assert view.era == ERAS[expected["era"]]
    assert view.startups == expected["startups"]
    if expected["gpus"] is not None:  # what the log implies ("GPU:7" => 8), not the ordinals it names
        assert view.gpu_count == expected["gpus"]
    # Bus ids: the expert keys them by TensorFlow's GPU number (GPU:k), which is the CUDA ordinal
    # unless a rank narrowed TF to one GPU (device: 3 as GPU:0).
    bus = {str(d.tf_id if d.tf_id is not None else d.ordinal): d.pci_bus_id for d in view.devices if d.pci_bus_id}
    assert expected["bus_ids"].items() <= bus.items()
    assert view.peer_inferred is expected.get("peer_inferred", False)
    assert (view.too_many_peers is not None) is expected["too_many_peers"]
    assert sorted(view.enable_failed) == sorted(expected.get("enable_failed", []))


@pytest.mark.parametrize("name", READ)
def test_each_stated_pair_exactly_and_no_other_pair_guessed(name):
    stated = EXPECTED[name].get("peer", {})
    view, _, _ = _read(name)
    ordinals = sorted(d.ordinal for d in view.devices)
    for pos, a in enumerate(ordinals):
        for b in ordinals[pos + 1 :]:
            assert peer_state(view, a, b) is stated.get(f"{a}-{b}"), (a, b)
    named = {int(o) for pair in stated for o in pair.split("-")}
    assert named <= set(ordinals)


@pytest.mark.parametrize("name", READ)
def test_no_finding_claims_what_the_file_does_not_show(name):
    expected = EXPECTED[name]
    view, _, findings = _read(name)
    codes = {f.code for f in findings}
    messages = " ".join(f.message for f in findings)
    assert "socket" not in messages  # a log alone never shows sockets
    assert ("tf-too-many-peers" in codes) is expected["too_many_peers"]
    assert ("tf-log-startups" in codes) is (expected["startups"] > 1)
    assert ("inferred" in messages) is expected.get("peer_inferred", False)
    if not expected["cut"]:
        assert not codes & {"tf-log-cut", "tf-peer-unknown"}, messages
    if not expected.get("peer") or expected["too_many_peers"]:
        assert "tf-peer-groups" not in codes
        assert "cannot peer" not in messages


@pytest.mark.parametrize("name", [n for n in READ if EXPECTED[n]["best_pair"]])
def test_best_pair_is_one_the_expert_names(name):
    _, topology, _ = _read(name)
    best = recommend(topology, 2).groups[0].gpus
    assert best in EXPECTED[name]["best_pair"]


@pytest.mark.parametrize(
    "name", [pytest.param(n, marks=pytest.mark.xfail(strict=True, reason=why)) for n, why in sorted(KNOWN_GAPS.items())]
)
def test_known_gap_is_still_open(name):
    """Every check above, on a log listed in KNOWN_GAPS.md; once all pass, remove its line."""
    test_reading_matches_the_expert(name)
    test_each_stated_pair_exactly_and_no_other_pair_guessed(name)
    test_no_finding_claims_what_the_file_does_not_show(name)
    if EXPECTED[name]["best_pair"]:
        test_best_pair_is_one_the_expert_names(name)


def test_the_source_documents_case_reads_like_an_expert():
    _, _, findings = _read("tf0_cannot_enable_peer_only_4gpu.log")
    (groups,) = [f for f in findings if f.code == "tf-peer-groups"]
    assert groups.message.startswith(
        "TensorFlow: GPUs 0,1 and 2,3 can peer (inferred: TF logs only the pairs that cannot peer); the cross pairs cannot"
    )


def test_too_many_peers_says_which_gpus_and_what_to_do():
    _, _, findings = _read("cuda_too_many_peers_wrapped_10gpu.log")
    (limit,) = [f for f in findings if f.code == "tf-too-many-peers"]
    assert limit.severity == "warning"
    assert "0->9, 1->9, 2->9, 3->9" in limit.message and "GPU 0,1,2,3" in limit.message
    assert "limit of 8 peers" in limit.message and "at least 10 GPUs" in limit.message
    assert "at most 8 GPUs" in limit.fix and "CUDA_VISIBLE_DEVICES" in limit.fix
    _, _, findings = _read("cuda_too_many_peers_xla_ctx_retain_10gpu.log")
    (limit,) = [f for f in findings if f.code == "tf-too-many-peers"]
    assert "GPU 0,2" in limit.message and limit.gpus == [0, 2]
