"""The image datasets (reconstruction §3): Fashion-MNIST from its prepared files, CIFAR-10/100 from
torchvision's.

``fashion_mnist`` reads the files ``dlgn_lib.data.prepare`` wrote (checksums verified) and splits
them; ``cifar`` reads torchvision's CIFAR files (downloading them only when asked), and
``cifar_dataset_from_arrays`` turns any CIFAR-shaped arrays into a ``Dataset`` with the split and
normalisation rules of the series. Images become float32 tensors.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import numpy as np
import torch

from dlgn_lib import locations

from .base import Dataset, DatasetNotAvailable, _check_choice, _check_positive_int
from .prepare import _fashion_dir, _raw_dir, _reachable, _read_prepared

__all__ = []

# --------------------------------------------------------------------------------------------
# Fashion-MNIST (reconstruction §3): prepared once, then loaded from data_dir()/fashion_mnist
# --------------------------------------------------------------------------------------------

FASHION_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot")
FASHION_VAL_RULE = "validation = last 10% of each class's training images, in file order"


def _per_class_rows(labels: np.ndarray, pick: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """Rows chosen by ``pick`` from each class's rows (in file order), returned in file order."""
    return np.sort(np.concatenate([pick(np.flatnonzero(labels == c))
                                   for c in np.unique(labels)]))


