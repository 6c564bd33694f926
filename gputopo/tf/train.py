"""The training child: ``python -m gputopo.tf.train <flags>`` (``gputopo train`` starts it).

The loop is the one of the source documents, done right for TF 2 / Keras 3:

- model and optimizer are built under ``strategy.scope()`` so their variables are mirrored;
- a compiled step (``tf.function``) calls ``strategy.run`` on every replica's slice of the batch;
- the per-example loss is averaged over the *global* batch (``tf.nn.compute_average_loss``), so
  the gradients that the optimizer sums across replicas are the gradient of the global mean;
- ``strategy.reduce(SUM)`` combines loss and correct counts for the progress bar;
- a distributed ``tf.data`` pipeline prefetches the next batch while the current step runs.

Keras ``fit`` is avoided on purpose: under MultiWorkerMirroredStrategy it breaks in TF 2.21.

Checkpoints are numbered by step (``ckpt-<step>``) and written by ``tf.train.CheckpointManager``:
TF writes the data files first and rewrites its ``checkpoint`` state file (atomically) only after,
so a crash mid-write leaves the previous checkpoint as the latest. Ctrl-C (SIGINT) or SIGTERM asks
the loop to stop after the current step; it then saves and exits with status 130.

The child reports through ``--result-file`` (JSON: the summary, or ``{"error": ...}``), which the
parent reads; run by hand without it, the summary goes to stdout and errors to stderr.
"""

from __future__ import annotations

import hashlib
import json
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from gputopo.errors import GputopoError, InputError, TrainingFailed
from gputopo.launch import (
    INTERRUPTED_EXIT_CODE,
    TrainConfig,
    check_batch_split,
    resume_hint,
)

RESULT_SCHEMA = "gputopo.train/1"
PROGRESS_REFRESH_S = 0.25


