"""What the training child's two loops share (the synchronous one in ``child``, the
parameter-server one in ``ps_child``): the stop flag, running means, the model and optimizer with
their checkpoint, one replica's step, TensorFlow errors in one line, and the result handed back.

Every function that needs TensorFlow takes the ``tf`` module as an argument (``gputopo.tfruntime``
imports it).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import Any

from gputopo.errors import GputopoError, InputError, TrainingFailed
from gputopo.train.checkpoints import (
    check_local_folder,
    checkpoint_manager,
    remove_leftovers,
    restore_checkpoint,
    resume_hint,
    set_aside_damaged_state,
    write_marker,
)
from gputopo.train.config import DEFAULT_LEARNING_RATE, TrainConfig, is_chief, started_marker


def note(config: TrainConfig, message: str, always: bool = False) -> None:
    """A line on standard error from the chief (``gputopo train: ...``), unless progress is off
    (``--json``); ``always``: also then (what was done to the user's checkpoints or settings)."""
    if (config.progress or always) and is_chief(config):
        sys.stderr.write(f"gputopo train: {message}\n")
        sys.stderr.flush()


class StopRequest:
    """Turns SIGINT/SIGTERM into a flag the loop checks after each step (never mid-step or mid-save).

    The synchronous loop does not stop on it alone: it all-reduces the flag with the next step, so
    every worker stops after the same step (``SynchronousLoop._stop_agreed``)."""

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

    def request(self) -> None:
        """Ask to stop, as a first signal does (the parent died: nothing to tell)."""
        self.requested = True
        self.signal_name = self.signal_name or "parent gone"

    def _handle(self, signum: int, frame: Any) -> None:
        self.requested = True
        self.signal_name = signal.Signals(signum).name
        # A second signal acts at once, even while TensorFlow is blocked (e.g. waiting for a dead peer).
        signal.signal(signum, signal.default_int_handler if signum == signal.SIGINT else signal.SIG_DFL)


class NonFiniteLoss(Exception):
    """A step's loss was NaN or infinite; ``offset`` is its place among the values collected."""

    def __init__(self, offset: int, loss: float) -> None:
        super().__init__(f"loss {loss}")
        self.offset, self.loss = offset, loss


def non_finite_failure(loss: float, step: int, config: TrainConfig, last_saved_step: int | None) -> TrainingFailed:
    """One line for a run stopped at its first non-finite loss (nothing of it was saved)."""
    kept = resume_hint(config.checkpoint_dir if last_saved_step is not None else None)
    if last_saved_step is not None:
        kept += " (with a lower --learning-rate)"
    return TrainingFailed(
        f"the loss became {loss} at step {step}; training stopped there and saved nothing of it; {kept}"
    )


@dataclass
class RunningMeans:
    """Sums of (loss, correct, examples) pulled from the device only when someone reads them.

    ``collect`` raises ``NonFiniteLoss`` at the first NaN or infinite loss (left uncounted)."""

    pending: list[Any] = field(default_factory=list)  # reduced [loss, correct(, stop votes)] tensors, one per step
    loss_sum: float = 0.0
    correct: float = 0.0
    steps: int = 0
    examples: int = 0

    def add(self, reduced: Any) -> None:
        self.pending.append(reduced)

    def collect(self, global_batch: int) -> None:
        for offset, value in enumerate(self.pending):  # tensors (synchronous loop) or fetched numpy arrays
            values = value.numpy() if hasattr(value, "numpy") else value  # [loss, correct(, stop votes)]
            loss, correct = float(values[0]), float(values[1])
            if not math.isfinite(loss):
                del self.pending[: offset + 1]
                raise NonFiniteLoss(offset, loss)
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


def weights_finite(tf: Any, model: Any) -> bool:
    """Whether every weight is a finite number (checked before each save: never keep a NaN model)."""
    return all(bool(tf.reduce_all(tf.math.is_finite(w)).numpy()) for w in model.weights if tf.as_dtype(w.dtype).is_floating)


def weights_fingerprint(model: Any) -> str:
    """SHA-256 of all model weights' bytes: equal only if every worker holds the very same weights."""
    digest = hashlib.sha256()
    for weight in model.weights:
        digest.update(weight.numpy().tobytes())
    return digest.hexdigest()


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
        from gputopo.train.child.models import build_model

        with strategy.scope():
            model = build_model(tf, config.model, datasets.image_shape, datasets.num_classes)
            optimizer = tf.keras.optimizers.Adam(learning_rate=config.learning_rate or DEFAULT_LEARNING_RATE)
            optimizer.build(model.trainable_variables)
            step_variable = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step_variable)
        if config.checkpoint_dir is not None:  # checked by the parent too; a child may be run by hand
            check_local_folder(config.checkpoint_dir)
        set_aside_damaged_state(config, lambda message: note(config, message, always=True))
        if is_chief(config):  # before any worker saves (their first save follows steps the chief joins)
            remove_leftovers(config.checkpoint_dir)
        manager = checkpoint_manager(tf, config, checkpoint)
        start_step = restore_checkpoint(
            tf, config, checkpoint, step_variable, lambda message: note(config, message, always=True)
        )
        if start_step:
            _apply_learning_rate(optimizer, config)
        if start_step > total_steps:
            raise InputError(
                f"the checkpoint is at step {start_step}, past the {total_steps} steps asked for; "
                "ask for more epochs/steps"
            )
        return cls(model, optimizer, step_variable, checkpoint, manager, start_step)

    def check_finite(self, tf: Any, step: int, config: TrainConfig, last_saved_step: int | None) -> None:
        """Before each save: weights that are not finite are never saved (the older checkpoints stay)."""
        if not weights_finite(tf, self.model):
            raise TrainingFailed(
                f"the weights are no longer finite numbers at step {step}; training stopped there and saved nothing "
                f"of it; {resume_hint(config.checkpoint_dir if last_saved_step is not None else None)}"
            )

    def save(self, tf: Any, step: int, config: TrainConfig) -> None:
        """Save checkpoint ``ckpt-<step>`` (the loops call ``check_finite`` first); a folder that
        cannot be written is one clear error."""
        self.step_variable.assign(step)
        try:
            write_marker(config)
            self.manager.save(checkpoint_number=step)
        except (tf.errors.OpError, OSError) as exc:
            text = (getattr(exc, "message", None) or str(exc)).strip()
            raise TrainingFailed(
                f"cannot write the checkpoint of step {step} to {self.manager.directory} "
                f"({text.splitlines()[0] if text else type(exc).__name__}); {resume_hint(config.checkpoint_dir)}"
            ) from None


