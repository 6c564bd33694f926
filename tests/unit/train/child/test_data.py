"""The image-folder checks of gputopo.train.child.data (plain Python, no TensorFlow); the PNG writer is
tests/image_folders.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from image_folders import make_image_folder

from gputopo.errors import InputError
from gputopo.train.child.data import check_data_source, keras_dataset_cache, scan_image_folder


def test_a_good_folder_is_listed_with_sorted_class_labels(tmp_path: Path):
    make_image_folder(tmp_path, classes=("b", "a"), train_per_class=3, test_per_class=2)
    folder = scan_image_folder(tmp_path)
    assert folder.classes == ["a", "b"]
    assert len(folder.train_files) == 6 and len(folder.test_files) == 4
    assert folder.train_labels == [0, 0, 0, 1, 1, 1]
    assert all("/train/a/" in f for f in folder.train_files[:3])
    assert check_data_source(str(tmp_path)) == "folder"


def test_missing_and_empty_folders(tmp_path: Path):
    with pytest.raises(InputError, match="does not exist"):
        scan_image_folder(tmp_path / "nope")
    with pytest.raises(InputError, match="no train/ folder"):
        scan_image_folder(tmp_path)
    (tmp_path / "train").mkdir()
    with pytest.raises(InputError, match="no class folders"):
        scan_image_folder(tmp_path)
    (tmp_path / "train" / "cat").mkdir()
    (tmp_path / "train" / "cat" / "notes.txt").write_text("not an image")
    with pytest.raises(InputError, match="has no images"):
        scan_image_folder(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(InputError, match="is not a folder"):
        scan_image_folder(tmp_path / "file")


def test_class_folders_must_match_between_train_and_test(tmp_path: Path):
    make_image_folder(tmp_path, classes=("cat", "dog"), train_per_class=1, test_per_class=1)
    (tmp_path / "test" / "dog").rename(tmp_path / "test" / "bird")
    with pytest.raises(InputError, match=r"only in train/: dog; only in test/: bird"):
        scan_image_folder(tmp_path)


def test_a_file_that_is_not_an_image_is_named(tmp_path: Path):
    make_image_folder(tmp_path, classes=("cat",), train_per_class=2, test_per_class=1)
    bad = tmp_path / "train" / "cat" / "broken.png"
    bad.write_bytes(b"GIF89a garbage that is not a png")
    with pytest.raises(InputError, match=r"unreadable image .*broken\.png: not a PNG or JPEG"):
        scan_image_folder(tmp_path)


def test_keras_datasets_are_never_downloaded(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("KERAS_HOME", str(tmp_path))
    assert keras_dataset_cache("mnist") == tmp_path / "datasets" / "mnist.npz"
    with pytest.raises(InputError, match=r"not cached .*tf.keras.datasets.cifar10.load_data\(\)"):
        check_data_source("cifar10")
    (tmp_path / "datasets").mkdir()
    (tmp_path / "datasets" / "mnist.npz").write_bytes(b"stand-in")
    assert check_data_source("mnist") == "keras"
    assert check_data_source("synthetic") == "synthetic"
