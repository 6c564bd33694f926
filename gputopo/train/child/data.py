"""Training data: an image folder, a cached Keras dataset, or synthetic images; as tf.data pipelines.

The folder layout is the one of the MNIST-as-folders example: ``train/<class>/*.png|jpg`` and
``test/<class>/*`` with the same class folders on both sides. ``scan_image_folder`` checks the layout
and every file's signature in plain Python (no TensorFlow), so ``gputopo train`` can reject bad data
with one clear line before it starts a training process.

Nothing is downloaded: ``mnist`` and ``cifar10`` are used only if ``tf.keras.datasets`` already has
them cached (``~/.keras/datasets``); otherwise the error says how to fetch them once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputopo.errors import InputError

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
JPEG_SIGNATURE = b"\xff\xd8\xff"
KERAS_DATASETS = ("mnist", "cifar10")
SYNTHETIC = "synthetic"
SYNTHETIC_CLASSES = 10
SYNTHETIC_TRAIN_EXAMPLES = 4096
SYNTHETIC_TEST_EXAMPLES = 512
SYNTHETIC_IMAGE_SIZE = 32


@dataclass
class ImageFolder:
    """The files of an image-folder dataset, with integer labels in sorted class-name order."""

    root: Path
    classes: list[str]
    train_files: list[str]
    train_labels: list[int]
    test_files: list[str]
    test_labels: list[int]


def _list_folder(folder: Path) -> list[Path]:
    """The entries of ``folder``, sorted; a folder that cannot be read (chmod 000) is one line."""
    try:
        return sorted(folder.iterdir())
    except OSError as exc:
        raise InputError(f"cannot read folder {folder}: {exc.strerror or exc}") from None


def _class_files(split_dir: Path) -> dict[str, list[Path]]:
    classes: dict[str, list[Path]] = {}
    for entry in _list_folder(split_dir):
        if entry.is_dir() and not entry.name.startswith("."):
            classes[entry.name] = [
                p for p in _list_folder(entry) if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES
            ]
    return classes


def _check_signature(path: Path) -> None:
    """Refuse a file whose first bytes are not a PNG or JPEG signature (cheap: 8 bytes per file)."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(8)
    except OSError as exc:
        raise InputError(f"cannot read image {path}: {exc.strerror or exc}") from None
    if not (head.startswith(PNG_SIGNATURE) or head.startswith(JPEG_SIGNATURE)):
        raise InputError(f"unreadable image {path}: not a PNG or JPEG file")


def scan_image_folder(root: str | os.PathLike[str]) -> ImageFolder:
    """Check a ``train/<class>``, ``test/<class>`` folder and list its images; no TensorFlow.

    Raises ``InputError`` for a missing folder, a missing ``train/``, no images, class folders
    that differ between ``train/`` and ``test/``, or a file that is not a PNG/JPEG image.
    """
    path = Path(root)
    if not path.exists():
        raise InputError(f"data folder {path} does not exist")
    if not path.is_dir():
        raise InputError(f"data folder {path} is not a folder")
    train_dir, test_dir = path / "train", path / "test"
    if not train_dir.is_dir():
        raise InputError(f"data folder {path} has no train/ folder (expected train/<class>/*.png and test/<class>/*.png)")
    train = _class_files(train_dir)
    if not train:
        raise InputError(f"{train_dir} has no class folders (expected train/<class>/*.png)")
    empty = [name for name, files in train.items() if not files]
    if len(empty) == len(train):
        raise InputError(f"{train_dir} has no images (.png, .jpg) in its class folders")
    if empty:
        raise InputError(f"class folder {train_dir / empty[0]} has no images")
    test = _class_files(test_dir) if test_dir.is_dir() else {}
    if test and sorted(test) != sorted(train):
        only_train = sorted(set(train) - set(test))
        only_test = sorted(set(test) - set(train))
        detail = []
        if only_train:
            detail.append(f"only in train/: {', '.join(only_train)}")
        if only_test:
            detail.append(f"only in test/: {', '.join(only_test)}")
        raise InputError(f"class folders differ between train/ and test/ ({'; '.join(detail)})")
    classes = sorted(train)
    label_of = {name: i for i, name in enumerate(classes)}
    result = ImageFolder(path, classes, [], [], [], [])
    for split, files, labels in (
        (train, result.train_files, result.train_labels),
        (test, result.test_files, result.test_labels),
    ):
        for name, paths in split.items():
            for file_path in paths:
                _check_signature(file_path)
                files.append(str(file_path))
                labels.append(label_of[name])
    return result


