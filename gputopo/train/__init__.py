"""``gputopo train``: the parent plans and supervises, TensorFlow runs only in child processes.

Parent (no TensorFlow): ``config`` (the parent<->child contract), ``plan`` (GPUs, environment,
NUMA binding, the exact child commands), ``cluster`` (worker addresses, ports, ``TF_CONFIG``),
``checkpoints``, ``supervise`` (start, watch and stop the children).
Child (``python -m gputopo.train.child``): ``child`` (the synchronous loop), ``ps_child`` (the
parameter-server loop), ``common`` and ``report`` (what both loops share), ``strategy``, ``data``,
``models``.
"""