def _apply_learning_rate(optimizer: Any, config: TrainConfig) -> None:
    """On ``--resume`` the checkpoint's learning rate is restored; a ``--learning-rate`` given now
    replaces it, and the run says so."""
    restored = float(optimizer.learning_rate.numpy())
    if config.learning_rate is None:
        note(config, f"learning rate {restored:g} (from the checkpoint)")
    elif not math.isclose(config.learning_rate, restored, rel_tol=1e-6):
        optimizer.learning_rate.assign(config.learning_rate)
        note(config, f"learning rate set to {config.learning_rate:g} (the checkpoint had {restored:g})", always=True)


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


def explain_tf_error(tf: Any, exc: Any, config: TrainConfig, last_saved_step: int | None) -> GputopoError:
    """Turn a TF runtime error into one line the user can act on."""
    first_line = (exc.message or str(exc)).strip().splitlines()[0] if (exc.message or str(exc)).strip() else type(exc).__name__
    if isinstance(exc, tf.errors.InvalidArgumentError) and any(
        word in str(exc) for word in ("image", "PNG", "JPEG", "decode", "Decode")
    ):
        # The first line is often just "Graph execution error:"; the decoder says what is wrong further down.
        from gputopo.train.child.data import find_undecodable_image

        culprit = find_undecodable_image(tf, config.data)
        if culprit is not None:
            return InputError(f"image {culprit[0]} could not be decoded ({culprit[1]})")
        said = re.search(r"(?:Invalid|Unknown image|Failed to (?:decode|initialize))[^\n\[]*", str(exc))
        return InputError(f"an image in {config.data} could not be decoded ({said.group(0).strip() if said else first_line})")
    saved = resume_hint(config.checkpoint_dir if last_saved_step is not None else None)
    if config.strategy != "mirrored" and isinstance(
        exc, (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.CancelledError, tf.errors.AbortedError, tf.errors.InternalError)
    ):
        return TrainingFailed(f"lost contact with another worker ({type(exc).__name__}: {first_line}); {saved}")
    return TrainingFailed(f"training failed with {type(exc).__name__}: {first_line}; {saved}")


def startup_finished(config: TrainConfig) -> None:
    """Tell the parent that start-up is over: from here on, the start-up timeout no longer applies."""
    if config.result_file:
        started_marker(config.result_file).touch()


def write_result(config: TrainConfig, payload: dict[str, Any]) -> None:
    """Hand the summary (or error) to the parent via ``--result-file`` (atomic), else print it."""
    if config.result_file:
        from gputopo.fileio import atomic_write_text

        atomic_write_text(config.result_file, json.dumps(payload, indent=2))
    elif "error" in payload:
        sys.stderr.write(f"gputopo: error: {payload['error']}\n")
    else:
        sys.stdout.write(json.dumps(payload, indent=2) + "\n")
