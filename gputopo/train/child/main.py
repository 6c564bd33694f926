"""The training child: ``python -m gputopo.train.child <flags>`` (``gputopo train`` starts it).

The loop is the one of the source documents, done right for TF 2 / Keras 3:

- model and optimizer are built under ``strategy.scope()`` so their variables are mirrored;
- a compiled step (``tf.function``) calls ``strategy.run`` on every replica's slice of the batch;
- the per-example loss is averaged over the *global* batch (``tf.nn.compute_average_loss``), so
  the gradients that the optimizer sums across replicas are the gradient of the global mean;
- ``strategy.reduce(SUM)`` combines loss and correct counts for the progress bar;
- a distributed ``tf.data`` pipeline prefetches the next batch while the current step runs.

Keras ``fit`` is avoided on purpose: under MultiWorkerMirroredStrategy it breaks in TF 2.21.

Checkpoints (``gputopo.train.checkpoints``) are numbered by step. Ctrl-C (SIGINT) or SIGTERM asks
the loop to stop; the request is a flag all-reduced with every step, so every worker of a
multi-worker run stops after the same step (one step after the first worker asked), however late
the signal reached the others; they save that step together and exit with status 130. The
parameter-server strategy has its own, asynchronous loop (``gputopo.train.child.ps_loop``).

The child reports through ``--result-file`` (JSON: the summary, or ``{"error": ...}``), which the
parent reads; run by hand without it, the summary goes to stdout and errors to stderr.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any, Sequence

from gputopo import tfruntime
from gputopo.errors import GputopoError
from gputopo.train.child.common import (
    NonFiniteLoss,
    RunningMeans,
    StopRequest,
    TrainingState,
    explain_tf_error,
    make_replica_step,
    non_finite_failure,
    startup_finished,
    write_result,
)
from gputopo.train.checkpoints import remove_no_follow
from gputopo.train.workers import check_tf_config_env
from gputopo.train.config import INTERRUPTED_EXIT_CODE, RESULT_SCHEMA, TrainConfig, check_batch_split, is_chief
from gputopo.train.child.data import evaluation_pipeline, load_datasets, training_pipeline
from gputopo.train.child.progress import PROGRESS_REFRESH_S, epoch_record, examples_rate, note, progress_bar, run_summary
from gputopo.train.child.strategy import make_strategy, setup_devices


def train(config: TrainConfig, stop: StopRequest | None = None) -> dict[str, Any]:
    """Run the whole training job described by ``config``; returns the summary (``--json``)."""
    check_tf_config_env()
    tf = tfruntime.import_tensorflow()
    tf.keras.utils.set_random_seed(config.seed)
    try:
        device_set = setup_devices(tf, config)
        if config.strategy == "parameter-server":
            from gputopo.train.child.ps_loop import train_parameter_server

            return train_parameter_server(tf, config, stop or StopRequest())
        strategy = make_strategy(tf, config, device_set)
        return SynchronousLoop(tf, config, strategy, device_set, stop or StopRequest()).run()
    except tf.errors.OpError as exc:  # what the loops do not explain themselves (GPU out of memory, ...)
        raise explain_tf_error(tf, exc, config, 0) from None


class SynchronousLoop:
    """The MirroredStrategy / MultiWorkerMirroredStrategy loop (synchronous data parallelism)."""

    def __init__(self, tf: Any, config: TrainConfig, strategy: Any, device_set: Any, stop: StopRequest) -> None:
        self.tf, self.config, self.strategy, self.device_set, self.stop = tf, config, strategy, device_set, stop
        self.replicas = strategy.num_replicas_in_sync
        self.global_batch = config.batch_size
        check_batch_split(self.global_batch, self.replicas)
        self.datasets = load_datasets(tf, config.data, config.image_size, config.seed)
        self.steps_per_epoch = config.steps_per_epoch or max(1, self.datasets.train_examples // self.global_batch)
        self.total_steps = config.epochs * self.steps_per_epoch
        self.state = TrainingState.create(tf, config, strategy, self.datasets, self.total_steps)
        self.start_step = self.state.start_step
        # A resumed run reshuffles from another seed so it does not replay the batches it already saw.
        self.train_data = strategy.experimental_distribute_dataset(
            training_pipeline(tf, self.datasets, self.global_batch, config.seed + self.start_step)
        )
        eval_pipeline = evaluation_pipeline(tf, self.datasets, self.global_batch) if config.evaluate else None
        self.eval_data = strategy.experimental_distribute_dataset(eval_pipeline) if eval_pipeline is not None else None
        self.train_step, self.eval_step = self._compile_steps()
        self.step = self.start_step
        self.history: list[dict[str, Any]] = []
        self.epoch_means = RunningMeans()
        self.window = RunningMeans()
        self.initial_loss: float | None = None
        self.test_result: tuple[float, float] | None = None
        self.timed_from_step: int | None = None
        self.timed_from_s = 0.0
        self.paused_s = 0.0  # evaluation and checkpoint time, left out of examples/s
        self.last_saved_step: int | None = self.start_step if self.start_step else None
        self.last_refresh_s = 0.0

    def _compile_steps(self) -> tuple[Any, Any]:
        tf, strategy, model = self.tf, self.strategy, self.state.model
        replica_step = make_replica_step(tf, model, self.state.optimizer, self.global_batch)

        def replica_step_and_vote(images: Any, labels: Any, stop_vote: Any) -> Any:
            return tf.concat([replica_step(images, labels), tf.reshape(stop_vote, [1])], axis=0)

        @tf.function
        def distributed_train_step(iterator: Any, stop_vote: Any) -> Any:
            # [loss, correct, stop votes]: the stop flag rides on the step's all-reduce (one scalar)
            per_replica = strategy.run(replica_step_and_vote, args=(*next(iterator), stop_vote))
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

        return distributed_train_step, distributed_eval_step

    def evaluate(self) -> tuple[float, float] | None:
        if self.eval_data is None:
            return None
        totals = [0.0, 0.0, 0.0]
        for batch in self.eval_data:
            values = self.eval_step(batch).numpy()
            totals = [t + float(v) for t, v in zip(totals, values)]
        if not totals[2]:
            return None
        return totals[0] / totals[2], totals[1] / totals[2]

    def _collect(self, means: RunningMeans) -> None:
        """Pull ``means``' pending values (the last steps'); the first non-finite loss stops the run."""
        first_step = self.step - len(means.pending) + 1
        try:
            means.collect(self.global_batch)
        except NonFiniteLoss as exc:
            raise non_finite_failure(exc.loss, first_step + exc.offset, self.config, self.last_saved_step) from None

    def save(self, step: int) -> None:
        manager = self.state.manager
        if manager is None:
            return
        self._collect(self.window)  # every loss up to here finite, or nothing is saved
        self._collect(self.epoch_means)
        self.state.check_finite(self.tf, step, self.config, self.last_saved_step)
        self.state.save(self.tf, step, self.config)
        if not is_chief(self.config):
            remove_no_follow(manager.directory)  # only the chief's copy is kept; a link is never followed
        self.last_saved_step = step

    def run(self) -> dict[str, Any]:
        tf, config = self.tf, self.config
        iterator = iter(self.train_data)
        progress, task = progress_bar(config, self.total_steps, self.start_step)
        if self.start_step:
            note(config, f"resuming from the checkpoint at step {self.start_step} of {self.total_steps}")
        previous: Any = None  # the step before's [loss, correct, stop votes], read one step late
        try:
            with progress:
                while self.step < self.total_steps:
                    try:
                        reduced = self.train_step(iterator, tf.constant(1.0 if self.stop.requested else 0.0))
                    except tf.errors.OpError as exc:
                        raise explain_tf_error(tf, exc, config, self.last_saved_step) from None
                    self.step += 1
                    self._count(reduced)
                    self._refresh(progress, task)
                    pause_start_s = time.perf_counter()
                    self._end_of_epoch_and_checkpoint()
                    self.paused_s += time.perf_counter() - pause_start_s
                    if self._stop_agreed(previous):
                        break
                    previous = reduced
        except KeyboardInterrupt:  # a second Ctrl-C while TF was busy: still save what we have
            self.stop.requested = True
        return self._finish(end_s=time.perf_counter())

    def _stop_agreed(self, previous: Any) -> bool:
        """Whether any worker asked to stop by the step before this one (its votes, all-reduced).

        A signal reaches the workers at different steps (Slurm's scancel, a time limit): a worker
        that stopped on its own would enter the save while the others enter the next step's
        all-reduce, each waiting for the other until SIGKILL. The flag goes into every step's
        all-reduce instead, so all workers learn it from the same step and stop after the next
        one, together; they then save that step together. Read one step late, so reading it
        never waits for the step just started."""
        if previous is None or float(previous.numpy()[2]) <= 0.0:
            return False
        if not self.stop.requested:
            self.stop.requested = True
            self.stop.signal_name = "another worker"
        return True

    def _count(self, reduced: Any) -> None:
        self.epoch_means.add(reduced)
        self.window.add(reduced)
        if self.timed_from_step is None:  # the first step traces and compiles: not timed
            reduced.numpy()
            startup_finished(self.config)  # the cluster (if any) has formed: tell the parent
            self.timed_from_step, self.timed_from_s = self.step, time.perf_counter()

    def _rate(self, now_s: float | None = None) -> float | None:
        return examples_rate(
            self.step, self.timed_from_step, self.timed_from_s, self.paused_s, self.global_batch, now_s
        )

    def _refresh(self, progress: Any, task: Any) -> None:
        now_s = time.perf_counter()
        if now_s - self.last_refresh_s < PROGRESS_REFRESH_S and self.step != self.total_steps:
            return
        self._collect(self.window)
        if self.initial_loss is None:
            self.initial_loss = self.window.loss
        rate = self._rate()
        progress.update(
            task,
            completed=self.step,
            loss=f"{self.window.loss:.4f}",
            accuracy=f"{self.window.accuracy:.3f}",
            rate=f"{rate:.0f}" if rate else "-",
        )
        self.window = RunningMeans()
        self.last_refresh_s = now_s

    def _end_of_epoch_and_checkpoint(self) -> None:
        step, config = self.step, self.config
        if step % self.steps_per_epoch == 0:
            self._collect(self.epoch_means)
            try:
                self.test_result = self.evaluate()
            except self.tf.errors.OpError as exc:  # e.g. an image of test/ that does not decode
                raise explain_tf_error(self.tf, exc, config, self.last_saved_step) from None
            self.history.append(epoch_record(step // self.steps_per_epoch, step, self.epoch_means, self.test_result))
            self.epoch_means = RunningMeans()
        if config.checkpoint_every and step % config.checkpoint_every == 0 and step < self.total_steps:
            self.save(step)

    def _all_saved(self) -> None:
        """Wait until every worker has finished its last save (one all-reduce): no task exits while
        the chief still writes (under Slurm, ``srun --kill-on-bad-exit`` would end it)."""
        tf, strategy = self.tf, self.strategy

        def arrived() -> Any:
            return tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, tf.constant(1.0))

        try:
            tf.function(lambda: strategy.run(arrived))()
        except tf.errors.OpError as exc:
            raise explain_tf_error(tf, exc, self.config, self.last_saved_step) from None

    def _finish(self, end_s: float) -> dict[str, Any]:
        config, step, manager = self.config, self.step, self.state.manager
        if manager is not None and self.last_saved_step != step:
            self.save(step)
        if manager is not None and config.strategy == "multi-worker":
            self._all_saved()
        self._collect(self.window)
        self._collect(self.epoch_means)
        if self.epoch_means.steps:  # a partial epoch (interrupted, or resumed mid-epoch)
            self.history.append(epoch_record(step / self.steps_per_epoch, step, self.epoch_means, None))
        return run_summary(
            config, self.datasets, self.state.model, self.stop, self.history,
            status="interrupted" if self.stop.requested and step < self.total_steps else "completed",
            device_kind=self.device_set.kind,
            devices=list(self.strategy.extended.worker_devices),
            replicas=self.replicas,
            workers=max(1, len(config.workers)) if config.strategy == "multi-worker" else 1,
            per_replica_batch_size=self.global_batch // self.replicas,
            steps_per_epoch=self.steps_per_epoch,
            start_step=self.start_step,
            step=step,
            initial_loss=self.initial_loss,
            test_result=self.test_result,
            examples_per_second=self._rate(end_s),
            checkpoint_path=manager.latest_checkpoint if manager is not None and is_chief(config) else None,
        )  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the training child; returns the process exit status."""
    config = TrainConfig.from_argv(sys.argv[1:] if argv is None else argv)
    stop = StopRequest()
    stop.install()
    if config.result_file:  # started by `gputopo train`: stop (and save) if it dies
        from gputopo.train.lifeline import bind_to_parent

        bind_to_parent(stop.request, config.result_file)
    try:  # the handlers stay until the result is written: a late stop signal cannot cut it short
        try:
            summary = train(config, stop)
        except GputopoError as exc:
            write_result(config, {"schema": RESULT_SCHEMA, "error": str(exc), "error_type": type(exc).__name__})
            return exc.exit_code
        except KeyboardInterrupt:
            write_result(config, {"schema": RESULT_SCHEMA, "error": "interrupted before training started",
                                  "error_type": "Interrupted"})  # fmt: skip
            return INTERRUPTED_EXIT_CODE
        write_result(config, summary)
        return INTERRUPTED_EXIT_CODE if summary["status"] == "interrupted" else 0
    finally:
        stop.uninstall()


def _exit(code: int) -> None:
    """Exit now that the result is written: flush, then ``os._exit``, past TensorFlow's thread-pool
    destructors (one hung a child after its save on SIGTERM); with no parent left, clean up first."""
    from gputopo.train.lifeline import orphan_cleanup, parent_gone

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if parent_gone():
        orphan_cleanup(_result_file_of(sys.argv[1:]))
    os._exit(code)


def _result_file_of(argv: Sequence[str]) -> str | None:
    for k, arg in enumerate(argv):
        if arg == "--result-file" and k + 1 < len(argv):
            return argv[k + 1]
        if arg.startswith("--result-file="):
            return arg.split("=", 1)[1]
    return None


def run_as_program() -> None:
    """``python -m gputopo.train.child``: run, and turn a bad flag into one line and its exit code;
    either way the process ends with ``_exit``. TensorFlow's native log goes to the file the parent
    named, before TensorFlow loads (``gputopo.train.native_log``)."""
    from gputopo.train.native_log import redirect_native_stderr

    redirect_native_stderr()
    try:
        _exit(main())
    except GputopoError as exc:  # bad flags caught in TrainConfig.validate
        sys.stderr.write(f"gputopo: error: {exc}\n")
        _exit(exc.exit_code)