def fashion_mnist(flatten: bool = True, n_per_class_train: int | None = None,
                  n_per_class_val: int | None = None, n_per_class_test: int | None = None,
                  root: Path | str | None = None) -> Dataset:
    """Fashion-MNIST from the prepared files (reconstruction §3; claim C4, table T).

    Validation is the last 10% of each class's training images in file order (600 per class);
    training keeps the first 90%. ``n_per_class_*`` keep the first k images of each class of
    that split (quick profiles). Pixels are scaled to [0, 1].

    Args:
        flatten: inputs of shape (N, 784) when True, (N, 1, 28, 28) otherwise.

    Raises:
        DatasetNotAvailable: the data is not prepared (run ``make data``).
    """
    for argument, value in (("n_per_class_train", n_per_class_train),
                            ("n_per_class_val", n_per_class_val),
                            ("n_per_class_test", n_per_class_test)):
        if value is not None:
            _check_positive_int(argument, value)
    record, arrays = _read_prepared(_fashion_dir(root))
    train_labels = arrays["train_labels"]
    rows = {
        "train": ("train", _per_class_rows(
            train_labels, lambda r: r[:len(r) - len(r) // 10][:n_per_class_train])),
        "val": ("train", _per_class_rows(
            train_labels, lambda r: r[len(r) - len(r) // 10:][:n_per_class_val])),
        "test": ("test", _per_class_rows(arrays["test_labels"], lambda r: r[:n_per_class_test])),
    }
    shape = (-1, 784) if flatten else (-1, 1, 28, 28)
    parts = {}
    for part, (origin, index) in rows.items():
        images = arrays[f"{origin}_images"][index]
        parts[f"x_{part}"] = torch.from_numpy(images.reshape(shape).astype(np.float32) / 255.0)
        parts[f"y_{part}"] = torch.from_numpy(arrays[f"{origin}_labels"][index])
    meta = {"split": record["split"], "val_rule": FASHION_VAL_RULE, "classes": FASHION_CLASSES,
            "sha256": record["sha256"]}
    return Dataset(name="fashion_mnist", task="multiclass", n_classes=10,
                   source=record["source"], meta=meta, **parts)


# --------------------------------------------------------------------------------------------
# CIFAR-10/100 (reconstruction §3): torchvision only; no offline source exists
# --------------------------------------------------------------------------------------------

CIFAR_CLASSES = {"cifar10": 10, "cifar100": 100}
CIFAR_VAL_SIZE = 5000


def cifar_dataset_from_arrays(images, labels, test_images, test_labels, name: str = "cifar10",
                              n_val: int = CIFAR_VAL_SIZE, source: str = "arrays", *,
                              n_train: int | None = None, n_test: int | None = None) -> Dataset:
    """A CIFAR Dataset from uint8 NHWC image arrays and integer labels.

    The last ``n_val`` training images (file order) become the validation set; the first
    ``n_train`` of the rest the training set (all of them when None), and the first ``n_test``
    test images the test set (all when None). Images become float32 (N, 3, H, W), normalised per
    channel with the mean and standard deviation of the training images used (kept in ``meta``).
    """
    _check_choice("name", name, CIFAR_CLASSES)
    images, test_images = np.asarray(images), np.asarray(test_images)
    labels = np.asarray(labels, dtype=np.int64)
    test_labels = np.asarray(test_labels, dtype=np.int64)
    for argument, array, label_array in (("images", images, labels),
                                         ("test_images", test_images, test_labels)):
        if array.dtype != np.uint8 or array.ndim != 4 or array.shape[-1] != 3:
            raise ValueError(f"{argument} must be uint8 of shape (N, H, W, 3), got "
                             f"{array.dtype} {array.shape}")
        if len(label_array) != len(array):
            raise ValueError(f"{argument} has {len(array)} images but {len(label_array)} labels")
    n_classes = CIFAR_CLASSES[name]
    for argument, array in (("labels", labels), ("test_labels", test_labels)):
        if array.size and (array.min() < 0 or array.max() >= n_classes):
            raise ValueError(f"{argument} must lie in 0..{n_classes - 1} for {name}")
    _check_positive_int("n_val", n_val)
    if n_val >= len(images):
        raise ValueError(f"n_val={n_val} leaves no training images out of {len(images)}")
    n_rest = len(images) - n_val
    for argument, value, available in (("n_train", n_train, n_rest), ("n_test", n_test, len(test_images))):
        if value is not None:
            _check_positive_int(argument, value)
            if value > available:
                raise ValueError(f"{argument}={value} is more than the {available} images available")
    val_images, val_labels = images[n_rest:], labels[n_rest:]
    n_train = n_rest if n_train is None else n_train
    n_test = len(test_images) if n_test is None else n_test
    test_images, test_labels = test_images[:n_test], test_labels[:n_test]
    scaled = images[:n_train].astype(np.float64) / 255.0
    mean, std = scaled.mean(axis=(0, 1, 2)), scaled.std(axis=(0, 1, 2))

    def to_tensor(array):
        x = (array.astype(np.float32) / 255.0 - mean.astype(np.float32)) / std.astype(np.float32)
        return torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))

    parts = {"x_train": to_tensor(images[:n_train]), "y_train": torch.from_numpy(labels[:n_train]),
             "x_val": to_tensor(val_images), "y_val": torch.from_numpy(val_labels),
             "x_test": to_tensor(test_images), "y_test": torch.from_numpy(test_labels)}
    meta = {"mean": mean.tolist(), "std": std.tolist(),
            "val_rule": f"validation = last {n_val} official training images",
            "split": f"train = first {n_train:,} official training images, test = first {n_test:,} "
                     f"official test images"}
    return Dataset(name=name, task="multiclass", n_classes=n_classes, source=source, meta=meta,
                   **parts)


def cifar(name: str = "cifar10", root: Path | str | None = None, download: bool = False, *,
          n_train: int | None = None, n_val: int = CIFAR_VAL_SIZE, n_test: int | None = None) -> Dataset:
    """CIFAR-10/100 through torchvision (reconstruction §3; table T), split as in
    :func:`cifar_dataset_from_arrays`.

    Args:
        root: folder of torchvision's files; default ``<data dir>/raw``.
        download: let torchvision download when the files are missing (checked for
            reachability first, so an offline machine fails fast).
        n_train, n_val, n_test: sizes of the splits (None: all the images there are).

    Raises:
        DatasetNotAvailable: the files are missing and cannot be downloaded.
    """
    from torchvision.datasets import CIFAR10, CIFAR100

    _check_choice("name", name, CIFAR_CLASSES)
    root = Path(root) if root is not None else _raw_dir(None)
    kind = CIFAR10 if name == "cifar10" else CIFAR100
    folder = root / kind.base_folder
    if download and not _reachable(kind.url):
        download = False
    try:
        sets = {train: kind(root, train=train, download=download) for train in (True, False)}
    except RuntimeError:
        raise DatasetNotAvailable(
            f"{name} is not available offline, missing folder", folder,
            f"Run `dlgn_lib.data.cifar({name!r}, download=True)` with internet access, or copy "
            f"torchvision's '{kind.base_folder}' folder into {locations.display_path(root)}."
        ) from None
    return cifar_dataset_from_arrays(sets[True].data, sets[True].targets, sets[False].data,
                                     sets[False].targets, name=name, source="torchvision",
                                     n_train=n_train, n_val=n_val, n_test=n_test)