class StopRequest:
    """Turns SIGINT/SIGTERM into a flag the loop checks after each step (never mid-step or mid-save)."""

    def __init__(self) -> None:
        self.requested = False
        self.signal_name: str | None = None
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGINT, signal.SIGTERM):
            self._previous[sig] = signal.signal(sig, self._handle)

    def uninstall(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        self._previous.clear()

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.signal_name = signal.Signals(signum).name
        # A second signal acts at once, even while TensorFlow is blocked (e.g. waiting for a dead peer).
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


@dataclass
class RunningMeans:
    """Sums of (loss, correct, examples) pulled from the device only when someone reads them."""

    pending: list[Any] = field(default_factory=list)  # reduced [loss, correct] tensors, one per step
    loss_sum: float = 0.0
    correct: float = 0.0
    steps: int = 0
    examples: int = 0

    def add(self, reduced: Any) -> None:
        self.pending.append(reduced)

    def collect(self, global_batch: int) -> None:
        for value in self.pending:  # tensors (synchronous loop) or numpy arrays (fetched remote values)
            loss, correct = (float(v) for v in (value.numpy() if hasattr(value, "numpy") else value))
            self.loss_sum += loss
            self.correct += correct
            self.steps += 1
            self.examples += global_batch
        self.pending.clear()

    @property
    def loss(self) -> float | None:
        return self.loss_sum / self.steps if self.steps else None

    @property
    def accuracy(self) -> float | None:
        return self.correct / self.examples if self.examples else None


def weights_fingerprint(model: Any) -> str:
    """SHA-256 of all model weights' bytes: equal only if every worker holds the very same weights."""
    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(weight.numpy().tobytes())
    return digest.hexdigest()


def _setup_devices(tf: Any, config: TrainConfig) -> Any:
    """The devices this process trains on (logical CPU devices are split off here, before TF starts).

    Multi-worker and parameter-server jobs must not touch the runtime before their strategy
    configures it (collective ops and servers are set up at start-up); they use one CPU device
    per worker, or the visible GPUs.
    """
    from gputopo.tf.devices import DeviceSet, select_devices

    if config.strategy == "mirrored":
        return select_devices(cpu_devices=config.cpu_devices)
    kind = "GPU" if tf.config.list_physical_devices("GPU") and not config.cpu_devices else "CPU"
    return DeviceSet(kind, ())


def _is_chief(config: TrainConfig) -> bool:
    return config.strategy != "multi-worker" or config.task_index == 0


def _checkpoint_dir_for(config: TrainConfig) -> Path | None:
    """The chief writes the real checkpoints; other workers write a throw-away copy (all must save)."""
    if config.checkpoint_dir is None:
        return None
    base = Path(config.checkpoint_dir)
    if _is_chief(config):
        return base
    return base / f".worker-{config.task_index}-tmp"


def _progress(config: TrainConfig, total: int, start: int) -> Any:
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("[bold]train"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("loss {task.fields[loss]}  acc {task.fields[accuracy]}  {task.fields[rate]} ex/s"),
        TimeRemainingColumn(),
        console=Console(file=sys.stderr),
        disable=not (config.progress and _is_chief(config)),
    )
    task = progress.add_task("train", total=total, completed=start, loss="-", accuracy="-", rate="-")
    return progress, task


def _note(config: TrainConfig, message: str) -> None:
    if config.progress and _is_chief(config):
        sys.stderr.write(f"gputopo train: {message}\n")
        sys.stderr.flush()


def train(config: TrainConfig, stop: StopRequest | None = None) -> dict[str, Any]:
    """Run the whole training job described by ``config``; returns the summary (``--json``)."""
    from gputopo.tf.devices import import_tensorflow

    tf = import_tensorflow()
    tf.keras.utils.set_random_seed(config.seed)
    try:
        device_set = _setup_devices(tf, config)
        if config.strategy == "parameter-server":
            from gputopo.tf.distributed import train_parameter_server

            return train_parameter_server(tf, config, stop or StopRequest())
        from gputopo.tf.distributed import make_strategy

        strategy = make_strategy(tf, config, device_set)
        return _train_synchronous(tf, config, strategy, device_set, stop or StopRequest())
    except tf.errors.OpError as exc:  # what the loops do not explain themselves (GPU out of memory, ...)
        raise _explain_tf_error(tf, exc, config, 0) from None


def _train_synchronous(tf: Any, config: TrainConfig, strategy: Any, device_set: Any, stop: StopRequest) -> dict[str, Any]:
    """The MirroredStrategy / MultiWorkerMirroredStrategy loop (synchronous data parallelism)."""
    from gputopo.tf.data import evaluation_pipeline, load_datasets, training_pipeline
    from gputopo.tf.distributed import startup_finished

    replicas = strategy.num_replicas_in_sync
    global_batch = config.batch_size
    check_batch_split(global_batch, replicas)
    datasets = load_datasets(tf, config.data, config.image_size, config.seed)
    steps_per_epoch = config.steps_per_epoch or max(1, datasets.train_examples // global_batch)
    total_steps = config.epochs * steps_per_epoch

    state = TrainingState.create(tf, config, strategy, datasets, total_steps)
    model, optimizer, manager, start_step = state.model, state.optimizer, state.manager, state.start_step

    # A resumed run reshuffles from another seed so it does not replay the batches it already saw.
    train_data = strategy.experimental_distribute_dataset(
        training_pipeline(tf, datasets, global_batch, config.seed + start_step)
    )
    eval_pipeline = evaluation_pipeline(tf, datasets, global_batch) if config.evaluate else None
    eval_data = strategy.experimental_distribute_dataset(eval_pipeline) if eval_pipeline is not None else None

    replica_step = make_replica_step(tf, model, optimizer, global_batch)

    @tf.function
    def distributed_train_step(iterator: Any) -> Any:
        per_replica = strategy.run(replica_step, args=next(iterator))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def replica_eval(images: Any, labels: Any) -> Any:
        logits = model(images, training=False)
        per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        correct = tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32))
        count = tf.cast(tf.shape(labels)[0], tf.float32)
        return tf.stack([tf.reduce_sum(per_example), correct, count])

    @tf.function
    def distributed_eval_step(batch: Any) -> Any:
        per_replica = strategy.run(replica_eval, args=batch)
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    def evaluate() -> tuple[float, float] | None:
        if eval_data is None:
            return None
        totals = [0.0, 0.0, 0.0]
        for batch in eval_data:
            values = distributed_eval_step(batch).numpy()
            totals = [t + float(v) for t, v in zip(totals, values)]
        if not totals[2]:
            return None
        return totals[0] / totals[2], totals[1] / totals[2]

    def save(step: int) -> None:
        if manager is None:
            return
        state.save(tf, step, config)
        if not _is_chief(config):
            tf.io.gfile.rmtree(manager.directory)  # only the chief's copy is kept

    iterator = iter(train_data)
    step = start_step
    history: list[dict[str, Any]] = []
    epoch_means = RunningMeans()
    window = RunningMeans()
    initial_loss: float | None = None
    timed_from_step: int | None = None
    timed_from_s = 0.0
    paused_s = 0.0  # evaluation and checkpoint time, left out of examples/s
    last_saved_step = start_step if start_step else None
    last_refresh_s = 0.0
    test_result: tuple[float, float] | None = None
    progress, task = _progress(config, total_steps, start_step)
    if start_step:
        _note(config, f"resuming from the checkpoint at step {start_step} of {total_steps}")
    try:
        with progress:
            while step < total_steps:
                try:
                    reduced = distributed_train_step(iterator)
                except tf.errors.OpError as exc:
                    raise _explain_tf_error(tf, exc, config, last_saved_step) from None
                step += 1
                epoch_means.add(reduced)
                window.add(reduced)
                if timed_from_step is None:  # the first step traces and compiles: not timed
                    reduced.numpy()
                    startup_finished(config)  # the cluster (if any) has formed: tell the parent
                    timed_from_step, timed_from_s = step, time.perf_counter()
                now_s = time.perf_counter()
                if now_s - last_refresh_s >= PROGRESS_REFRESH_S or step == total_steps:
                    window.collect(global_batch)
                    if initial_loss is None:
                        initial_loss = window.loss
                    rate = _rate(step, timed_from_step, timed_from_s, paused_s, global_batch)
                    progress.update(
                        task,
                        completed=step,
                        loss=f"{window.loss:.4f}",
                        accuracy=f"{window.accuracy:.3f}",
                        rate=f"{rate:.0f}" if rate else "-",
                    )
                    window = RunningMeans()
                    last_refresh_s = now_s
                pause_start_s = time.perf_counter()
                if step % steps_per_epoch == 0:
                    epoch_means.collect(global_batch)
                    try:
                        test_result = evaluate()
                    except tf.errors.OpError as exc:  # e.g. an image of test/ that does not decode
                        raise _explain_tf_error(tf, exc, config, last_saved_step) from None
                    history.append(_epoch_record(step // steps_per_epoch, step, epoch_means, test_result))
                    epoch_means = RunningMeans()
                if config.checkpoint_every and step % config.checkpoint_every == 0 and step < total_steps:
                    save(step)
                    last_saved_step = step
                paused_s += time.perf_counter() - pause_start_s
                if stop.requested:
                    break
    except KeyboardInterrupt:  # a second Ctrl-C while TF was busy: still save what we have
        stop.requested = True
    end_s = time.perf_counter()
    if manager is not None and last_saved_step != step:
        save(step)
        last_saved_step = step
    epoch_means.collect(global_batch)
    if epoch_means.steps:  # a partial epoch (interrupted, or resumed mid-epoch)
        history.append(_epoch_record(step / steps_per_epoch, step, epoch_means, None))
    return run_summary(
        config, datasets, model, stop, history,
        status="interrupted" if stop.requested and step < total_steps else "completed",
        device_kind=device_set.kind,
        devices=list(strategy.extended.worker_devices),
        replicas=replicas,
        workers=max(1, len(config.workers)) if config.strategy == "multi-worker" else 1,
        per_replica_batch_size=global_batch // replicas,
        steps_per_epoch=steps_per_epoch,
        start_step=start_step,
        step=step,
        initial_loss=initial_loss,
        test_result=test_result,
        examples_per_second=_rate(step, timed_from_step, timed_from_s, paused_s, global_batch, end_s),
        checkpoint_path=manager.latest_checkpoint if manager is not None and _is_chief(config) else None,
    )


def run_summary(
    config: TrainConfig,
    datasets: Any,
    model: Any,
    stop: StopRequest,
    history: list[dict[str, Any]],
    *,
    status: str,
    device_kind: str,
    devices: list[str],
    replicas: int,
    workers: int,
    per_replica_batch_size: int,
    steps_per_epoch: int,
    start_step: int,
    step: int,
    initial_loss: float | None,
    test_result: tuple[float, float] | None,
    examples_per_second: float | None,
    checkpoint_path: str | None,
) -> dict[str, Any]:
    """The ``--json`` summary every strategy reports (keys of the ``train`` contract first)."""
    last = history[-1] if history else {}
    return {
        "schema": RESULT_SCHEMA,
        "status": status,
        "steps": step,
        "final_loss": last.get("loss"),
        "final_accuracy": last.get("accuracy"),
        "examples_per_second": examples_per_second,
        "devices": devices,
        "checkpoint_path": checkpoint_path,
        "strategy": config.strategy,
        "model": config.model,
        "data": datasets.description,
        "device_kind": device_kind,
        "replicas": replicas,
        "workers": workers,
        "task_index": config.task_index,
        "global_batch_size": config.batch_size,
        "per_replica_batch_size": per_replica_batch_size,
        "epochs": config.epochs,
        "steps_per_epoch": steps_per_epoch,
        "total_steps": config.epochs * steps_per_epoch,
        "start_step": start_step,
        "steps_run": step - start_step,
        "initial_loss": initial_loss,
        "test_loss": test_result[0] if test_result else None,
        "test_accuracy": test_result[1] if test_result else None,
        "history": history,
        "checkpoint_dir": config.checkpoint_dir,
        "stopped_by": stop.signal_name,
        "weights_sha256": weights_fingerprint(model),
    }


@dataclass
class TrainingState:
    """Model, optimizer and step counter built under the strategy, and their checkpointing."""

    model: Any
    optimizer: Any
    step_variable: Any
    checkpoint: Any
    manager: Any  # tf.train.CheckpointManager, or None without --checkpoint-dir
    start_step: int

    @classmethod
    def create(cls, tf: Any, config: TrainConfig, strategy: Any, datasets: Any, total_steps: int) -> TrainingState:
        """Build under ``strategy.scope()`` (variables mirrored or on the parameter servers), then
        restore with ``--resume``. The optimizer's slots are built here, not lazily inside the
        compiled step, where Keras 3 cannot create variables under a strategy."""
        from gputopo.tf.models import build_model

        with strategy.scope():
            model = build_model(tf, config.model, datasets.image_shape, datasets.num_classes)
            optimizer = tf.keras.optimizers.Adam(learning_rate=config.learning_rate)
            optimizer.build(model.trainable_variables)
            step_variable = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_variable)
        manager = _checkpoint_manager(tf, config, checkpoint)
        start_step = _restore(tf, config, checkpoint, step_variable)
        if start_step > total_steps:
            raise InputError(
                f"the checkpoint is at step {start_step}, past the {total_steps} steps asked for; "
                "ask for more epochs/steps"
            )
        return cls(model, optimizer, step_variable, checkpoint, manager, start_step)

    def save(self, tf: Any, step: int, config: TrainConfig) -> None:
        """Save checkpoint ``ckpt-<step>``; a folder that cannot be written is one clear error."""
        self.step_variable.assign(step)
        try:
            self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as exc:
            text = (getattr(exc, "message", None) or str(exc)).strip()
            raise TrainingFailed(
                f"cannot write the checkpoint of step {step} to {self.manager.directory} "
                f"({text.splitlines()[0] if text else type(exc).__name__}); {resume_hint(config.checkpoint_dir)}"
            ) from None


def make_replica_step(tf: Any, model: Any, optimizer: Any, global_batch: int) -> Any:
    """One replica's training step: loss averaged over the *global* batch, gradients applied.

    Returns ``[loss, correct predictions]`` so the caller's ``strategy.reduce(SUM)`` gives the
    global mean loss and the number of correct predictions in the global batch.
    """

    def replica_step(images: Any, labels: Any) -> Any:
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=global_batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        gradients = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(gradients, model.trainable_variables))
        predicted = tf.argmax(logits, axis=-1, output_type=tf.int32)
        correct = tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32))
        return tf.stack([loss, correct])

    return replica_step


