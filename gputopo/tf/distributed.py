"""Strategies beyond one process, and the launcher that runs and watches the training processes.

- ``make_strategy``: MirroredStrategy on this process's devices, or MultiWorkerMirroredStrategy
  with a ``TF_CONFIG`` built from ``--workers`` / ``--task-index`` (synchronous all-reduce across
  processes). The parent enforces the start-up timeout and names the workers that do not answer.
- ``train_parameter_server``: asynchronous SGD with ParameterServerStrategy and a
  ``ClusterCoordinator``; the parameter servers and workers run in-process (one host), as in the
  source documents' ``ps``/``worker`` cluster, each worker applying its gradients as soon as it has
  them (no waiting for the slowest; stale parameters are the price).
- ``run_processes``: the parent side. Starts the training children, forwards Ctrl-C to them, and
  when one dies kills the rest (a synchronous cluster missing a member only hangs) and says which
  one died, how, and where the last checkpoint is. No TensorFlow is imported on this path.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from gputopo.errors import InputError, TrainingFailed
from gputopo.launch import (
    INTERRUPTED_EXIT_CODE,
    LOOPBACK,
    TrainConfig,
    address_answers,
    check_own_address,
    describe_exit,
    free_local_ports,
    resume_hint,
    tf_config,
)

KILL_GRACE_S = 5.0
POLL_S = 0.1


# --- strategies (child side) ---------------------------------------------------------------------


def started_marker(result_file: str | os.PathLike[str]) -> Path:
    """The file a child creates once its first step is done (its cluster, if any, has formed)."""
    return Path(str(result_file) + ".started")


def startup_finished(config: TrainConfig) -> None:
    """Tell the parent that start-up is over: from here on, the start-up timeout no longer applies."""
    if config.result_file:
        started_marker(config.result_file).touch()


def make_strategy(tf: Any, config: TrainConfig, device_set: Any) -> Any:
    """MirroredStrategy on ``device_set`` or MultiWorkerMirroredStrategy from ``--workers``."""
    if config.strategy == "mirrored":
        cross_device_ops = None
        if device_set.kind == "GPU" and config.cross_device_ops:
            cross_device_ops = getattr(tf.distribute, config.cross_device_ops)()
        return tf.distribute.MirroredStrategy(devices=list(device_set.names), cross_device_ops=cross_device_ops)
    if config.strategy != "multi-worker":
        raise InputError(f"make_strategy does not build {config.strategy!r}")
    if not config.workers:
        raise InputError("--strategy multi-worker needs --workers host:port,... (or --local-workers N)")
    if not 0 <= config.task_index < len(config.workers):
        raise InputError(f"--task-index {config.task_index} is not one of 0..{len(config.workers) - 1}")
    check_own_address(config.workers[config.task_index])
    os.environ["TF_CONFIG"] = tf_config(config.workers, config.task_index)
    # This blocks (in C++, holding the interpreter) until every worker has joined; the parent
    # enforces --startup-timeout and names the workers that do not answer.
    return tf.distribute.MultiWorkerMirroredStrategy()


# --- parameter-server training (child side, one process) ------------------------------------------


def train_parameter_server(tf: Any, config: TrainConfig, stop: Any) -> dict[str, Any]:
    """Asynchronous SGD: ``--ps`` parameter servers and ``--ps-workers`` workers in this process.

    The coordinator schedules steps on whichever worker is free; each step reads the variables from
    the parameter servers, computes gradients on its own batch and applies them there at once.
    """
    from gputopo.tf.data import check_data_source, fits_in_cache, load_datasets
    from gputopo.tf.train import (
        RunningMeans,
        TrainingState,
        _epoch_record,
        _explain_tf_error,
        _progress,
        make_replica_step,
        run_summary,
    )

    ps_count, worker_count = config.ps or 1, config.ps_workers or 2
    ports = free_local_ports(ps_count + worker_count)
    cluster = {
        "worker": [f"{LOOPBACK}:{p}" for p in ports[:worker_count]],
        "ps": [f"{LOOPBACK}:{p}" for p in ports[worker_count:]],
    }
    cluster_spec = tf.train.ClusterSpec(cluster)
    # In-process servers share this process's threads; with few cores each worker needs enough
    # inter-op threads of its own or the closures wait on one another forever.
    worker_config = tf.compat.v1.ConfigProto()
    worker_config.inter_op_parallelism_threads = max(worker_count + 1, os.cpu_count() or 1)
    servers = [
        tf.distribute.Server(cluster_spec, job_name="worker", task_index=i, config=worker_config, protocol="grpc")
        for i in range(worker_count)
    ] + [tf.distribute.Server(cluster_spec, job_name="ps", task_index=i, protocol="grpc") for i in range(ps_count)]
    resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(cluster_spec, rpc_layer="grpc")
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)

    batch = config.batch_size  # each scheduled step is one worker's batch
    if check_data_source(config.data) == "keras":
        raise InputError("--strategy parameter-server reads synthetic data or an image folder, not mnist/cifar10 arrays")
    datasets = load_datasets(tf, config.data, config.image_size, config.seed)
    steps_per_epoch = config.steps_per_epoch or max(1, datasets.train_examples // batch)
    total_steps = config.epochs * steps_per_epoch
    state = TrainingState.create(tf, config, strategy, datasets, total_steps)
    model, manager, start_step = state.model, state.manager, state.start_step

    def dataset_fn(input_context: Any) -> Any:
        # Built on the worker: a dataset captured from the coordinator would ship its tensors over gRPC.
        local = load_datasets(tf, config.data, config.image_size, config.seed, datasets.image_shape)
        ds = local.train.cache() if fits_in_cache(local, local.train_examples) else local.train
        ds = ds.shuffle(min(datasets.train_examples, 10_000), seed=config.seed + start_step)
        ds = ds.shard(input_context.num_input_pipelines, input_context.input_pipeline_id)
        return ds.repeat().batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)

    @tf.function
    def per_worker_dataset_fn() -> Any:
        return strategy.distribute_datasets_from_function(dataset_fn)

    per_worker_iterator = iter(coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    replica_step = make_replica_step(tf, model, state.optimizer, batch)

    @tf.function
    def worker_step(iterator: Any) -> Any:
        per_replica = strategy.run(replica_step, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def evaluate() -> tuple[float, float] | None:
        if not config.evaluate or datasets.test is None or not datasets.test_examples:
            return None
        loss_sum = correct = count = 0.0
        for images, labels in datasets.test.batch(batch):
            logits = model(images, training=False)
            loss_sum += float(tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)))
            correct += float(tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)))
            count += int(labels.shape[0])
        return (loss_sum / count, correct / count) if count else None

    # Steps are scheduled in chunks; between chunks the coordinator joins, so progress, epochs and
    # checkpoints see a consistent step count (within a chunk the workers run freely, asynchronously).
    chunk = max(1, min(steps_per_epoch, config.checkpoint_every or steps_per_epoch, 50))
    step, history, initial_loss, test_result = start_step, [], None, None
    epoch_means = RunningMeans()
    progress, task = _progress(config, total_steps, start_step)
    start_s = time.perf_counter()
    with progress:
        while step < total_steps and not stop.requested:
            count = min(chunk, total_steps - step, steps_per_epoch - step % steps_per_epoch)
            remote = [coordinator.schedule(worker_step, args=(per_worker_iterator,)) for _ in range(count)]
            coordinator.join()
            if step == start_step:
                startup_finished(config)
            chunk_means = RunningMeans(pending=[value.fetch() for value in remote])
            epoch_means.pending.extend(chunk_means.pending)
            chunk_means.collect(batch)
            initial_loss = chunk_means.loss if initial_loss is None else initial_loss
            step += count
            rate = (step - start_step) * batch / (time.perf_counter() - start_s)
            progress.update(task, completed=step, loss=f"{chunk_means.loss:.4f}",
                            accuracy=f"{chunk_means.accuracy:.3f}", rate=f"{rate:.0f}")
            if step % steps_per_epoch == 0:
                epoch_means.collect(batch)
                try:
                    test_result = evaluate()
                except tf.errors.OpError as exc:  # e.g. an image of test/ that does not decode
                    raise _explain_tf_error(tf, exc, config, 0) from None
                history.append(_epoch_record(step // steps_per_epoch, step, epoch_means, test_result))
                epoch_means = RunningMeans()
            if manager is not None and (step == total_steps or (config.checkpoint_every and step % config.checkpoint_every == 0)):
                state.save(tf, step, config)
    elapsed_s = time.perf_counter() - start_s
    if manager is not None and stop.requested:
        state.save(tf, step, config)
    epoch_means.collect(batch)
    if epoch_means.steps:
        history.append(_epoch_record(step / steps_per_epoch, step, epoch_means, None))
    del servers  # in-process servers live as long as the process; kept referenced until here
    summary = run_summary(
        config, datasets, model, stop, history,
        status="interrupted" if stop.requested and step < total_steps else "completed",
        device_kind="GPU" if tf.config.list_physical_devices("GPU") else "CPU",
        devices=cluster["worker"],
        replicas=worker_count,
        workers=worker_count,
        per_replica_batch_size=batch,
        steps_per_epoch=steps_per_epoch,
        start_step=start_step,
        step=step,
        initial_loss=initial_loss,
        test_result=test_result,
        examples_per_second=(step - start_step) * batch / elapsed_s if elapsed_s > 0 and step > start_step else None,
        checkpoint_path=manager.latest_checkpoint if manager is not None else None,
    )
    summary["parameter_servers"] = cluster["ps"]
    return summary


# --- the parent side: start, watch, stop ----------------------------------------------------------


@dataclass
class ChildProcess:
    """One training process the parent started, and how to name it in messages."""

    label: str  # "training process", "worker 1 (127.0.0.1:23456)"
    process: subprocess.Popen
    result_file: Path

    @property
    def started(self) -> bool:
        return started_marker(self.result_file).exists()


def start_child(label: str, command: Sequence[str], env: dict[str, str], result_file: Path) -> ChildProcess:
    """Start one training child with ``env`` added to this process's environment.

    The child gets a session of its own, so a Ctrl-C in the terminal reaches only the parent, which
    forwards it once: in the terminal's process group the child would get it twice (the terminal's
    and the forwarded one), and a second SIGINT means "stop at once", mid-step.
    """
    child_env = dict(os.environ)
    child_env.update(env)
    try:
        process = subprocess.Popen(list(command), env=child_env, stdin=subprocess.DEVNULL, start_new_session=True)
    except OSError as exc:
        raise TrainingFailed(f"cannot start the {label} ({command[0]}): {exc.strerror or exc}") from None
    return ChildProcess(label, process, result_file)


def read_result(child: ChildProcess) -> dict[str, Any] | None:
    try:
        return json.loads(child.result_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _stop(children: Sequence[ChildProcess], sig: int) -> None:
    for child in children:
        if child.process.poll() is None:
            try:
                child.process.send_signal(sig)
            except ProcessLookupError:
                pass


def _kill_after_grace(children: Sequence[ChildProcess]) -> None:
    deadline_s = time.monotonic() + KILL_GRACE_S
    while time.monotonic() < deadline_s and any(c.process.poll() is None for c in children):
        time.sleep(POLL_S)
    _stop(children, signal.SIGKILL)
    for child in children:
        child.process.wait()


class _StopSignalsAsInterrupt:
    """While active, SIGTERM and SIGHUP (``kill``, a closed terminal) reach the parent as Ctrl-C does.

    Their default action ends the parent at once, leaving its training children running with no
    one to read their results; as a KeyboardInterrupt they are forwarded like Ctrl-C instead.
    """

    SIGNALS = (signal.SIGTERM, signal.SIGHUP)

    def __enter__(self) -> _StopSignalsAsInterrupt:
        self._previous: dict[int, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                self._previous[sig] = signal.signal(sig, self._raise)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    @staticmethod
    def _raise(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt


def stop_with_parent() -> None:
    """In a training child: get SIGTERM (save, exit 130) when the parent ``gputopo train`` dies.

    Even a parent killed with SIGKILL then leaves no orphan training on (Linux ``PR_SET_PDEATHSIG``;
    elsewhere nothing is done).
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    parent = os.getppid()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent or parent == 1:  # the parent was gone before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


