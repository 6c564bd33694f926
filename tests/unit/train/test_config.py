"""gputopo.train.config: the parent<->child contract (flags round trip, values that cannot work)."""

from __future__ import annotations

import pytest

from gputopo.errors import InputError
from gputopo.train.config import TrainConfig


def test_config_round_trips_through_child_flags():
    config = TrainConfig(
        data="/data/mnist folders",
        model="mobilenetv2",
        batch_size=96,
        epochs=3,
        steps_per_epoch=7,
        learning_rate=0.05,
        image_size=32,
        evaluate=False,
        cpu_devices=3,
        strategy="multi-worker",
        cross_device_ops="HierarchicalCopyAllReduce",
        checkpoint_dir="/tmp/ck",
        checkpoint_every=0,
        resume=True,
        workers=["127.0.0.1:1000", "127.0.0.1:1001"],
        task_index=1,
        startup_timeout_s=7.5,
        progress=False,
    )
    assert TrainConfig.from_argv(config.to_argv()) == config
    assert TrainConfig.from_argv(TrainConfig().to_argv()) == TrainConfig()
    assert TrainConfig().to_argv() == []  # defaults are left out: the printed command stays short


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"model": "resnet9000"}, "unknown model"),
        ({"strategy": "horovod"}, "unknown strategy"),
        ({"batch_size": 0}, "--batch-size must be at least 1"),
        ({"steps_per_epoch": 0}, "--steps-per-epoch"),
        ({"learning_rate": -1.0}, "--learning-rate"),
        ({"learning_rate": float("inf")}, "--learning-rate"),
        ({"startup_timeout_s": 0.0}, "--startup-timeout"),
        ({"startup_timeout_s": -5.0}, "--startup-timeout"),
        ({"model": "mobilenetv2", "image_size": 16}, "at least 32x32"),
        ({"cross_device_ops": "Carrier pigeon"}, "unknown cross-device op"),
        ({"checkpoint_every": -5}, "--checkpoint-every"),
        ({"batch_size": 1_000_000_000_000}, "--batch-size must be at most 1048576"),
    ],
)
def test_config_rejects_values_that_cannot_work(changes, message):
    with pytest.raises(InputError, match=message):
        TrainConfig(**changes).validate()

