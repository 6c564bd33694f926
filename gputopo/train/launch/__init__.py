"""The parent side of ``gputopo train``: plans and supervises, never imports TensorFlow (an
import-linter contract in pyproject.toml; ``--launcher slurm`` is the one exception, named there).

``plan`` (GPUs, environment, NUMA binding, the exact child commands), ``plan_file`` (one host's
entry of a multi-host plan), ``launchers`` and ``slurm`` (``--launcher tf-config|slurm``),
``run`` (one local run: checkpoint lock, private network, supervision), ``supervise`` (start, watch
and stop the children), ``netns`` and ``exposure`` (a local cluster's private network namespace,
the gRPC ports a run opens), ``checkpoint_lock`` (one run per checkpoint folder).
"""