_PR_SET_PDEATHSIG = 1


def run_processes(
    children: Sequence[ChildProcess],
    checkpoint_dir: str | None,
    startup_timeout_s: float | None = None,
    peers: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """Wait for every child; return their results, or raise one clear error for the first failure.

    Ctrl-C is forwarded (each child saves a checkpoint and exits 130); a second Ctrl-C kills them.
    SIGTERM and SIGHUP to the parent are forwarded the same way (see ``_StopSignalsAsInterrupt``).
    When one child fails, the others are stopped: a synchronous cluster cannot go on without it.
    With ``startup_timeout_s``, children that have not finished their first step by then are
    stopped, and the error names those of ``peers`` (host:port) that do not answer.
    """
    with _StopSignalsAsInterrupt():
        return _wait_for(children, checkpoint_dir, startup_timeout_s, peers)


def _wait_for(
    children: Sequence[ChildProcess],
    checkpoint_dir: str | None,
    startup_timeout_s: float | None,
    peers: Sequence[str],
) -> list[dict[str, Any]]:
    interrupts = 0
    failed: ChildProcess | None = None
    deadline_s = time.monotonic() + startup_timeout_s if startup_timeout_s else None
    while True:
        try:
            if deadline_s is not None and time.monotonic() > deadline_s:
                if all(c.started or c.process.poll() is not None for c in children):
                    deadline_s = None
                else:
                    failure = _startup_failure(startup_timeout_s or 0.0, peers)  # probe before stopping ours
                    _stop(children, signal.SIGKILL)
                    for child in children:
                        child.process.wait()
                    raise failure
            codes = [c.process.poll() for c in children]
            failures = [c for c, code in zip(children, codes) if code not in (None, 0, INTERRUPTED_EXIT_CODE)]
            # A child killed by a signal is the cause; others failing at the same time are its victims.
            failed = min(failures, key=lambda c: c.process.returncode >= 0) if failures else None
            if failed is not None or all(code is not None for code in codes):
                break
            if INTERRUPTED_EXIT_CODE in codes and not interrupts:  # one stopped on a signal: stop the rest the same way
                interrupts = 1
                _stop(children, signal.SIGINT)
            time.sleep(POLL_S)
        except KeyboardInterrupt:
            interrupts += 1
            _stop(children, signal.SIGINT if interrupts == 1 else signal.SIGKILL)
    if failed is not None:
        others = [c for c in children if c is not failed]
        _stop(others, signal.SIGTERM)
        _kill_after_grace(others)
        raise _failure(failed, checkpoint_dir)
    results = [read_result(c) or {} for c in children]
    for child, result in zip(children, results):
        if "error" in result:  # e.g. stopped by Ctrl-C before training began
            raise _failure(child, checkpoint_dir)
    return results


def _startup_failure(timeout_s: float, peers: Sequence[str]) -> TrainingFailed:
    silent = [address for address in peers if not address_answers(address)]
    if silent:
        who = f"worker {silent[0]} does not answer" if len(silent) == 1 else f"workers {', '.join(silent)} do not answer"
    else:
        who = "the workers did not all join"
    return TrainingFailed(
        f"{who} after {timeout_s:g} s (is it started, with the same --workers list and a reachable address?)"
    )


def _failure(child: ChildProcess, checkpoint_dir: str | None) -> Exception:
    result = read_result(child) or {}
    if "error" in result:
        if result.get("error_type") == "InputError":
            return InputError(result["error"])
        return TrainingFailed(result["error"])
    return TrainingFailed(f"the {child.label} {describe_exit(child.process.returncode)}; {resume_hint(checkpoint_dir)}")
