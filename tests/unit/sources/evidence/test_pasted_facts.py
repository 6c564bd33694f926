from gputopo.sources.evidence.pasted_facts import MAX_FACTS, PastedFacts


def test_keep_is_bounded():
    facts = PastedFacts()
    for n in range(MAX_FACTS + 5):
        facts.keep(facts.env, n)
    assert len(facts.env) == MAX_FACTS