def _rate(
    step: int, from_step: int | None, from_s: float, paused_s: float, global_batch: int, now_s: float | None = None
) -> float | None:
    """Examples per second since the first (compiling) step, evaluation and checkpoint time excluded."""
    if from_step is None or step <= from_step:
        return None
    elapsed_s = (now_s or time.perf_counter()) - from_s - paused_s
    return (step - from_step) * global_batch / elapsed_s if elapsed_s > 0 else None


def _epoch_record(epoch: float, step: int, means: RunningMeans, test: tuple[float, float] | None) -> dict[str, Any]:
    return {
        "epoch": epoch,
        "step": step,
        "loss": means.loss,
        "accuracy": means.accuracy,
        "test_loss": test[0] if test else None,
        "test_accuracy": test[1] if test else None,
    }


def _checkpoint_manager(tf: Any, config: TrainConfig, checkpoint: Any) -> Any:
    directory = _checkpoint_dir_for(config)
    if directory is None:
        return None
    return tf.train.CheckpointManager(checkpoint, str(directory), max_to_keep=3, checkpoint_name="ckpt")


def _restore(tf: Any, config: TrainConfig, checkpoint: Any, step_variable: Any) -> int:
    """Restore the latest checkpoint with ``--resume``; refuse to overwrite one without it."""
    if config.checkpoint_dir is None:
        if config.resume:
            raise InputError("--resume needs --checkpoint-dir (where the checkpoints are)")
        return 0
    latest = tf.train.latest_checkpoint(config.checkpoint_dir)
    if latest is None:
        if config.resume:
            raise InputError(f"--resume: no checkpoint in {config.checkpoint_dir} to resume from")
        return 0
    if not config.resume:
        raise InputError(
            f"{config.checkpoint_dir} already holds a checkpoint ({Path(latest).name}); add --resume to continue "
            "from it, or give another --checkpoint-dir to start afresh"
        )
    try:
        checkpoint.restore(latest).expect_partial()
    except (tf.errors.OpError, ValueError, AssertionError) as exc:
        raise InputError(
            f"cannot restore {latest}: it was written for another model or data shape ({str(exc).splitlines()[0]})"
        ) from None
    return int(step_variable.numpy())


