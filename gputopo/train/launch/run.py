"""One local run of ``gputopo train``: lock the checkpoint folder, keep a local cluster off the
network (or say why not), show what will run, train; the lock and the private network last as long
as the run. The CLI hands in how to show things; no view is imported here."""

from __future__ import annotations

import contextlib
from typing import Any, Callable

from gputopo.train.checkpoints import check_checkpoint_dir_writable
from gputopo.train.config import TrainConfig
from gputopo.train.launch.plan import LaunchPlan, ProcessSpec

# Shown before training starts: the processes as they will run (in their namespace, if any), and a
# warning about exposed ports where there is one.
ShowStart = Callable[[list[ProcessSpec], "str | None"], None]


def run_locally(
    plan: LaunchPlan, processes: list[ProcessSpec], config: TrainConfig, show_start: ShowStart,
    allow_exposed: bool, lock_checkpoints: bool = True,
) -> dict[str, Any]:  # fmt: skip
    """Run ``processes`` to the end; returns the run's summary (``supervise.run_training``).

    ``lock_checkpoints`` is False for a multi-host task that is not the chief: the chief locks the
    shared folder, the others write beside it."""
    from gputopo.train.launch.checkpoint_lock import CheckpointLock
    from gputopo.train.launch.exposure import guard_network
    from gputopo.train.launch.supervise import run_training

    with contextlib.ExitStack() as stack:
        lock = None
        if config.checkpoint_dir is not None:
            check_checkpoint_dir_writable(config.checkpoint_dir)
            lock = stack.enter_context(CheckpointLock.acquire(config.checkpoint_dir)) if lock_checkpoints else None
        guard = guard_network(processes, allow_exposed_ports=allow_exposed)
        stack.callback(guard.close)
        if guard.isolated:
            plan.notes.append("the workers run in a private network namespace: their servers are reachable only from each other")
        show_start(guard.processes, guard.warning)
        return run_training(
            guard.processes, config, wrap=guard.wrap if guard.isolated else None, pass_fds=[lock.fd] if lock else []
        )
