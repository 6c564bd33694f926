"""``gputopo train``: the parent plans and supervises, TensorFlow trains only in child processes.

Parent (no TensorFlow, except ``--launcher slurm``, which asks TF's ``SlurmClusterResolver`` for the
cluster): ``config`` (the parent<->child contract), ``plan`` (GPUs, environment, NUMA binding, the
exact child commands), ``plan_file`` (a multi-host plan), ``cluster`` (worker addresses, ports,
``TF_CONFIG``), ``launchers`` and ``slurm`` (``--launcher tf-config|slurm``), ``checkpoints`` and
``checkpoint_lock``, ``supervise`` (start, watch and stop the children), ``netns`` and ``exposure``
(a local cluster's private network namespace, the gRPC ports a run opens).
Child (``python -m gputopo.train.child``): ``child`` (the synchronous loop), ``ps_child`` (the
parameter-server loop), ``common`` and ``report`` (what both loops share), ``strategy``, ``data``,
``models``.
"""
