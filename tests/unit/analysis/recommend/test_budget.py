"""recommend.budget: one count of steps per call, and when it says a search was cut short."""

from gputopo.analysis.recommend.budget import WORK_BUDGET, Budget


def test_a_budget_counts_steps_and_says_when_they_run_out():
    budget = Budget(10)
    assert budget.limit == 10 and budget.left == 10 and not budget.exhausted
    budget.spend(7)
    assert budget.left == 3 and not budget.exhausted
    budget.spend(5)
    assert budget.exhausted and budget.left == 0 and budget.spent == 12
    assert Budget().limit == WORK_BUDGET


def test_stop_keeps_the_steps_spent_when_a_search_was_first_cut_short():
    budget = Budget(5)
    budget.spend(6)
    assert not budget.stopped
    budget.stop()
    budget.spend(100)  # the advice for the groups found still counts
    budget.stop()
    assert budget.stopped and budget.stopped_after == 6 and budget.spent == 106
