"""One budget of work per ``recommend`` call, shared by everything that searches.

Every loop of the recommendation whose length grows with the input counts its work here, in
*steps*: a node of the branch and bound (with the bound it computes, one step per pair of GPUs it
looks at), one GPU looked at by a depth-first ring search, one pair of GPUs summed for a group's
key, one link looked at while listing rings or looking for ring seeds. A step is about one pass of
an inner Python loop, so the budget bounds time, not just nodes: ``WORK_BUDGET`` steps take a few
seconds on one core whatever the size of the machine, the group or ``--alternatives``.

Searches ask ``exhausted`` at each of their steps and, once it is true, settle for the best found
so far (``stop``): the recommendation then says "search stopped after N steps; best found, not
proven". Work that must be done to give an answer at all (the advice for the groups already found)
is still counted, never refused, so ``spent`` may pass ``limit`` by a little.

The budget is five times what the hardest reference machine needs (the 72-GPU GB200 NVL72 at 68
GPUs: 2.4 million steps; every corpus capture and random 16-GPU topology, at every group size,
less): they keep their exact answers. ``benchmarks/recommend_worst_case.py`` prints the figures.
"""

from __future__ import annotations

WORK_BUDGET = 12_000_000  # steps per recommend call (a few seconds of one core)


class Budget:
    """Steps spent so far against ``limit``; ``stopped``: some search was cut short by it."""

    __slots__ = ("limit", "spent", "stopped", "stopped_after")

    def __init__(self, limit: int | None = None):
        self.limit = WORK_BUDGET if limit is None else limit
        self.spent = 0
        self.stopped = False
        self.stopped_after = 0  # the steps spent when a search was first cut short

    def spend(self, steps: int) -> None:
        self.spent += steps

    @property
    def left(self) -> int:
        return max(0, self.limit - self.spent)

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.limit

    def stop(self) -> None:
        """A search settled for the best found because the budget ran out."""
        if not self.stopped:
            self.stopped, self.stopped_after = True, self.spent
