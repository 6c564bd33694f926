"""The training child's parameter-server loop: asynchronous SGD with ParameterServerStrategy and a
``ClusterCoordinator``.

The parameter servers and workers run in-process (one host), as in the source documents'
``ps``/``worker`` cluster, each worker applying its gradients as soon as it has them (no waiting
for the slowest; stale parameters are the price). ``gputopo.train.child`` hands over to it.
"""

from __future__ import annotations

import os
import time
from typing import Any

from gputopo.errors import InputError
from gputopo.train.workers import LOOPBACK, free_local_ports
from gputopo.train.child.common import (
    NonFiniteLoss,
    RunningMeans,
    StopRequest,
    TrainingState,
    explain_tf_error,
    make_replica_step,
    non_finite_failure,
    startup_finished,
)
from gputopo.train.config import TrainConfig
from gputopo.train.child.data import check_data_source, fits_in_cache, load_datasets
from gputopo.train.child.progress import epoch_record, progress_bar, run_summary

MAX_CHUNK_STEPS = 50


def start_cluster(
    tf: Any, ps_count: int, worker_count: int, addresses: list[str] | None = None
) -> tuple[dict[str, list[str]], list[Any], Any, Any]:
    """In-process servers on ``addresses`` (workers first; default: free loopback ports):
    ``(cluster, servers, strategy, coordinator)``.

    The servers live as long as the process; the caller keeps them referenced until it is done.
    """
    if addresses and len(addresses) != ps_count + worker_count:
        raise InputError(
            f"--server-addresses lists {len(addresses)} addresses for {worker_count} workers and {ps_count} parameter servers"
        )
    addresses = addresses or [f"{LOOPBACK}:{p}" for p in free_local_ports(ps_count + worker_count)]
    cluster = {"worker": addresses[:worker_count], "ps": addresses[worker_count:]}
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
    return cluster, servers, strategy, coordinator


def train_parameter_server(tf: Any, config: TrainConfig, stop: StopRequest) -> dict[str, Any]:
    """Asynchronous SGD: ``--ps`` parameter servers and ``--ps-workers`` workers in this process.

    The coordinator schedules steps on whichever worker is free; each step reads the variables from
    the parameter servers, computes gradients on its own batch and applies them there at once.
    """
    ps_count, worker_count = config.ps or 1, config.ps_workers or 2
    cluster, servers, strategy, coordinator = start_cluster(tf, ps_count, worker_count, config.server_addresses)
    if check_data_source(config.data) == "keras":
        raise InputError("--strategy parameter-server reads synthetic data or an image folder, not mnist/cifar10 arrays")
    run = _ParameterServerRun(tf, config, stop, strategy, coordinator)
    run.train()
    del servers  # in-process servers live as long as the process; kept referenced until here
    summary = run.summary(cluster["worker"], worker_count)
    summary["parameter_servers"] = cluster["ps"]
    return summary


