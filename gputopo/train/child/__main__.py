"""``python -m gputopo.train.child <flags>``: the training child ``gputopo train`` starts."""

from gputopo.train.child.main import run_as_program

run_as_program()
