"""The models ``gputopo train`` can train: a small CNN (default) and MobileNetV2 (random init).

Both return logits (no softmax): the loop computes per-example cross-entropy from logits, which is
numerically safer and lets it average over the *global* batch itself.
"""

from __future__ import annotations

from typing import Any

from gputopo.errors import InputError


def build_model(tf: Any, name: str, image_shape: tuple[int, int, int], num_classes: int) -> Any:
    """A Keras model for ``name`` (call inside ``strategy.scope()`` so its variables are mirrored)."""
    if name == "cnn":
        return small_cnn(tf, image_shape, num_classes)
    if name == "mobilenetv2":
        height, width, channels = image_shape
        if min(height, width) < 32:
            raise InputError(
                f"MobileNetV2 needs images of at least 32x32, these are {height}x{width}; add --image-size 32"
            )
        inputs = tf.keras.Input(shape=image_shape)
        x = inputs
        if channels != 3:  # MobileNetV2 expects 3 channels (MNIST is grey): repeat the one we have
            x = tf.keras.layers.Concatenate()([x, x, x]) if channels == 1 else tf.keras.layers.Conv2D(3, 1)(x)
        base = tf.keras.applications.MobileNetV2(
            input_shape=(height, width, 3), weights=None, include_top=True, classes=num_classes,
            classifier_activation=None,
        )
        return tf.keras.Model(inputs, base(x), name="mobilenetv2")
    raise InputError(f"unknown model {name!r}; choose cnn or mobilenetv2")


def small_cnn(tf: Any, image_shape: tuple[int, int, int], num_classes: int) -> Any:
    """Two conv layers, one hidden dense layer: trains in seconds on CPU devices."""
    layers = tf.keras.layers
    return tf.keras.Sequential(
        [
            tf.keras.Input(shape=image_shape),
            layers.Conv2D(16, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Conv2D(32, 3, padding="same", activation="relu"),
            layers.MaxPooling2D(),
            layers.Flatten(),  # keeps where features are (pooling them away would lose position)
            layers.Dense(64, activation="relu"),
            layers.Dense(num_classes),
        ],
        name="small_cnn",
    )