class _ParameterServerRun:
    """One parameter-server job: its data, model, scheduled steps and what they reported."""

    def __init__(self, tf: Any, config: TrainConfig, stop: StopRequest, strategy: Any, coordinator: Any) -> None:
        self.tf, self.config, self.stop, self.strategy, self.coordinator = tf, config, stop, strategy, coordinator
        self.batch = config.batch_size  # each scheduled step is one worker's batch
        self.datasets = load_datasets(tf, config.data, config.image_size, config.seed)
        self.steps_per_epoch = config.steps_per_epoch or max(1, self.datasets.train_examples // self.batch)
        self.total_steps = config.epochs * self.steps_per_epoch
        self.state = TrainingState.create(tf, config, strategy, self.datasets, self.total_steps)
        self.start_step = self.state.start_step
        self.step = self.start_step
        self.last_saved_step: int | None = self.start_step or None
        self.history: list[dict[str, Any]] = []
        self.initial_loss: float | None = None
        self.initial_loss_steps: int | None = None
        self.test_result: tuple[float, float] | None = None
        self.elapsed_s = 0.0

    def _per_worker_iterator(self) -> Any:
        tf, config, datasets, batch, strategy = self.tf, self.config, self.datasets, self.batch, self.strategy
        start_step = self.start_step

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

        return iter(self.coordinator.create_per_worker_dataset(per_worker_dataset_fn))

    def _worker_step(self) -> Any:
        tf, strategy = self.tf, self.strategy
        replica_step = make_replica_step(tf, self.state.model, self.state.optimizer, self.batch)

        @tf.function
        def worker_step(iterator: Any) -> Any:
            per_replica = strategy.run(replica_step, args=next(iterator))
            return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

        return worker_step

    def evaluate(self) -> tuple[float, float] | None:
        tf, model, datasets = self.tf, self.state.model, self.datasets
        if not self.config.evaluate or datasets.test is None or not datasets.test_examples:
            return None
        loss_sum = correct = count = 0.0
        for images, labels in datasets.test.batch(self.batch):
            logits = model(images, training=False)
            loss_sum += float(tf.reduce_sum(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)))
            correct += float(tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, -1, output_type=tf.int32), labels), tf.float32)))
            count += int(labels.shape[0])
        return (loss_sum / count, correct / count) if count else None

    def train(self) -> None:
        """Steps are scheduled in chunks; between chunks the coordinator joins, so progress, epochs and
        checkpoints see a consistent step count (within a chunk the workers run freely, asynchronously)."""
        config, batch, spe, total_steps = self.config, self.batch, self.steps_per_epoch, self.total_steps
        iterator, worker_step = self._per_worker_iterator(), self._worker_step()
        chunk = max(1, min(spe, config.checkpoint_every or spe, MAX_CHUNK_STEPS))
        epoch_means = RunningMeans()
        progress, task = progress_bar(config, total_steps, self.start_step)
        start_s = time.perf_counter()
        with progress:
            while self.step < total_steps and not self.stop.requested:
                count = min(chunk, total_steps - self.step, spe - self.step % spe)
                remote = [self.coordinator.schedule(worker_step, args=(iterator,)) for _ in range(count)]
                self.coordinator.join()
                if self.step == self.start_step:
                    startup_finished(config)
                chunk_means = RunningMeans(pending=[value.fetch() for value in remote])
                epoch_means.pending.extend(chunk_means.pending)
                try:
                    chunk_means.collect(batch)
                except NonFiniteLoss as exc:
                    raise non_finite_failure(exc.loss, self.step + exc.offset + 1, config, self.last_saved_step) from None
                if self.initial_loss is None:
                    self.initial_loss, self.initial_loss_steps = chunk_means.loss, count
                self.step += count
                rate = (self.step - self.start_step) * batch / (time.perf_counter() - start_s)
                progress.update(task, completed=self.step, loss=f"{chunk_means.loss:.4f}",
                                accuracy=f"{chunk_means.accuracy:.3f}", rate=f"{rate:.0f}")  # fmt: skip
                if self.step % spe == 0:
                    epoch_means = self._end_epoch(epoch_means)
                if self.state.manager is not None and (
                    self.step == total_steps or (config.checkpoint_every and self.step % config.checkpoint_every == 0)
                ):
                    self._save()
        self.elapsed_s = time.perf_counter() - start_s
        if self.state.manager is not None and self.stop.requested:
            self._save()
        epoch_means.collect(batch)
        if epoch_means.steps:
            self.history.append(epoch_record(self.step / spe, self.step, epoch_means, None))

    def _save(self) -> None:
        """Checkpoint ``ckpt-<step>``; weights that are not finite stop the run instead."""
        self.state.check_finite(self.tf, self.step, self.config, self.last_saved_step)
        self.state.save(self.tf, self.step, self.config)
        self.last_saved_step = self.step

    def _end_epoch(self, epoch_means: RunningMeans) -> RunningMeans:
        """Evaluate and record the epoch just finished; returns the next epoch's (empty) means."""
        epoch_means.collect(self.batch)
        try:
            self.test_result = self.evaluate()
        except self.tf.errors.OpError as exc:  # e.g. an image of test/ that does not decode
            raise explain_tf_error(self.tf, exc, self.config, 0) from None
        self.history.append(epoch_record(self.step // self.steps_per_epoch, self.step, epoch_means, self.test_result))
        return RunningMeans()

    def summary(self, workers: list[str], worker_count: int) -> dict[str, Any]:
        step, start_step, manager = self.step, self.start_step, self.state.manager
        return run_summary(
            self.config, self.datasets, self.state.model, self.stop, self.history,
            status="interrupted" if self.stop.requested and step < self.total_steps else "completed",
            device_kind="GPU" if self.tf.config.list_physical_devices("GPU") else "CPU",
            devices=workers,
            replicas=worker_count,
            workers=worker_count,
            per_replica_batch_size=self.batch,
            steps_per_epoch=self.steps_per_epoch,
            start_step=start_step,
            step=step,
            initial_loss=self.initial_loss,
            initial_loss_steps=self.initial_loss_steps,
            test_result=self.test_result,
            examples_per_second=(step - start_step) * self.batch / self.elapsed_s
            if self.elapsed_s > 0 and step > start_step else None,
            checkpoint_path=manager.latest_checkpoint if manager is not None else None,
        )  # fmt: skip