def _explain_tf_error(tf: Any, exc: Any, config: TrainConfig, last_saved_step: int | None) -> GputopoError:
    """Turn a TF runtime error into one line the user can act on."""
    first_line = (exc.message or str(exc)).strip().splitlines()[0] if (exc.message or str(exc)).strip() else type(exc).__name__
    if isinstance(exc, tf.errors.InvalidArgumentError) and any(
        word in str(exc) for word in ("image", "PNG", "JPEG", "decode", "Decode")
    ):
        # The first line is often just "Graph execution error:"; the decoder says what is wrong further down.
        said = re.search(r"(?:Invalid|Unknown image|Failed to (?:decode|initialize))[^\n\[]*", str(exc))
        return InputError(f"an image in {config.data} could not be decoded ({said.group(0).strip() if said else first_line})")
    saved = resume_hint(config.checkpoint_dir if last_saved_step is not None else None)
    if config.strategy != "mirrored" and isinstance(
        exc, (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError, tf.errors.AbortedError, tf.errors.InternalError)
    ):
        return TrainingFailed(f"lost contact with another worker ({type(exc).__name__}: {first_line}); {saved}")
    return TrainingFailed(f"training failed with {type(exc).__name__}: {first_line}; {saved}")


def write_result(config: TrainConfig, payload: dict[str, Any]) -> None:
    """Hand the summary (or error) to the parent via ``--result-file`` (atomic), else print it."""
    if config.result_file:
        from gputopo.fileio import atomic_write_text

        atomic_write_text(config.result_file, json.dumps(payload, indent=2))
    elif "error" in payload:
        sys.stderr.write(f"gputopo: error: {payload['error']}\n")
    else:
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the training child; returns the process exit status."""
    config = TrainConfig.from_argv(sys.argv[1:] if argv is None else argv)
    stop = StopRequest()
    stop.install()
    if config.result_file:  # started by `gputopo train`: stop (and save) if it dies
        from gputopo.tf.distributed import stop_with_parent

        stop_with_parent()
    try:
        summary = train(config, stop)
    except GputopoError as exc:
        write_result(config, {"schema": RESULT_SCHEMA, "error": str(exc), "error_type": type(exc).__name__})
        return exc.exit_code
    except KeyboardInterrupt:
        write_result(config, {"schema": RESULT_SCHEMA, "error": "interrupted before training started", "error_type": "Interrupted"})
        return INTERRUPTED_EXIT_CODE
    finally:
        stop.uninstall()
    write_result(config, summary)
    return INTERRUPTED_EXIT_CODE if summary["status"] == "interrupted" else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except GputopoError as exc:  # bad flags caught in TrainConfig.validate
        sys.stderr.write(f"gputopo: error: {exc}\n")
        sys.exit(exc.exit_code)