def find_undecodable_image(tf: Any, data: str, budget_s: float = 60.0) -> tuple[str, str] | None:
    """``(file, TensorFlow's reason)`` for the first image of folder ``data`` that does not decode,
    found by decoding each eagerly (only after a decode error: TF's message names no file). None
    if none fails within ``budget_s`` seconds, or ``data`` is no image folder."""
    import time

    try:
        folder = scan_image_folder(data)
    except InputError:
        return None
    deadline_s = time.monotonic() + budget_s
    for path in folder.train_files + folder.test_files:
        if time.monotonic() > deadline_s:
            return None
        try:
            tf.io.decode_image(tf.io.read_file(path), expand_animations=False)
        except tf.errors.OpError as exc:
            text = (exc.message or str(exc)).strip()
            return path, (text.splitlines()[0] if text else type(exc).__name__)
    return None


def keras_dataset_cache(name: str) -> Path:
    """Where ``tf.keras.datasets.<name>.load_data()`` keeps its download."""
    base = Path(os.environ.get("KERAS_HOME", Path.home() / ".keras")) / "datasets"
    return base / ("mnist.npz" if name == "mnist" else "cifar-10-batches-py")


def check_data_source(data: str) -> str:
    """Validate ``--data`` without TensorFlow; returns its kind: ``synthetic``, ``keras`` or ``folder``."""
    if data == SYNTHETIC:
        return SYNTHETIC
    if data in KERAS_DATASETS:
        if not keras_dataset_cache(data).exists():
            raise InputError(
                f"{data} is not cached at {keras_dataset_cache(data)} and gputopo does not download behind your back; "
                f"fetch it once with: python -c \"import tensorflow as tf; tf.keras.datasets.{data}.load_data()\""
            )
        return "keras"
    scan_image_folder(data)
    return "folder"


@dataclass
class Datasets:
    """Unbatched ``(image float32 [0,1], label int32)`` datasets and what the model needs to know."""

    train: Any  # tf.data.Dataset
    test: Any | None  # tf.data.Dataset or None (no test split)
    num_classes: int
    image_shape: tuple[int, int, int]
    train_examples: int
    test_examples: int
    description: str


def _synthetic(tf: Any, image_size: int, seed: int) -> Datasets:
    """Learnable random images: each class brightens its own horizontal band, plus noise.

    A model can reach high accuracy in a few dozen steps, so "loss goes down" is a real check.
    """
    size = image_size

    def make(count: int, offset: int) -> Any:
        # Stateless ops: the same images in every process and inside a tf.function (PS workers).
        labels = tf.random.stateless_uniform([count], seed=[seed, 2 * offset], minval=0, maxval=SYNTHETIC_CLASSES, dtype=tf.int32)
        noise = tf.random.stateless_uniform([count, size, size, 3], seed=[seed, 2 * offset + 1], maxval=0.5)
        rows = tf.range(size) * SYNTHETIC_CLASSES // size  # which class's band each image row is
        band = tf.cast(tf.equal(rows[None, :], labels[:, None]), tf.float32)  # [count, size]
        images = noise + 0.5 * band[:, :, None, None]
        return tf.data.Dataset.from_tensor_slices((images, labels)), count

    train, n_train = make(SYNTHETIC_TRAIN_EXAMPLES, 0)
    test, n_test = make(SYNTHETIC_TEST_EXAMPLES, 1)
    return Datasets(train, test, SYNTHETIC_CLASSES, (size, size, 3), n_train, n_test, "synthetic banded images")


def _keras(tf: Any, name: str, image_size: int | None) -> Datasets:
    import numpy as np

    module = getattr(tf.keras.datasets, name)
    try:
        (x_train, y_train), (x_test, y_test) = module.load_data()  # cached: check_data_source made sure
    except Exception as exc:  # a damaged cache makes Keras try to download again, which may fail
        raise InputError(
            f"cannot load the cached {name} from {keras_dataset_cache(name)} ({type(exc).__name__}: {exc}); "
            "delete it and fetch it again"
        ) from None

    def prepare(x: Any, y: Any) -> Any:
        if x.ndim == 3:
            x = x[..., None]
        images = x.astype(np.float32) / 255.0
        labels = y.reshape(-1).astype(np.int32)
        ds = tf.data.Dataset.from_tensor_slices((images, labels))
        if image_size is not None:
            ds = ds.map(lambda i, l: (tf.image.resize(i, [image_size, image_size]), l))
        return ds

    height, width, channels = (x_train.shape[1], x_train.shape[2], 1 if x_train.ndim == 3 else x_train.shape[3])
    if image_size is not None:
        height = width = image_size
    return Datasets(
        prepare(x_train, y_train),
        prepare(x_test, y_test),
        int(y_train.max()) + 1,
        (height, width, channels),
        len(x_train),
        len(x_test),
        f"tf.keras.datasets.{name}",
    )


