"""How much does `gputopo train` cost over a minimal hand-written MirroredStrategy loop?

In one run, on logical CPU devices (no GPU needed), alternating the two so machine noise hits both:

1. `gputopo train --cpu-devices N --no-eval --no-checkpoint --json` (the full tool: plan, child
   process, distributed tf.data pipeline, progress bookkeeping) -> its examples/s;
2. a minimal MirroredStrategy loop written by hand (same model, devices, global batch, data and
   timing rule: the first, compiling step is not timed) -> its examples/s;

then prints the median ratio (target: >= 0.95) and the scaling table of `gputopo train --scaling`.

Usage: python benchmarks/train_overhead.py [--devices 2] [--batch 64] [--steps 150] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

HAND_WRITTEN_LOOP = textwrap.dedent(
    """
    import os, sys, time
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    from gputopo.train.child.data import SYNTHETIC_IMAGE_SIZE, load_datasets
    from gputopo.train.child.models import build_model

    devices, batch, steps = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * devices)
    tf.keras.utils.set_random_seed(0)
    strategy = tf.distribute.MirroredStrategy([d.name for d in tf.config.list_logical_devices("CPU")])
    data = load_datasets(tf, "synthetic", SYNTHETIC_IMAGE_SIZE, 0)  # the same images as gputopo's
    ds = data.train.cache().shuffle(4096, seed=0).repeat().batch(batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    iterator = iter(strategy.experimental_distribute_dataset(ds))
    with strategy.scope():
        model = build_model(tf, "cnn", data.image_shape, data.num_classes)
        optimizer = tf.keras.optimizers.Adam(0.001)
        optimizer.build(model.trainable_variables)  # Keras 3: create slots here, not inside tf.function

    def step_fn(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            per_example = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_step(it):
        return strategy.reduce(tf.distribute.ReduceOp.SUM, strategy.run(step_fn, args=next(it)), axis=None)

    train_step(iterator).numpy()  # compile: not timed (gputopo does the same)
    start = time.perf_counter()
    for _ in range(steps - 1):
        loss = train_step(iterator)
    loss.numpy()
    print((steps - 1) * batch / (time.perf_counter() - start))
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def gputopo_rate(devices: int, batch: int, steps: int) -> float:
    command = [sys.executable, "-m", "gputopo", "train", "--cpu-devices", str(devices), "--batch-size", str(batch),
               "--steps-per-epoch", str(steps), "--no-eval", "--no-checkpoint", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=REPO, check=True)
    return float(json.loads(done.stdout)["examples_per_second"])


def hand_written_rate(devices: int, batch: int, steps: int) -> float:
    command = [sys.executable, "-c", HAND_WRITTEN_LOOP, str(devices), str(batch), str(steps)]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=REPO, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def scaling(devices: int, batch: int, steps: int) -> list[dict]:
    sizes = ",".join(str(1 << i) for i in range(devices.bit_length()) if 1 << i <= devices)
    command = [sys.executable, "-m", "gputopo", "train", "--cpu-devices", str(devices), "--batch-size", str(batch),
               "--scaling", sizes, "--scaling-steps", str(steps), "--json"]
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=REPO, check=True)
    return json.loads(done.stdout)["scaling"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2, help="logical CPU devices")
    parser.add_argument("--batch", type=int, default=64, help="global batch")
    parser.add_argument("--steps", type=int, default=150)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--scaling-devices", type=int, default=4)
    args = parser.parse_args()

    print(f"cpu cores: {os.cpu_count()}, logical CPU devices: {args.devices}, global batch {args.batch}, "
          f"{args.steps} steps, small CNN on 32x32 synthetic images, {args.repeats} alternating repeats")
    tool, hand = [], []
    for repeat in range(args.repeats):
        tool.append(gputopo_rate(args.devices, args.batch, args.steps))
        hand.append(hand_written_rate(args.devices, args.batch, args.steps))
        print(f"  repeat {repeat + 1}: gputopo train {tool[-1]:8.0f} ex/s   hand-written loop {hand[-1]:8.0f} ex/s"
              f"   ratio {tool[-1] / hand[-1]:.3f}")
    ratios = [t / h for t, h in zip(tool, hand)]
    ratio = statistics.median(ratios)
    print(f"median: gputopo train {statistics.median(tool):.0f} ex/s, hand-written {statistics.median(hand):.0f} ex/s")
    print(f"ratio gputopo/hand-written: {ratio:.3f} (target >= 0.95: {'met' if ratio >= 0.95 else 'NOT met'})")

    print(f"\nscaling on logical CPU devices (same per-replica batch {args.batch // args.scaling_devices}, "
          f"{args.steps} steps each; {os.cpu_count()} cores share all devices, so this shows overhead, not GPU speed-up):")
    print(f"  {'devices':>7} {'global batch':>12} {'examples/s':>11} {'speed-up':>9} {'efficiency':>10}")
    for row in scaling(args.scaling_devices, args.batch, args.steps):
        print(f"  {row['devices']:>7} {row['global_batch_size']:>12} {row['examples_per_second']:>11.0f} "
              f"{row['speedup']:>8.2f}x {row['scaling_efficiency']:>10.0%}")


if __name__ == "__main__":
    main()
