"""The models `gputopo train` offers: they build for the data's shape and return logits per class."""

from __future__ import annotations

import pytest

from gputopo.errors import InputError

pytestmark = pytest.mark.tf


@pytest.mark.parametrize("name, shape", [("cnn", (12, 12, 3)), ("cnn", (28, 28, 1)), ("mobilenetv2", (32, 32, 1))])
def test_models_return_one_logit_per_class(tf_cpu_devices, name, shape):
    from gputopo.tfruntime import import_tensorflow
    from gputopo.train.child.models import build_model

    tf = import_tensorflow()
    model = build_model(tf, name, shape, 7)
    logits = model(tf.random.stateless_uniform((4, *shape), seed=[1, 2]), training=False)
    assert tuple(logits.shape) == (4, 7)
    # Logits, not probabilities (the loop applies softmax cross-entropy itself): some are negative.
    assert float(tf.reduce_min(logits)) < 0.0


def test_mobilenetv2_needs_32_pixels(tf_cpu_devices):
    from gputopo.tfruntime import import_tensorflow
    from gputopo.train.child.models import build_model

    with pytest.raises(InputError, match="at least 32x32"):
        build_model(import_tensorflow(), "mobilenetv2", (28, 28, 1), 10)