def _folder(tf: Any, root: str, image_size: int | None, image_shape: tuple[int, int, int] | None) -> Datasets:
    folder = scan_image_folder(root)
    if image_shape is None:  # the first image decides size and channels (decoded eagerly, once)
        first = tf.io.decode_image(tf.io.read_file(folder.train_files[0]), expand_animations=False)
        image_shape = tuple(int(d) for d in first.shape)  # type: ignore[assignment]
    height, width, channels = image_shape
    if image_size is not None:
        height = width = image_size

    def load(path: Any, label: Any) -> Any:
        image = tf.io.decode_image(tf.io.read_file(path), channels=channels, expand_animations=False)
        image = tf.image.resize(tf.cast(image, tf.float32) / 255.0, [height, width])
        return image, label

    def make(files: list[str], labels: list[int]) -> Any:
        ds = tf.data.Dataset.from_tensor_slices((files, tf.constant(labels, tf.int32)))
        return ds.map(load, num_parallel_calls=tf.data.AUTOTUNE)

    test = make(folder.test_files, folder.test_labels) if folder.test_files else None
    return Datasets(
        make(folder.train_files, folder.train_labels),
        test,
        len(folder.classes),
        (height, width, channels),
        len(folder.train_files),
        len(folder.test_files),
        f"image folder {folder.root} ({len(folder.classes)} classes)",
    )


def load_datasets(
    tf: Any, data: str, image_size: int | None, seed: int, image_shape: tuple[int, int, int] | None = None
) -> Datasets:
    """The unbatched train/test datasets for ``--data`` (``synthetic``, ``mnist``, ``cifar10`` or a folder).

    ``image_shape`` (from an earlier call) skips decoding a sample image, so the datasets can be
    rebuilt inside a ``tf.function`` on a parameter-server worker.
    """
    kind = check_data_source(data)
    if kind == SYNTHETIC:
        return _synthetic(tf, image_size or SYNTHETIC_IMAGE_SIZE, seed)
    if kind == "keras":
        return _keras(tf, data, image_size)
    return _folder(tf, data, image_size, image_shape)


CACHE_LIMIT_BYTES = 2 * 1024**3


def fits_in_cache(datasets: Datasets, examples: int) -> bool:
    """Keep decoded images in memory (no re-decoding each epoch) only while they take under 2 GiB."""
    height, width, channels = datasets.image_shape
    return examples * height * width * channels * 4 <= CACHE_LIMIT_BYTES


def training_pipeline(tf: Any, datasets: Datasets, global_batch: int, seed: int) -> Any:
    """Shuffled, repeated, batched by the *global* batch, prefetched; shardable across workers.

    The strategy splits each global batch over the replicas. Sharding by DATA (not FILE) works for
    every source here, including in-memory ones.
    """
    ds = datasets.train.cache() if fits_in_cache(datasets, datasets.train_examples) else datasets.train
    ds = ds.shuffle(min(datasets.train_examples, 10_000), seed=seed, reshuffle_each_iteration=True)
    ds = ds.repeat().batch(global_batch, drop_remainder=True).prefetch(tf.data.AUTOTUNE)
    return with_data_sharding(tf, ds)


def evaluation_pipeline(tf: Any, datasets: Datasets, global_batch: int) -> Any | None:
    """The test split batched by the global batch (the last, partial batch kept), or ``None``."""
    if datasets.test is None or datasets.test_examples == 0:
        return None
    ds = datasets.test.cache() if fits_in_cache(datasets, datasets.test_examples) else datasets.test
    ds = ds.batch(global_batch).prefetch(tf.data.AUTOTUNE)
    return with_data_sharding(tf, ds)


def with_data_sharding(tf: Any, ds: Any) -> Any:
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return ds.with_options(options)
