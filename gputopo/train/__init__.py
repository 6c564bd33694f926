"""``gputopo train``: the parent plans and supervises, TensorFlow trains only in child processes.

- ``train.launch`` — the parent (no TensorFlow): plans, multi-host plan files, launchers, the
  local run and its supervision, network isolation, the checkpoint lock.
- ``train.child`` — the training child (``python -m gputopo.train.child``): the loops, strategy,
  data, models.
- Shared by both: ``config`` (the parent<->child contract: every field a child flag),
  ``workers`` (worker addresses, ports, ``TF_CONFIG``), ``checkpoints`` (checkpoint folder rules;
  the child's ``tf.train.CheckpointManager`` is made with the ``tf`` it passes in).
"""
