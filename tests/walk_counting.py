"""A probe for cost tests: a list that counts the walks over it, to check that code walks a large
input a few times rather than once per item."""

from __future__ import annotations


class WalkCountingList(list):
    """Counts each ``iter()`` over it in ``walks``, on the class: a test subclasses it (``class
    _CountedGpus(WalkCountingList): pass``) so that copies the code under test makes count too, and
    no other test's walks do."""

    walks = 0

    def __iter__(self):
        type(self).walks += 1
        return super().__iter__()
