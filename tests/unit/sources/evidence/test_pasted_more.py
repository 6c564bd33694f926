from gputopo.sources.evidence.pasted_evidence import PastedEvidence
from gputopo.sources.evidence.pasted_more import MoreState, finish_more, scan_more


def test_a_docker_run_cut_in_its_continuation_is_read_at_the_end():
    evidence, state = PastedEvidence(), MoreState()
    assert scan_more(evidence, "docker run --gpus all \\", 1, state)
    assert evidence.facts.docker_runs == []
    finish_more(evidence, state)
    assert [r.line for r in evidence.facts.docker_runs] == [1]


def test_lines_of_no_kind_are_left():
    assert not scan_more(PastedEvidence(), "  ACSCtl: SrcValid+ TransBlk-", 1, MoreState())
